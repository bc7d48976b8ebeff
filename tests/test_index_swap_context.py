"""Data checks for the 2016 snapshot's context facts (assets/snapshots/leaders_2016_context.csv).

The issue: "the 2016 snapshot names a previous holder or a known successor wherever the office
article of that date would". The context table lists, per position of leaders.csv, who held the
office before the 2016 holder and who (if anyone) was already elected, appointed or designated by
31 Dec 2016 to take over; these tests check the 2016 office articles against it, and that neither
snapshot mentions a year after its date. Plain CSV/JSON reading only: no models are loaded.
"""

from __future__ import annotations

import csv
import json
import re
from pathlib import Path

import pytest

from rag_core.index_swap.judge import names_holder

ROOT = Path(__file__).resolve().parents[1]
ASSETS = ROOT / "assets"
SNAPSHOTS = ASSETS / "snapshots"
CONTEXT = SNAPSHOTS / "leaders_2016_context.csv"
CONTEXT_COLUMNS = ["position", "predecessor", "successor_known", "note"]


def _read_csv(path: Path) -> list[dict[str, str]]:
    with path.open(encoding="utf-8", newline="") as f:
        return list(csv.DictReader(f))


@pytest.fixture(scope="module")
def leaders() -> list[dict[str, str]]:
    return _read_csv(ASSETS / "leaders.csv")


@pytest.fixture(scope="module")
def context() -> list[dict[str, str]]:
    return _read_csv(CONTEXT)


def _passages(year: int) -> list[dict]:
    path = SNAPSHOTS / f"leaders_{year}.jsonl"
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]


@pytest.fixture(scope="module")
def office_2016() -> dict[str, str]:
    """position -> text of its 2016 office article (one per position)."""
    out: dict[str, str] = {}
    for p in _passages(2016):
        if p["kind"] == "office":
            assert p["position"] not in out, p["id"]
            out[p["position"]] = p["text"]
    return out


@pytest.fixture(scope="module")
def rows(leaders, context, office_2016) -> list[tuple[dict, dict, str]]:
    """(leaders row, context row, 2016 office article) per position, after checking they line up."""
    if [r["position"] for r in context] != [r["position"] for r in leaders]:
        pytest.fail("context positions differ from leaders.csv (see the positions test)", pytrace=False)
    return [(lead, ctx, office_2016[lead["position"]]) for lead, ctx in zip(leaders, context)]


# ---------------------------------------------------------------- the table itself


def test_context_columns_exact():
    header = CONTEXT.read_text(encoding="utf-8").splitlines()[0]
    assert header.split(",") == CONTEXT_COLUMNS


def test_context_has_the_positions_of_leaders_in_order(leaders, context):
    positions = [r["position"] for r in context]
    dupes = sorted({p for p in positions if positions.count(p) > 1})
    assert not dupes, f"duplicate positions: {dupes}"
    expected = [r["position"] for r in leaders]
    missing = [p for p in expected if p not in positions]
    extra = [p for p in positions if p not in expected]
    assert not missing and not extra, f"missing: {missing}; not in leaders.csv: {extra}"
    out_of_order = [(i, got, want) for i, (got, want) in enumerate(zip(positions, expected)) if got != want]
    assert not out_of_order, f"order differs from leaders.csv (row, got, want): {out_of_order[:5]}"


def test_no_cell_is_the_2016_holder(rows):
    same = [
        lead["position"]
        for lead, ctx, _ in rows
        if lead["holder_2016"] in (ctx["predecessor"], ctx["successor_known"])
    ]
    assert not same, f"predecessor/successor equal to holder_2016: {same}"


def test_empty_predecessor_is_explained(rows):
    """A predecessor is left empty only for an office with no previous holder, and the note says so."""
    unexplained = [
        lead["position"]
        for lead, ctx, _ in rows
        if not ctx["predecessor"].strip()
        and not re.search(r"\bno predecessor\b|\bfirst holder\b", ctx["note"], re.I)
    ]
    assert not unexplained, f"empty predecessor without a 'no predecessor'/'first holder' note: {unexplained}"


# ---------------------------------------------------------------- against the 2016 office articles


def test_2016_office_article_names_the_predecessor(rows):
    missing = [
        (lead["position"], ctx["predecessor"])
        for lead, ctx, text in rows
        if ctx["predecessor"].strip()
        and not names_holder(text, ctx["predecessor"], other=lead["holder_2016"])
    ]
    assert not missing, f"2016 office article does not name the predecessor: {missing}"


def test_2016_office_article_names_the_known_successor(rows):
    missing = [
        (lead["position"], ctx["successor_known"])
        for lead, ctx, text in rows
        if ctx["successor_known"].strip()
        and not names_holder(text, ctx["successor_known"], other=lead["holder_2016"])
    ]
    assert not missing, f"2016 office article does not name the known successor: {missing}"


def test_known_successor_is_the_2018_holder_or_the_note_says_why(rows):
    """Someone known on 31 Dec 2016 to take over is the 2018 holder, unless the note explains who
    came after (it must name the 2018 holder)."""
    bad = [
        (lead["position"], ctx["successor_known"], lead["holder_2018"])
        for lead, ctx, _ in rows
        if ctx["successor_known"].strip()
        and ctx["successor_known"] != lead["holder_2018"]
        and not names_holder(ctx["note"], lead["holder_2018"], other=ctx["successor_known"])
    ]
    assert not bad, f"successor_known differs from holder_2018 and the note does not explain it: {bad}"


# ---------------------------------------------------------------- no year after the snapshot's date

_YEAR = re.compile(r"(?<!\d)(?<!\d[,.])((?:19|20)\d\d)(?:\s*[–-]\s*(\d\d)(?!\d))?(?!\d|[,.]\d)")


def years_mentioned(text: str) -> list[int]:
    """4-digit years 1900-2099 in `text`, with the end of a short range ("2014–15" -> 2014, 2015).

    Digits inside longer numbers ("40,000", "1,200") do not count.
    """
    out: list[int] = []
    for m in _YEAR.finditer(text):
        start = int(m.group(1))
        out.append(start)
        if m.group(2):
            end = start // 100 * 100 + int(m.group(2))
            if end > start:
                out.append(end)
    return out


def later_year_offenders(passages: list[dict], year: int) -> list[tuple[str, list[int]]]:
    return [
        (p["id"], later) for p in passages if (later := [y for y in years_mentioned(p["text"]) if y > year])
    ]


def test_year_finder_on_constructed_text():
    assert years_mentioned("Elected in 2012, re-elected in 2016.") == [2012, 2016]
    assert years_mentioned("The Ebola epidemic of 2014–15") == [2014, 2015]
    assert years_mentioned("about 1,200 members and 40,000 votes; 12 billion dollars") == []
    fake = [{"id": "x-1", "text": "The election is due in 2017."}, {"id": "x-2", "text": "Since 1998."}]
    assert later_year_offenders(fake, 2016) == [("x-1", [2017])]
    assert later_year_offenders([{"id": "x-3", "text": "the 2016–17 season"}], 2016) == [("x-3", [2017])]


@pytest.mark.parametrize("year", [2016, 2018])
def test_no_passage_mentions_a_year_after_its_snapshot(year):
    passages = _passages(year)
    assert passages
    offenders = later_year_offenders(passages, year)
    assert not offenders, f"{len(offenders)} passage(s) of {year} mention a later year: {offenders}"
