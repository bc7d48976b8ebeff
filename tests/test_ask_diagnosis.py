"""`ask QUESTION --expected ANSWER`: the Diagnose panel's verdicts and counterfactuals on the command
line, recomputed here from the engine's separate pieces."""

import json

import pytest

from rag_core import exports
from rag_core.analysis import scoring
from rag_core.analysis.attribution.sentences import attribute
from rag_core.analysis.diagnosis import counterfactual, deep_search, verdicts
from rag_core.analysis.diagnosis import diagnosis_report as report
from rag_core.config import AnswerSettings
from rag_core.marginals import citation, prob

from conftest import run_cli


@pytest.mark.slow
def test_ask_expected_prints_the_panels_verdicts_and_counterfactuals(default_pipeline, tmp_path):
    question, expected = "Who wrote Moby-Dick?", ["Nathaniel Hawthorne"]
    out = run_cli(
        "ask",
        question,
        "-k",
        "3",
        "--expected",
        " | ".join(expected),
        "--json",
        "--sentences",
        "--csv",
        tmp_path / "t.csv",
        "--parquet",
        tmp_path / "t.parquet",
        "--jsonl",
        tmp_path / "t.jsonl",
    )
    assert out.returncode == 0, out.stderr[-2000:]
    got = json.loads(out.stdout)["diagnosis"]
    cfg = AnswerSettings(k=3)
    trace = default_pipeline.run(question, cfg)
    csv, parquet, jsonl = (exports.read_frame(tmp_path / f"t.{f}") for f in ("csv", "parquet", "jsonl"))
    assert len(csv) == len(parquet) == len(jsonl) == len(trace.to_frame())  # one frame, three formats
    assert exports.schema_of(tmp_path / "t.parquet") == f"trace/{exports.SCHEMAS['trace']}"
    forced = scoring.force_answers(default_pipeline, trace, expected)
    closed = default_pipeline.closed_book(trace.question, cfg)
    deep = deep_search.deep_search(default_pipeline, trace, expected)
    d = verdicts.diagnose(trace, expected, None, forced=forced, deep=deep, closed_book=closed)
    assert (got["decoding"], got["answer"], got["correct"], got["closed_book"]) == (
        d.decoding,
        d.answer,
        False,
        closed,
    )
    assert [(v["code"], v["fired"], v["summary"]) for v in got["verdicts"]] == [
        (v.code, v.fired, v.summary) for v in d.verdicts
    ]
    assert [r["removed"] for r in got["counterfactuals"]] == [1, 2, 3]
    for row in got["counterfactuals"]:
        cf = counterfactual.counterfactual(trace, [row["removed"]], None, None, forced)
        for decoding, a in cf.answers.items():
            assert row[decoding]["answer"] == a.answer
            assert row[decoding]["needs_model_call"] == a.needs_model_call
            assert row[decoding]["p"] == (None if a.log_p is None else pytest.approx(prob(a.log_p), abs=1e-9))
    seq = trace.answer("rag-sequence")
    z = int(citation(trace.log_prior, seq.token_logp).argmax())
    att = attribute(default_pipeline, trace.question, trace.hits[z].passage, seq.token_ids)
    rows = [r for r in json.loads(out.stdout)["sentences"] if r["decoding"] == "rag-sequence"]
    assert [r["doc_rank"] for r in rows] == [z + 1] * len(att.sentences)
    assert [r["text"] for r in rows] == att.sentences
    assert [r["delta_logp"] for r in rows] == pytest.approx(att.delta, abs=1e-6)
    checks = report.Checks(forced, closed, deep)
    text = report.diagnosis_text(
        d, checks, report.single_removals(trace, forced)
    )  # what the command prints without --json
    fired = [v.title for v in d.verdicts if v.fired]
    assert fired
    assert all(f"FIRED       {title}:" in text for title in fired)
    assert "without #1" in text


def test_an_empty_expected_answer_is_one_error_line():
    out = run_cli("ask", "Who wrote Moby-Dick?", "--expected", " | ")
    assert out.returncode == 2 and out.stderr.strip().splitlines() == [
        "error: --expected is empty: give the right answer (aliases separated by |)"
    ]
