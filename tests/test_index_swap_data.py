"""Data checks for the index hot-swap experiment: leaders.csv and the 2016/2018 snapshots."""

from __future__ import annotations

import re
from pathlib import Path

import pandas as pd
import pytest

from rag_core.index_swap.judge import names_holder
from rag_core.retrieval.snapshots import (
    LEADER_COLUMNS,
    fold,
    load_leaders,
    load_snapshot,
    stale_base_passages,
)

ASSETS = Path(__file__).resolve().parents[1] / "assets"
ID_RE = re.compile(r"^l(2016|2018)-[a-z0-9]+(?:-[a-z0-9]+)*-\d+$")


@pytest.fixture(scope="module")
def leaders() -> pd.DataFrame:
    return load_leaders(ASSETS / "leaders.csv")


@pytest.fixture(scope="module")
def snaps() -> dict[int, list[dict]]:
    return {year: load_snapshot(year, ASSETS) for year in (2016, 2018)}


def names(text: str, name: str) -> bool:
    """Whether ``text`` names ``name`` as whole words, ignoring case and accents."""
    pat = r"(?<![\w-])" + re.escape(fold(name).lower()) + r"(?![\w-])"
    return re.search(pat, fold(text).lower()) is not None


# ---------------------------------------------------------------- leaders.csv


def test_columns_exact():
    header = (ASSETS / "leaders.csv").read_text(encoding="utf-8").splitlines()[0]
    assert tuple(header.split(",")) == LEADER_COLUMNS


def test_at_least_80_positions(leaders):
    assert len(leaders) >= 80


def test_no_empty_cells(leaders):
    for col in ("position", "country", "holder_2016", "holder_2018", "question", "note"):
        assert (leaders[col].str.strip() != "").all(), col


def test_no_duplicate_positions_or_questions(leaders):
    assert not leaders["position"].duplicated().any()
    assert not leaders["question"].duplicated().any()


def test_holders_changed(leaders):
    same = leaders[leaders["holder_2016"].map(fold) == leaders["holder_2018"].map(fold)]
    assert same.empty, same["position"].tolist()


def test_questions_ask_for_the_position(leaders):
    for pos, q in zip(leaders["position"], leaders["question"]):
        assert q.startswith("Who is the ") and q.endswith("?"), q
        assert pos in q, (pos, q)


def test_holders_are_full_names(leaders):
    for col in ("holder_2016", "holder_2018"):
        for name in leaders[col]:
            assert len(name.split()) >= 2, name


def test_nobody_leaves_one_listed_office_for_another(leaders):
    # Otherwise the 2016 snapshot would have to name a 2018 holder.
    clash = set(leaders["holder_2016"].map(fold)) & set(leaders["holder_2018"].map(fold))
    assert not clash


def test_known_rows_and_exclusions(leaders):
    by_pos = leaders.set_index("position")
    assert by_pos.loc["President of the United States", "holder_2016"] == "Barack Obama"
    assert by_pos.loc["President of the United States", "holder_2018"] == "Donald Trump"
    assert by_pos.loc["President of France", "holder_2016"] == "François Hollande"
    assert by_pos.loc["President of France", "holder_2018"] == "Emmanuel Macron"
    assert by_pos.loc["Secretary-General of the United Nations", "holder_2016"] == "Ban Ki-moon"
    assert by_pos.loc["President of South Korea", "holder_2016"] == "Hwang Kyo-ahn"
    assert "acting" in by_pos.loc["President of South Korea", "note"]
    # Same holder on both dates: must not be listed.
    assert "Prime Minister of the United Kingdom" not in by_pos.index
    assert "Chancellor of Germany" not in by_pos.index


# ---------------------------------------------------------------- snapshots


def test_passage_ids_unique_and_well_formed(snaps):
    all_ids = [p["id"] for year in snaps for p in snaps[year]]
    assert len(all_ids) == len(set(all_ids))
    for year, ps in snaps.items():
        for p in ps:
            m = ID_RE.match(p["id"])
            assert m and int(m.group(1)) == year, p["id"]
            assert p["topic"] == "World leaders"


def test_passage_lengths_fit_one_chunk(snaps):
    for ps in snaps.values():
        for p in ps:
            assert 60 <= len(p["text"].split()) <= 130, p["id"]


KINDS = ("office", "holder", "other")


def by_position(snaps, year) -> dict[str, dict[str, dict]]:
    out: dict[str, dict[str, dict]] = {}
    for p in snaps[year]:
        assert p["kind"] not in out.setdefault(p["position"], {}), p["id"]
        out[p["position"]][p["kind"]] = p
    return out


def test_both_years_are_written_the_same_way(leaders, snaps):
    """Per position and year: the office's article, the holder's biography and the other year's
    person's biography, one each; equal counts and about equal lengths in both years."""
    per = {y: by_position(snaps, y) for y in (2016, 2018)}
    for pos in leaders["position"]:
        for y in (2016, 2018):
            assert sorted(per[y].get(pos, {})) == sorted(KINDS), (y, pos)
    assert len(snaps[2016]) == len(snaps[2018]) == 3 * len(leaders)
    mean = {y: sum(len(p["text"].split()) for p in snaps[y]) / len(snaps[y]) for y in (2016, 2018)}
    assert abs(mean[2016] - mean[2018]) <= 0.1 * mean[2018], mean


# People whose passage names them only by a formal first name the judge does not tie to the
# familiar one they go by ("Michael Richard Pompeo" is another man than "Mike Pompeo" to judge 4, as
# are "Margaret Coldwell Hassan" and "John B. King Jr."): a known gap of the judge, listed whole, so
# the test fails when the set changes either way (a judge that learns such names empties it).
FORMAL_NAME_ONLY = {
    "Ash Carter", "Ben Carson", "Bill Walker", "Bob McDonald", "Chris Christie", "Chuck Schumer",
    "Dan Coats", "Ed Lee", "Jeff Colyer", "Jim Justice", "Jim Mattis", "John King Jr.", "Josh Earnest",
    "Kim Reynolds", "Maggie Hassan", "Mike Dunleavy", "Mike Parson", "Mike Pompeo", "Pat McCrory",
    "Phil Murphy", "Phil Scott", "Rick Perry", "Sam Brownback", "Sonny Perdue", "Terry McAuliffe",
    "Tom Perez", "Tom Vilsack",
}  # fmt: skip


def test_each_passage_is_about_whom_its_kind_says(leaders, snaps):
    unnamed = set()
    for year in (2016, 2018):
        per = by_position(snaps, year)
        for pos, h16, h18 in zip(leaders["position"], leaders["holder_2016"], leaders["holder_2018"]):
            holder, other = (h16, h18) if year == 2016 else (h18, h16)
            kinds = per[pos]
            assert kinds["office"]["title"] == pos, (year, pos)
            assert kinds["holder"]["title"] == holder, (year, pos)
            assert kinds["other"]["title"] == other, (year, pos)
            # each names its person as the judge names people (full name or distinctive surname)
            if not names_holder(kinds["office"]["text"], holder, other):
                unnamed.add(holder)
            if not names_holder(kinds["holder"]["text"], holder, other):
                unnamed.add(holder)
            if not names_holder(kinds["other"]["text"], other, holder):
                unnamed.add(other)
    assert unnamed == FORMAL_NAME_ONLY, (unnamed - FORMAL_NAME_ONLY, FORMAL_NAME_ONLY - unnamed)


def test_the_2018_office_articles_name_the_predecessor(leaders, snaps):
    """As articles do: the office article of 31 Dec 2018 names who held it before (the 2016 holder,
    unless someone served in between)."""
    per = by_position(snaps, 2018)
    missing = [
        pos
        for pos, h16, h18 in zip(leaders["position"], leaders["holder_2016"], leaders["holder_2018"])
        if not names_holder(per[pos]["office"]["text"], h16, h18)
    ]
    assert len(missing) <= 0.1 * len(leaders), missing


@pytest.mark.parametrize("year", [2016, 2018])
def test_no_single_template(snaps, year):
    """No six-word phrase opens or fills most office articles (real articles vary their wording)."""
    counts: dict[tuple, int] = {}
    offices = [p for p in snaps[year] if p["kind"] == "office"]
    for p in offices:
        words = re.sub(r"[^\w\s]", "", p["text"].lower()).split()
        for gram in {tuple(words[i : i + 6]) for i in range(len(words) - 5)}:
            counts[gram] = counts.get(gram, 0) + 1
    # phrases with the office's own name in them differ anyway; count only the shared wording
    common = max(counts.values())
    assert common <= 0.25 * len(offices), [g for g, c in counts.items() if c == common][:3]


@pytest.mark.parametrize("year,later", [(2016, r"20(1[7-9]|[2-9]\d)"), (2018, r"20(19|[2-9]\d)")])
def test_no_year_after_the_snapshot(snaps, year, later):
    pat = re.compile(r"\b" + later + r"\b")
    bad = [p["id"] for p in snaps[year] if pat.search(p["text"])]
    assert not bad, bad[:10]


def test_load_snapshot_rejects_other_years():
    with pytest.raises(ValueError):
        load_snapshot(2017, ASSETS)


# ---------------------------------------------------------------- stale rule


def _toy_leaders() -> pd.DataFrame:
    return pd.DataFrame(
        [
            {
                "position": "Prime Minister of Testland",
                "country": "Testland",
                "holder_2016": "Jane May",
                "holder_2018": "Piotr Wiśniewski",
                "question": "Who is the Prime Minister of Testland?",
                "note": "",
            },
            {
                "position": "President of Korea Test",
                "country": "South Korea",
                "holder_2016": "Kim Jong-yang",
                "holder_2018": "Lee Nak-yon",
                "question": "Who is the President of Korea Test?",
                "note": "",
            },
        ]
    )


def test_stale_rule_on_constructed_example():
    base = [
        {"title": "May", "text": "May is the fifth month of the year."},  # 0 kept
        {"title": "Testland", "text": "Jane May led the government for years."},  # 1 full
        {"title": "Budget", "text": "The budget was drafted by Wisniewski."},  # 2 surname, folded
        {"title": "Grammar", "text": "Wiśniewskiego is a declined form."},  # 3 kept
        {"title": "prime minister of testland", "text": "An office."},  # 4 position
        {"title": "Card games", "text": "Playing a wisniewski card is not a thing."},  # 5 kept: lower case
        {"title": "Kim", "text": "Kim is a common Korean family name; Lee is another."},  # 6 kept
        {"title": "Police", "text": "KIM JONG-YANG chaired the meeting."},  # 7 full, any case
        {"title": "Anything", "text": "Nak-yon alone is not enough."},  # 8 kept
    ]
    assert stale_base_passages(base, _toy_leaders()) == [1, 2, 4, 7]


def test_stale_rule_on_real_leaders(leaders):
    base = [
        {"title": "Donald Trump", "text": "Donald Trump is an American businessman."},
        {"title": "Paris", "text": "Paris is the capital of France."},
        {"title": "Élysée", "text": "Residence of Emmanuel Macron."},
        {"title": "Trumpet", "text": "The trumpet is a brass instrument."},
        {"title": "President of the United States", "text": "The head of state."},
        {"title": "Moon", "text": "The Moon is Earth's only natural satellite."},
    ]
    assert stale_base_passages(base, leaders) == [0, 2, 4]
