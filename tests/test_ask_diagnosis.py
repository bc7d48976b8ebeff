"""`ask QUESTION --expected ANSWER`: the Diagnose panel's verdicts and counterfactuals on the command
line, recomputed here from the engine's separate pieces."""
import json

from conftest import run_cli
from rag_core.analysis import counterfactual, deep_search, scoring, verdicts
from rag_core.config import Config
from rag_core.marginals import prob


def test_ask_expected_prints_the_panels_verdicts_and_counterfactuals(default_pipeline):
    question, expected = "Who wrote Moby-Dick?", ["Nathaniel Hawthorne"]
    out = run_cli("ask", question, "-k", "3", "--expected", " | ".join(expected), "--json")
    assert out.returncode == 0, out.stderr[-2000:]
    got = json.loads(out.stdout)["diagnosis"]
    cfg = Config(k=3)
    trace = default_pipeline.run(question, cfg)
    forced = scoring.force_answers(default_pipeline, trace, expected)
    closed = default_pipeline.closed_book(trace.query, cfg)
    d = verdicts.diagnose(trace, expected, None, forced=forced, deep=deep_search.deep_search(default_pipeline, trace, expected),
                          closed_book=closed)
    assert (got["decoding"], got["answer"], got["correct"], got["closed_book"]) == (d.decoding, d.answer, False, closed)
    assert [(v["code"], v["fired"], v["summary"]) for v in got["verdicts"]] == [(v.code, v.fired, v.summary)
                                                                               for v in d.verdicts]
    assert [r["removed"] for r in got["counterfactuals"]] == [1, 2, 3]
    for row in got["counterfactuals"]:
        cf = counterfactual.counterfactual(trace, [row["removed"]], None, None, forced)
        for decoding, a in cf.answers.items():
            assert row[decoding]["answer"] == a.answer and abs(row[decoding]["p"] - prob(a.log_p)) < 1e-9
    text = run_cli("ask", question, "-k", "3", "--expected", " | ".join(expected))
    fired = [v.title for v in d.verdicts if v.fired]
    assert all(f"FIRED       {title}:" in text.stdout for title in fired) and fired
    assert "without #1" in text.stdout


def test_an_empty_expected_answer_is_one_error_line():
    out = run_cli("ask", "Who wrote Moby-Dick?", "--expected", " | ")
    assert out.returncode == 2 and out.stderr.strip().splitlines() == [
        "error: --expected is empty: give the right answer (aliases separated by |)"]
