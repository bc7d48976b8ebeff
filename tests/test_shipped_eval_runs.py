"""The reference eval runs in assets/eval/runs/ are what the Eval page opens on. They must be what
today's code and data compute: their fingerprint matches, a recomputed sample gives the same
answers, verdicts and probabilities, and a changed input makes a run stale (not offered)."""

import json
import shutil

import pytest

from rag_core.analysis.evaluation import runs as ev
from rag_core.analysis.evaluation import shipped_runs
from rag_core.analysis.evaluation.question_result import QuestionResult
from rag_core.analysis.evaluation.questions import read_questions

from conftest import ROOT, cache_sharing, visit

NAMES = ("test-k5", "test-k1")
TEST_FILE = ROOT / "assets" / "eval" / "test.jsonl"


def shipped(name: str) -> dict:
    return json.loads((shipped_runs.SHIPPED_RUNS / f"{name}.json").read_text(encoding="utf-8"))


@pytest.mark.parametrize("name,k", [("test-k5", 5), ("test-k1", 1)])
def test_each_shipped_run_is_current_and_complete(name, k):
    path = shipped_runs.SHIPPED_RUNS / f"{name}.json"
    assert shipped_runs.is_current(path), (
        f"{name} is stale: run `python -m rag_core eval assets/eval/test.jsonl -k {k} --ship {name}`"
    )
    data = shipped(name)
    questions, _ = read_questions(TEST_FILE)
    assert [r["question"] for r in data["results"]] == [q.question for q in questions]  # the whole test split
    assert data["settings"]["k"] == data["shipped"]["config"]["k"] == k
    assert data["settings"]["beams"] == 1
    assert shipped_runs.current_runs() == [shipped_runs.SHIPPED_RUNS / f"{n}.json" for n in NAMES]


def recomputed(pipe, name: str, question: str) -> dict:
    stored = shipped(name)
    _, settings = shipped_runs.config_of(stored["shipped"])
    q = next(q for q in read_questions(TEST_FILE)[0] if q.question == question)
    return ev.run_eval(pipe, [q], settings).results[0].to_dict()


# Relative: float32 kernels differ between CPUs (the same code gave p = 0.6652144 here and 0.6652001
# on the machine that made the shipped runs, 2.1e-5 apart), and the export keeps 5 decimals.
REL = 1e-4


def comparable(result: dict) -> tuple[dict, dict]:
    """A question's result without its timing and probabilities, and its probabilities apart. Read
    through the stored format first, as the app reads a run: a field a run was saved without (one
    added to the format later, e.g. the stuffed reading's) is its default."""
    result = QuestionResult.from_dict(result).to_dict()
    rest = {k: v for k, v in result.items() if k != "seconds"}
    rest["modes"] = {
        m: {f: v for f, v in mode.items() if not isinstance(v, float)} for m, mode in result["modes"].items()
    }
    probs = {
        (m, f): v for m, mode in result["modes"].items() for f, v in mode.items() if isinstance(v, float)
    }
    return rest, probs


@pytest.mark.slow  # over 5 s on 2 cores
def test_a_recomputed_sample_equals_the_shipped_rows(default_pipeline):
    """A question K=5 got wrong (so its verdicts are compared too) and one K=1 got right."""
    for name, em in (("test-k5", False), ("test-k1", True)):
        row = next(r for r in shipped(name)["results"] if r["modes"]["rag-sequence"]["em"] == em)
        (got, got_p), (want, want_p) = (
            comparable(recomputed(default_pipeline, name, row["question"])),
            comparable(row),
        )
        assert got == want, (name, row["question"])
        assert got_p.keys() == want_p.keys()
        assert all(abs(got_p[k] - want_p[k]) <= REL * abs(want_p[k]) for k in want_p), (name, got_p, want_p)


def test_a_changed_input_makes_a_run_stale(tmp_path, monkeypatch):
    src = shipped_runs.SHIPPED_RUNS / "test-k1.json"
    copy = tmp_path / "test-k1.json"
    shutil.copy(src, copy)
    assert shipped_runs.current_runs(tmp_path) == [copy]
    stored = shipped("test-k1")["shipped"]
    stack, settings = shipped_runs.config_of(stored)
    assert shipped_runs.fingerprint(stack, settings, TEST_FILE) == stored["fingerprint"]
    for changed in (
        (stack, settings.with_(k=2)),
        (stack.with_(generator="another-generator"), settings),
        (stack, settings.with_(index="2016")),
    ):
        assert shipped_runs.fingerprint(*changed, TEST_FILE) != stored["fingerprint"], changed
    other_questions = tmp_path / "test.jsonl"
    other_questions.write_text(TEST_FILE.read_text(encoding="utf-8").replace("?", " ?", 1), encoding="utf-8")
    assert shipped_runs.fingerprint(stack, settings, other_questions) != stored["fingerprint"]
    monkeypatch.setattr(shipped_runs, "prompt_fingerprint", lambda *_: "another prompt")
    assert shipped_runs.current_runs(tmp_path) == []  # a new prompt: the copy is stale and not offered
    with pytest.raises(ValueError, match="named index"):
        shipped_runs.fingerprint(stack, settings.with_(index="my-folder"), TEST_FILE)


def test_the_eval_page_opens_on_the_shipped_run_on_a_fresh_cache(tmp_path, monkeypatch):
    """No local run: the page shows the shipped K=5 run's summary, and offers K=1 to compare."""
    from streamlit.testing.v1 import AppTest

    monkeypatch.setenv("RAG_LOUPE_CACHE", str(cache_sharing(tmp_path)))  # no run; the models converted
    at = AppTest.from_file(str(ROOT / "app/main.py"), default_timeout=300)
    at.session_state["index_name"] = "wiki"  # no model or index is needed to show a stored run
    visit(at, "eval.py")
    assert not at.exception, [e.value for e in at.exception]
    run_box = next(b for b in at.selectbox if b.label == "Run")
    assert run_box.value == shipped_runs.SHIPPED_RUNS / "test-k5.json"
    assert "shipped reference" in run_box.format_func(run_box.value)
    summary = next(d.value for d in at.dataframe if "EM" in d.value.columns)
    want = ev.EvalRun.from_json(shipped("test-k5")).summary()["modes"]
    assert list(summary["EM"]) == [m["em"] for m in want.values()]
    compare_b = next(b for b in at.selectbox if b.label == "Compare this run (A) with run B")
    assert compare_b.value == shipped_runs.SHIPPED_RUNS / "test-k1.json"


@pytest.mark.parametrize(
    "extra,message",
    [
        (["--limit", "3"], "--ship stores a whole run"),
        (["--no-diagnose"], "--ship stores a whole run"),
        (["--generator", "some-folder"], "default models"),
        (["--index", "wiki", "--corpus", "c.jsonl"], "--ship stores a whole run"),
    ],
)
def test_ship_refuses_a_run_that_could_not_be_checked(extra, message):
    from conftest import run_cli

    out = run_cli("eval", str(TEST_FILE), "--ship", "x", *extra)
    lines = out.stderr.strip().splitlines()
    assert out.returncode == 2, out.stderr
    assert len(lines) == 1 and lines[0].startswith("error:"), out.stderr
    assert message in lines[0]
    assert not (shipped_runs.SHIPPED_RUNS / "x.json").exists()


@pytest.mark.slow  # over 5 s on 2 cores
def test_the_base_stack_keeps_its_own_shipped_run(base_pipeline):
    """The untrained base's run is current for the base stack, never offered as the default's, and a
    recomputed wrong answer of it equals its row (the base's prompt and model, not the default's)."""
    path = shipped_runs.SHIPPED_RUNS / "base-test-k5.json"
    assert shipped_runs.is_current(path), (
        "base-test-k5 is stale: run `python -m rag_core eval "
        "assets/eval/test.jsonl --preset base --ship base-test-k5`"
    )
    assert shipped_runs.current_runs(stack=base_pipeline.stack) == [path]
    assert path not in shipped_runs.current_runs()
    row = next(r for r in shipped("base-test-k5")["results"] if not r["modes"]["rag-sequence"]["em"])
    (got, got_p), (want, want_p) = (
        comparable(recomputed(base_pipeline, "base-test-k5", row["question"])),
        comparable(row),
    )
    assert got == want, row["question"]
    assert all(abs(got_p[k] - want_p[k]) <= REL * abs(want_p[k]) for k in want_p), (got_p, want_p)


def test_the_eval_page_shows_what_training_changed(tmp_path, monkeypatch):
    """Base (A) against trained (B) on the same questions: the EM metrics equal each run's own
    exact matches counted here, question by question."""
    from streamlit.testing.v1 import AppTest

    assert shipped_runs.before_after_pairs() == [
        (shipped_runs.SHIPPED_RUNS / "base-test-k5.json", shipped_runs.SHIPPED_RUNS / "test-k5.json")
    ]
    monkeypatch.setenv("RAG_LOUPE_CACHE", str(cache_sharing(tmp_path)))  # no run; the models converted
    at = AppTest.from_file(str(ROOT / "app/main.py"), default_timeout=300)
    at.session_state["index_name"] = "wiki"
    visit(at, "eval.py")
    assert "What training changed" in [h.value for h in at.subheader]
    em = {m.label: m.value for m in at.metric}
    for label, name in (("EM in A′", "base-test-k5"), ("EM in B′", "test-k5")):
        rows = shipped(name)["results"]
        right = sum(r["modes"]["rag-sequence"]["em"] for r in rows)
        assert em[label] == f"{right / len(rows):.1%}", (label, em[label])
