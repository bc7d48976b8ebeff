"""Retrieval metrics on a hand-computed example, the error split, and two saved runs compared."""

from __future__ import annotations

import math
import os
import time

import pandas as pd
import pytest

from rag_core.analysis.evaluation.question_result import ModeResult, QuestionResult
from rag_core.analysis.evaluation.retrieval_metrics import (
    FROM_WEIGHTS,
    MISS,
    READ_WRONG,
    RIGHT_READ,
    error_split,
    ndcg,
    retrieval_metrics,
)
from rag_core.analysis.evaluation.run_compare import RIGHT, WRONG, compare_results
from rag_core.analysis.evaluation.runs import EvalRun, load_run, save_run

from conftest import ROOT, run_cli, visit

SEQ = "rag-sequence"


def result(q: str, ranks: list[int], em: bool, verdicts=(), answer: str | None = None) -> QuestionResult:
    m = ModeResult(answer or ("gold" if em else "other"), em, em, 0.5, 0.5, list(verdicts))
    return QuestionResult(
        q, ["gold"], "", {SEQ: m}, bool(ranks), ranks[0] if ranks else None, answer_ranks=ranks
    )


def test_retrieval_metrics_on_a_hand_computed_example():
    results = [
        result("q1", [1, 3], True),
        result("q2", [2], False),
        result("q3", [], True),
        result("q4", [], False),
    ]
    got = retrieval_metrics(results, 5)
    assert got["hit@1"] == 0.25
    assert got["recall@5"] == 0.5
    assert got["MRR@5"] == pytest.approx((1 + 1 / 2) / 4)
    dcg_q1 = (1 + 1 / math.log2(4)) / (1 + 1 / math.log2(3))  # ranks 1 and 3; ideal 1 and 2
    assert got["nDCG@5"] == pytest.approx((dcg_q1 + 1 / math.log2(3)) / 4)
    split = error_split(results, SEQ)
    assert {c: v["n"] for c, v in split.items()} == {RIGHT_READ: 1, READ_WRONG: 1, MISS: 1, FROM_WEIGHTS: 1}
    assert split[FROM_WEIGHTS]["examples"] == ["q3"]


def test_ranks_past_k_do_not_count():
    assert ndcg([6], 5) == 0.0
    assert retrieval_metrics([result("q", [2, 7], True)], 1) == {
        "hit@1": 0.0,
        "recall@1": 1.0,
        "MRR@1": 0.0,
        "nDCG@1": 0.0,
    }


def test_a_run_saved_before_every_rank_was_kept_has_no_ndcg():
    old = QuestionResult.from_dict(
        {"question": "q", "answers": ["a"], "modes": {}, "recall": True, "answer_rank": 2}
    )
    assert old.answer_ranks is None
    assert retrieval_metrics([old], 5)["nDCG@5"] is None
    assert retrieval_metrics([old], 5)["MRR@5"] == 0.5


def test_two_saved_runs_compared_equal_the_difference_of_their_own_tables(tmp_path):
    a = EvalRun(
        [
            result("q1", [1], True),
            result("q2", [1], False, ["evidence-ignored"]),
            result("q3", [], False),
            result("q1", [1], False),
            result("only A", [1], True),
        ],
        {"k": 1},
    )
    b = EvalRun(
        [
            result("q1", [1], True),
            result("q2", [1], True),
            result("q3", [], False, ["retrieval-miss"]),
            result("q1", [1], True),
            result("only B", [1], True),
        ],
        {"k": 5},
    )
    ra, rb = load_run(save_run(a, "a", tmp_path)), load_run(save_run(b, "b", tmp_path))
    cmp = compare_results(ra.results, rb.results, SEQ)
    fa, fb = ra.frame(), rb.frame()
    em_a = dict(zip(fa.question + fa.index.astype(str), fa.em))  # each run's own table, row by row
    em_b = dict(zip(fb.question + fb.index.astype(str), fb.em))
    fixed = sum(1 for key in em_a if key in em_b and em_a[key] == 0 and em_b[key] == 1)
    broken = sum(1 for key in em_a if key in em_b and em_a[key] == 1 and em_b[key] == 0)
    assert cmp.counts() == {
        "same": 4 - fixed - broken,
        "fixed": fixed,
        "broken": broken,
        "only in A": 1,
        "only in B": 1,
    }
    assert (fixed, broken) == (2, 0)
    assert cmp.flipped("fixed") == ["q2", "q1"]  # the second "q1" is paired with the second "q1"
    trans = {(r.outcome_a, r.outcome_b): r.questions for r in cmp.transitions().itertuples()}
    assert trans == {
        (RIGHT, RIGHT): 1,
        ("Evidence ignored", RIGHT): 1,
        (WRONG, "Retrieval miss"): 1,
        (WRONG, RIGHT): 1,
    }
    assert sum(trans.values()) == len(cmp.rows)


def test_eval_compare_on_the_command_line(tmp_path):
    a = EvalRun(
        [result("q1", [1], False, ["evidence-ignored"]), result("=q2", [1], True)],
        {"k": 1, "file": "dev.jsonl"},
    )
    b = EvalRun([result("q1", [1], True), result("=q2", [1], True)], {"k": 5, "file": "dev.jsonl"})
    env = {"RAG_LOUPE_CACHE": str(tmp_path / "cache")}
    for run, name in ((a, "k1"), (b, "k5")):
        save_run(run, name, tmp_path / "cache" / "eval")
    out = run_cli(
        "eval",
        "--compare",
        "k1",
        str(tmp_path / "cache" / "eval" / "k5.json"),
        "--csv",
        tmp_path / "c.csv",
        env=env,
    )
    assert out.returncode == 0, out.stderr
    assert "A 50.0% -> B 100.0%" in out.stdout and "fixed 1 · broken 0 · unchanged 1" in out.stdout
    assert "questions whose verdict changed (1):" in out.stdout
    csv = pd.read_csv(tmp_path / "c.csv")
    assert list(csv.change) == ["fixed", "same"] and list(csv.question) == ["q1", "'=q2"]  # spreadsheet-safe
    missing = run_cli("eval", "--compare", "k1", "nope", env=env)
    assert (
        missing.returncode == 2
        and missing.stderr.count("\n") == 1
        and "no saved evaluation run 'nope'" in missing.stderr
    )


def test_the_eval_page_shows_the_metrics_and_compares_two_runs(tmp_path, monkeypatch):
    """The page's numbers are the engine's: the retrieval metrics of the chosen run, and EM in A and B
    of the comparison with the other saved run, with the transitions drawn as a Sankey."""
    from streamlit.testing.v1 import AppTest

    monkeypatch.setenv("RAG_LOUPE_CACHE", str(tmp_path))
    a = EvalRun(
        [result("q1", [2], False, ["evidence-ignored"]), result("q2", [1, 2], True), result("q3", [], False)],
        {"k": 2, "file": "dev.jsonl"},
    )
    b = EvalRun(
        [result("q1", [2], True), result("q2", [1, 2], False, ["search-error"]), result("q3", [], True)],
        {"k": 5, "file": "dev.jsonl"},
    )
    path_b = save_run(b, "b")
    path_a = save_run(a, "a")
    os.utime(path_a, (time.time() + 5, time.time() + 5))  # run A is the newest: the page opens on it
    at = AppTest.from_file(str(ROOT / "app/main.py"), default_timeout=300)
    at.session_state["index_name"] = "wiki"
    visit(at, "eval.py")
    shown = {m.label: m.value for m in at.metric}
    want = retrieval_metrics(a.results, 2)
    assert shown["hit@1"] == f"{want['hit@1']:.1%}" and shown["MRR@2"] == f"{want['MRR@2']:.3f}"
    cmp = compare_results(a.results, b.results, SEQ)
    assert shown["EM in A"] == f"{cmp.em()[0]:.1%}" and shown["EM in B"] == f"{cmp.em()[1]:.1%}"
    assert shown["fixed (wrong in A, right in B)"] == "2" and shown["broken (right in A, wrong in B)"] == "1"
    assert [box for box in at.selectbox if box.label == "Compare this run (A) with run B"][0].value == path_b
    charts = [c for c in at.get("plotly_chart")]
    assert any('"type":"sankey"' in c.proto.spec.replace(" ", "") for c in charts)


def test_the_comparison_offers_runs_of_the_same_question_file_first(tmp_path, monkeypatch):
    from streamlit.testing.v1 import AppTest

    monkeypatch.setenv("RAG_LOUPE_CACHE", str(tmp_path))
    same = save_run(EvalRun([result("q1", [1], True)], {"k": 1, "file": "dev.jsonl"}), "same")
    other = save_run(EvalRun([result("x", [1], True)], {"k": 1, "file": "test.jsonl"}), "other")
    current = save_run(EvalRun([result("q1", [1], False)], {"k": 5, "file": "dev.jsonl"}), "current")
    for i, p in enumerate((same, other, current)):  # newest last: the page opens on `current`
        os.utime(p, (time.time() + i, time.time() + i))
    at = AppTest.from_file(str(ROOT / "app/main.py"), default_timeout=300)
    at.session_state["index_name"] = "wiki"
    visit(at, "eval.py")
    box = [b for b in at.selectbox if b.label == "Compare this run (A) with run B"][0]
    assert box.value == same


def test_runs_made_with_the_stuffed_reading_compare_it_as_a_third_mode(tmp_path, monkeypatch):
    """Two runs that both read stuffed: the comparison offers it beside the two marginals and its EM
    are the stuffed answers'; the questions table has its answer and EM as a column of their own."""
    from streamlit.testing.v1 import AppTest

    def stuffed_result(q: str, seq_em: bool, stuffed_em: bool) -> QuestionResult:
        r = result(q, [1], seq_em)
        r.modes["stuffed"] = ModeResult("gold" if stuffed_em else "stuffed-other", stuffed_em, stuffed_em)
        return r

    monkeypatch.setenv("RAG_LOUPE_CACHE", str(tmp_path))
    a = EvalRun([stuffed_result("q1", True, False), stuffed_result("q2", True, False)], {"k": 5, "file": "d"})
    b = EvalRun([stuffed_result("q1", True, True), stuffed_result("q2", False, False)], {"k": 5, "file": "d"})
    save_run(b, "b")
    path_a = save_run(a, "a")
    os.utime(path_a, (time.time() + 5, time.time() + 5))
    at = AppTest.from_file(str(ROOT / "app/main.py"), default_timeout=300)
    at.session_state["index_name"] = "wiki"
    visit(at, "eval.py")
    radio = at.radio(key="eval_compare_mode")
    assert list(radio.options) == ["rag-token", "rag-sequence", "stuffed"]
    radio.set_value("stuffed").run()
    shown = {m.label: m.value for m in at.metric}
    assert (shown["EM in A"], shown["EM in B"]) == ("0.0%", "50.0%")
    assert shown["fixed (wrong in A, right in B)"] == "1"
    questions = next(d.value for d in at.dataframe if "stuffed ✓" in d.value.columns)
    assert list(questions["stuffed"]) == ["stuffed-other", "stuffed-other"]
