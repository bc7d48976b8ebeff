"""The index hot-swap experiment (paper §4.5): the judge, the indexes, the toggle, the CLI, the page.

Real models, kept fast: K=3, short answers, RAG-Token only. The toggle test computes the first
positions of leaders.csv with the same settings the CLI test asks for, so the CLI reads them from
the experiment cache (it still computes them when run alone).
"""

from __future__ import annotations

import csv
from pathlib import Path

import pandas as pd
import pytest

from rag_core.config import DECODE_NAMES, READING_LABELS, STUFFED, AnswerSettings
from rag_core.index_swap import judge, results, store
from rag_core.index_swap import run as index_swap_run
from rag_core.retrieval.snapshots import load_leaders

from conftest import cache_sharing

ROOT = Path(__file__).resolve().parent.parent
FAST = dict(k=3, max_new_tokens=8, decode="token")  # the test settings, shared by the toggle and CLI tests
FAST_ARGS = ["-k", "3", "--max-new-tokens", "8", "--decode", "token"]
SAMPLE = ["President of the United States", "President of Chile", "Prime Minister of Italy"]


# ------------------------------------------------------------------------------------------ judge


@pytest.mark.parametrize(
    "answer, name, other, expected",
    [
        ("Donald Trump", "Donald Trump", "Barack Obama", True),
        ("Trump", "Donald Trump", "Barack Obama", True),  # the surname alone
        ("DONALD TRUMP.", "Donald Trump", None, True),  # case and punctuation
        ("Barack Obama", "Donald Trump", "Barack Obama", False),  # the wrong holder
        ("a trumpet player", "Donald Trump", None, False),  # whole words only
        ("", "Donald Trump", None, False),
        ("Sebastian Pinera", "Sebastián Piñera", None, True),  # accents either way
        ("Milo Đukanović", "Milo Dukanovic", None, True),
        ("Aleksandar Vucic", "Aleksandar Vučić", "Tomislav Nikolić", True),
        ("Andrés Manuel López Obrador", "Andrés Manuel López Obrador", None, True),  # multi-word surname
        ("López Obrador", "Andrés Manuel López Obrador", None, True),
        ("Enrique Peña Nieto", "Andrés Manuel López Obrador", "Enrique Peña Nieto", False),
        ("Peña Nieto", "Enrique Peña Nieto", None, True),
        ("John King", "John King Jr.", "John B. King", True),  # suffix dropped
        ("Moon Jae-in", "Moon Jae-in", "Hwang Kyo-ahn", True),  # family name first: full name
        ("Jacob Zuma", "Nkosazana Dlamini-Zuma", "Moussa Faki", False),  # a hyphenated name is one word
        ("Dlamini-Zuma", "Nkosazana Dlamini-Zuma", "Moussa Faki", True),
        (
            "Pravind Jugnauth",
            "Anerood Jugnauth",
            "Pravind Jugnauth",
            False,
        ),  # shared surname: first name decides
        ("Pravind Jugnauth", "Pravind Jugnauth", "Anerood Jugnauth", True),
        ("Jugnauth", "Pravind Jugnauth", "Anerood Jugnauth", False),
        ("Hillary Clinton", "Bill Clinton", None, False),  # the first name contradicts the holder's
        ("President Trump", "Donald Trump", None, True),  # a title is not a first name
        ("Parkash Singh Badal", "Amarinder Singh", "Parkash Singh Badal", False),  # a middle name
        ("Tshering Tobgay", "Lotay Tshering", "Tshering Tobgay", False),  # another's first name
        ("Barack Hussein Obama", "Barack Obama", "Donald Trump", True),  # the holder's own middle name
        ("President Donald John Trump", "Donald Trump", "Barack Obama", True),
        ("Hillary Rodham Clinton", "Bill Clinton", None, False),  # no word of the holder's beside it
    ],
)
def test_names_holder(answer, name, other, expected):
    assert judge.names_holder(answer, name, other) is expected


def test_every_holder_s_own_name_is_right_for_its_year_alone():
    """A right answer is never ambiguous because the other holder's surname is one of its names."""
    leaders = load_leaders(ROOT / "assets" / "leaders.csv")
    for row in leaders.itertuples():
        assert judge.judge(row.holder_2016, row.holder_2016, row.holder_2018) == (True, False, False), row
        assert judge.judge(row.holder_2018, row.holder_2016, row.holder_2018) == (False, True, False), row


def test_judge_both_years():
    assert judge.judge("Barack Obama", "Barack Obama", "Donald Trump") == (True, False, False)
    # naming both holders is ambiguous: right in neither cell
    assert judge.judge("Donald Trump, after Barack Obama", "Barack Obama", "Donald Trump") == (
        False,
        False,
        True,
    )
    assert judge.judge("Hillary Clinton", "Barack Obama", "Donald Trump") == (False, False, False)


def test_table_and_summary_from_rows():
    """The 2×2 table is the mean of the judged cells: rows = index, columns = leaders' year."""
    rows = []
    for idx, c16, c18 in (
        ("2016", True, False),
        ("2016", True, False),
        ("2018", False, True),
        ("2018", True, False),
    ):
        rows.append(
            {c: "" for c in results.ROW_COLUMNS}
            | {
                "index": idx,
                "decoding": "rag-token",
                "correct_2016": c16,
                "correct_2018": c18,
                "passages_name_2016": 1,
                "passages_name_2018": 1,
                "position": f"p{len(rows) % 2}",
            }
        )
    closed = [
        {"position": "p0", "correct_2016": False, "correct_2018": True},
        {"position": "p1", "correct_2016": False, "correct_2018": False},
    ]
    r = results.ExperimentResult(rows, closed, {}, "k", complete=True)
    t = r.table("rag-token")
    assert t.loc["index 2016", "leaders 2016"] == 1.0 and t.loc["index 2016", "leaders 2018"] == 0.0
    assert t.loc["index 2018", "leaders 2018"] == 0.5 and t.loc["index 2018", "leaders 2016"] == 0.5
    assert r.closed_book_accuracy() == {"2016": 0.0, "2018": 0.5}
    assert r.override("rag-token")["other_year"] == 1 and len(r.failures("rag-token")) == 1
    assert not r.goal_met("rag-token")
    # the one wrong answer names the 2016 holder, which a retrieved passage names and closed-book does not
    assert r.finding("rag-token").startswith(
        "1 of 4 answers"
    ) and "copy the other holder from the retrieved passages" in r.finding("rag-token")
    closed[1]["correct_2016"] = True  # now the closed-book model gives that same holder: one each way
    assert "Neither copying from the passages nor the model's memory" in results.ExperimentResult(
        rows, closed, {}, "k", complete=True
    ).finding("rag-token")
    for row in rows:  # drop the passages' names: only memory is left
        row["passages_name_2016"] = row["passages_name_2018"] = 0
    assert "the model's memory overrides the passages" in results.ExperimentResult(
        rows, closed, {}, "k", complete=True
    ).finding("rag-token")


# ------------------------------------------------------------------------------------------ the indexes


@pytest.fixture(scope="module")
def named():
    from rag_core.retrieval.catalog import named_passages

    return {y: named_passages(y)[0] for y in results.YEARS}


def test_every_position_has_passages_in_both_indexes(named):
    """Each index holds, for every position, a passage naming the position and that year's holder."""
    leaders = store.leaders_frame()
    for year in results.YEARS:
        texts = [p.title + "\n" + p.text for p in named[year] if p.id.startswith(f"l{year}-")]
        folded = [t.lower() for t in texts]
        for row in leaders.itertuples():
            holder, other = getattr(row, f"holder_{year}"), getattr(row, f"holder_{4034 - int(year)}")
            has = [
                t
                for t, f in zip(texts, folded)
                if row.position.lower() in f and judge.names_holder(t, holder, other)
            ]
            assert has, f"index {year}: no passage on {row.position} naming {holder}"


def test_indexes_differ_only_in_snapshots(named):
    ids = {y: {p.id for p in named[y]} for y in results.YEARS}
    base16 = {i for i in ids["2016"] if not i.startswith("l2016-")}
    base18 = {i for i in ids["2018"] if not i.startswith("l2018-")}
    assert base16 == base18  # the same base passages (stale ones removed from both)
    assert not any(i.startswith("l2018-") for i in ids["2016"]) and not any(
        i.startswith("l2016-") for i in ids["2018"]
    )


# ------------------------------------------------------------------------------------------ real models


@pytest.fixture(scope="module")
def pipes(default_pipeline):
    """Both year pipelines over the shared models. On a busy shared machine (load >= cores) torch's
    threads fight other processes for the cores: measured 4-5x slower at 2 threads than at 1 with a
    load of 4 on 2 cores, so these tests then run single-threaded."""
    import os

    import torch

    threads = torch.get_num_threads()
    if os.getloadavg()[0] >= (os.cpu_count() or 1):
        torch.set_num_threads(1)
    yield index_swap_run.year_pipelines(lambda: default_pipeline)
    torch.set_num_threads(threads)


def test_swap_keeps_the_same_models(pipes):
    assert pipes["2016"].models is pipes["2018"].models
    assert pipes["2016"].index is not pipes["2018"].index
    assert (pipes["2016"].index_name, pipes["2018"].index_name) == ("2016", "2018")


@pytest.mark.slow
def test_toggle_changes_passages_and_answer(pipes):
    """Swapping the index swaps the passages under the same models, every answer is judged by the
    judge, and for some sample positions the answer changes with the index and names that index's
    holder (the data is fair, so the small model is not right everywhere: which ones is measured,
    not assumed)."""
    cfg = index_swap_run.experiment_of(**FAST)
    wanted = SAMPLE + [p for p in store.leaders_frame(2)["position"] if p not in SAMPLE]
    result = index_swap_run.run_experiment(cfg, lambda: pipes, positions=wanted, use_cache=False)
    frame = {(r["position"], r["index"]): r for r in result.rows}
    changed = right = 0
    for position in SAMPLE:
        old, new = frame[(position, "2016")], frame[(position, "2018")]
        assert set(old["passages"]) != set(new["passages"]), position
        for r in (old, new):
            assert (r["correct_2016"], r["correct_2018"], r["ambiguous"]) == judge.judge(
                r["answer"], r["holder_2016"], r["holder_2018"]
            )
        changed += old["answer"] != new["answer"]
        right += bool(old["correct_2016"]) + bool(new["correct_2018"])
    shown = [(p, frame[(p, "2016")]["answer"], frame[(p, "2018")]["answer"]) for p in SAMPLE]
    assert changed >= 1 and right >= 1, shown
    assert len(result.closed) == len(wanted)


@pytest.mark.slow
@pytest.mark.parametrize("decode", store.SHIPPED_READINGS)
def test_the_shipped_run_is_this_code_and_data(pipes, decode):
    """assets/leaders_run.json (the two marginals) and leaders_run_stuffed.json (the stuffed reading)
    are what the Index swap page shows at first start. Each one's fingerprint must equal today's key
    (models, prompt, snapshots, leaders.csv, settings, judge, decoder), and a sample of positions
    recomputed now gives the same answers and verdicts."""
    cfg = index_swap_run.experiment_of(decode=decode)
    shipped = store.shipped_result(cfg)
    assert shipped is not None, (
        f"the shipped run is stale: rerun `python -m rag_core index-swap --decode {decode} --ship`"
    )
    assert set(shipped.decodings()) == set(DECODE_NAMES[decode])
    assert shipped.complete and shipped.positions == len(store.leaders_frame())
    positions = list(store.leaders_frame()["position"])
    sample = [positions[0]] + [
        next(p for p in positions if results.position_split(p) == s) for s in results.SPLITS
    ]
    live = index_swap_run.run_experiment(cfg, lambda: pipes, positions=sample, use_cache=False)
    keep = ("answer", "correct_2016", "correct_2018", "ambiguous", "passages")
    want = {
        (r["position"], r["index"], r["decoding"]): {k: r[k] for k in keep}
        for r in shipped.rows
        if r["position"] in sample
    }
    got = {(r["position"], r["index"], r["decoding"]): {k: r[k] for k in keep} for r in live.rows}
    assert got == want


def test_cli_limit_csv(tmp_path, capsys):
    from rag_core import cli
    from rag_core.cli import index_swap as index_swap_cli

    out = tmp_path / "leaders.csv"
    assert cli.main(["index-swap", "--limit", "2", "--csv", str(out)] + FAST_ARGS) == 0
    printed = capsys.readouterr().out.splitlines()
    with open(out, newline="", encoding="utf-8") as f:
        rows = list(csv.DictReader(f))
    # each printed cell is the accuracy measured in the CSV's rows, beside the paper's figure
    block = printed[next(i for i, x in enumerate(printed) if "all positions" in x) :]
    for idx in results.YEARS:
        line = next(x for x in block if x.strip().startswith(f"index {idx}"))
        for year in results.YEARS:
            part = [r for r in rows if r["index"] == idx]
            measured = sum(r[f"correct_{year}"] == "True" for r in part) / len(part)
            assert (
                f"{index_swap_cli._pct(measured)} | {index_swap_cli._pct(results.PAPER[(idx, year)])}" in line
            ), (
                line,
                measured,
            )
    assert any(x.startswith("closed-book (no passage)") for x in printed)
    assert len(rows) == 2 * 2  # 2 positions × 2 indexes × 1 decoding
    for col in (
        "position",
        "holder_2016",
        "holder_2018",
        "index",
        "decoding",
        "answer",
        "correct_2016",
        "correct_2018",
    ):
        assert col in rows[0], col
    assert {r["index"] for r in rows} == {"2016", "2018"} and {r["decoding"] for r in rows} == {"rag-token"}


@pytest.mark.slow  # over 5 s on 2 cores
def test_the_experiment_in_the_stuffed_reading_judges_its_answers(pipes, tmp_path, capsys):
    """`--decode stuffed`: each (position, index) row is the stuffed answer of that question on
    that year's index, judged against both years' holders like the marginals' answers."""
    from rag_core import cli

    out = tmp_path / "stuffed.csv"
    args = ["index-swap", "--limit", "1", "--csv", str(out), "-k", "3", "--max-new-tokens", "8"]
    assert cli.main([*args, "--decode", "both"]) == 0  # cached: its records hold no stuffed row
    capsys.readouterr()
    assert cli.main([*args, "--decode", "stuffed"]) == 0
    assert "stuffed, all positions (1): accuracy" in capsys.readouterr().out
    with open(out, newline="", encoding="utf-8") as f:
        rows = list(csv.DictReader(f))
    assert {(r["index"], r["decoding"]) for r in rows} == {("2016", "stuffed"), ("2018", "stuffed")}
    for r in rows:
        cfg = AnswerSettings(k=3, max_new_tokens=8, decode="stuffed")
        trace = pipes[r["index"]].run(r["question"], cfg)
        assert r["answer"] == trace.answer("stuffed").answer
        assert (r["correct_2016"], r["correct_2018"]) == tuple(
            str(v) for v in judge.judge(r["answer"], r["holder_2016"], r["holder_2018"])[:2]
        )


def test_cli_bad_flag_is_one_line_error(capsys):
    from rag_core import cli

    assert cli.main(["index-swap", "--limit", "0"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("error:") and "at least 1" in err[0], err


# ------------------------------------------------------------------------------------------ the page


SWAP_QUESTION = "Who is the President of the United States?"  # the page's first question


@pytest.fixture(scope="module")
def swap_app():
    from streamlit.testing.v1 import AppTest

    at = AppTest.from_file(str(ROOT / "app/main.py"), default_timeout=600)
    at.session_state["k"] = 3
    at.session_state["max_new_tokens"] = 8
    return at


@pytest.mark.slow
def test_index_swap_tables_are_drawn_before_any_model_is_asked(monkeypatch, tmp_path):
    """On a first start the models take a while (the generator is converted, the year indexes
    built): the experiment's shipped tables must not wait for them. With every model call failing,
    the page has drawn both halves' tables beside the paper's numbers before the failure."""
    from streamlit.testing.v1 import AppTest

    from app import state

    def no_model(*args, **kwargs):
        raise RuntimeError("no model in this test")

    monkeypatch.setattr(state, "trace_for", no_model)
    monkeypatch.setattr(state, "pipeline", no_model)
    monkeypatch.setattr(state, "index", no_model)
    # a first start: no live run in the cache (the converted models linked, as the app's first page
    # run has them loaded before this page runs)
    monkeypatch.setenv("RAG_LOUPE_CACHE", str(cache_sharing(tmp_path)))
    at = AppTest.from_file(str(ROOT / "pages/index_swap.py"), default_timeout=120)
    at.run()
    assert [str(e.value) for e in at.exception if "no model in this test" in str(e.value)], (
        at.exception
    )  # it was asked
    tables = [d.value for d in at.dataframe if "paper 2016" in d.value.columns]
    assert len(tables) == 4, len(tables)  # RAG-Token and RAG-Sequence, held-out and tuning halves
    assert any("shipped reference run" in i.value for i in at.info), [i.value for i in at.info]


@pytest.mark.slow  # over 5 s on 2 cores
def test_index_swap_page_shows_both_answers(swap_app):
    at = swap_app
    at.switch_page(str(ROOT / "pages/index_swap.py"))
    at.run()
    assert not at.exception, [e.value for e in at.exception]
    labels = {m.label: m.value for m in at.metric}
    for year in results.YEARS:
        answer = labels.get(f"RAG-Token ({year} index)")
        assert answer and answer != "(empty)", labels
    # each answer's verdict reads in colour: green right for that index, red the other year's holder
    judged = {
        e.value: kind
        for kind in ("success", "warning")
        for e in at.get(kind)
        if e.value.startswith(("RAG-Token:", "RAG-Sequence:"))
    }
    judged.update(
        {
            m.value.removeprefix(":red[**").removesuffix("**]"): "red"
            for m in at.markdown
            if m.value.startswith((":red[**RAG-Token:", ":red[**RAG-Sequence:"))
        }
    )
    assert len(judged) >= 2, judged
    for text, kind in judged.items():
        assert (kind == "success") == text.endswith("right for this index"), (text, kind)
        assert (kind == "red") == text.endswith("wrong for this index"), (text, kind)
    # the same models read different passages on the two indexes (the answers may or may not differ)
    differ = [c.value for c in at.caption if "passages differ between the two indexes" in c.value]
    assert differ and int(differ[0].split()[0]) >= 1, differ
    # no complete live run in the cache: the page shows the shipped reference table at once and
    # offers to recompute it
    assert any("paper 2016" in d.value.columns for d in at.dataframe), "no accuracy table is shown"
    live = store.cached_result(index_swap_run.experiment_of(), partial=True)
    if (
        live is None or not live.complete
    ):  # a fresh machine: the shipped table, and the button to recompute it
        assert any("shipped reference run" in i.value for i in at.info), [i.value for i in at.info]
        buttons = {b.label for b in at.button}
        assert buttons & {"Run the experiment", "Resume the experiment"}, buttons


@pytest.mark.slow
def test_index_swap_page_in_the_stuffed_reading(swap_app, pipes):
    """Reading "stuffed": the one question's card on each index is the stuffed reading's answer (as
    the engine decodes it here, with the session's settings) and no marginal's; the experiment's
    tables are the stuffed run's accuracy on each half (a complete live run's, else the shipped run
    with any live positions over it), and the per-position table offers that reading only."""
    from app.index_swap import index_swap_views

    at = swap_app
    at.switch_page(str(ROOT / "pages/index_swap.py"))
    at.run()
    at.radio(key="swap_reading").set_value("stuffed").run()
    assert not at.exception, [e.value for e in at.exception]
    question = at.session_state["swap_question"] if "swap_question" in at.session_state else SWAP_QUESTION
    labels = {m.label: m.value for m in at.metric}
    for year in results.YEARS:
        want = (
            pipes[year].run(question, AnswerSettings(k=3, max_new_tokens=8, decode="stuffed")).answer(STUFFED)
        )
        card_text = want.answer if want.answer else "(empty)"  # how a card writes an empty answer
        assert labels[f"Stuffed ({year} index)"] == card_text, labels
        assert f"RAG-Token ({year} index)" not in labels
    cfg = index_swap_run.experiment_of(decode="stuffed")
    live, shipped = store.cached_result(cfg, partial=True), store.shipped_result(cfg)
    result = live if live is not None and live.complete else store.overlay(live, shipped)
    tables = [d.value for d in at.dataframe if "paper 2016" in d.value.columns]
    assert len(tables) == 2  # the held-out and the tuning half, in the one reading
    for shown, split in zip(tables, ("test", "tune")):
        want = index_swap_views.accuracy_frame(result.table(STUFFED, split)).rename_axis("").reset_index()
        assert shown.reset_index(drop=True).equals(want), (shown, want)
    assert at.radio(key="swap_dec_stuffed").options == [READING_LABELS[STUFFED]]
    assert list(index_swap_views.READINGS) == list(store.SHIPPED_READINGS)  # the page's = the shipped
    at.radio(key="swap_reading").set_value("both").run()  # back to the paper's readings for the next tests
    assert {f"RAG-Token ({y} index)" for y in results.YEARS} <= {m.label for m in at.metric}


@pytest.mark.parametrize("decode", store.SHIPPED_READINGS)
def test_before_and_after_training_on_the_held_out_half(monkeypatch, decode):
    """The index swap under the untrained base and the trained default, from their shipped runs in
    each of the page's readings: each cell equals a count over the shipped rows done here, and the
    page in that reading shows the table with that reading's rows only."""
    from streamlit.testing.v1 import AppTest

    from app import state
    from rag_core.index_swap import stack_comparison

    shipped = stack_comparison.shipped_by_stack(settings=AnswerSettings(decode=decode))
    assert set(shipped) == {"base", "default"}, (
        f"a stack's shipped run is stale: rerun `index-swap [--preset base] --decode {decode} --ship`"
    )
    assert {d for r in shipped.values() for d in r.decodings()} == set(DECODE_NAMES[decode])
    frame = stack_comparison.held_out_rows(shipped)
    for name, result in shipped.items():
        for decoding in result.decodings():
            row = frame[
                (frame["model"] == stack_comparison.STACK_LABELS[name]) & (frame["decoding"] == decoding)
            ].iloc[0]
            for idx, year in stack_comparison.CELLS:
                rows = [
                    r
                    for r in result.rows
                    if r["decoding"] == decoding
                    and r["index"] == idx
                    and results.position_split(r["position"]) == "test"
                ]
                assert row[stack_comparison.cell_name(idx, year)] == sum(
                    bool(r[f"correct_{year}"]) for r in rows
                ) / len(rows)

    def no_model(*args, **kwargs):
        raise RuntimeError("no model in this test")

    for name in ("trace_for", "pipeline", "index"):
        monkeypatch.setattr(state, name, no_model)
    at = AppTest.from_file(str(ROOT / "pages/index_swap.py"), default_timeout=120)
    at.run()
    if decode != "both":
        at.radio(key="swap_reading").set_value(decode).run()  # (the question's answers need a model)
    assert "Before and after training (held-out half)" in [h.value for h in at.subheader]
    table = next(d.value for d in at.dataframe if "model" in d.value.columns)
    want = frame.copy()
    cells = [c for c in want.columns if c not in ("model", "decoding")]
    want[cells] = want[cells].map(lambda x: f"{100 * x:.0f}%")
    pd.testing.assert_frame_equal(table.reset_index(drop=True), want)  # the paper's row, then each stack's
