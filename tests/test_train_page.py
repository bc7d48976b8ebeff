"""The Train page (AppTest, real models, the wiki index): the pull chart's bars and the walk's figures
equal the bracket and log p(y|x) recomputed from a fresh retrieval and teacher-forced pass; K = 1 says
that nothing moves; the fine-tuning panel runs a short run in the background worker, shows its loss
and resumes a cancelled run from its checkpoint."""

import json
import time
from pathlib import Path

import numpy as np
import pytest
import torch
from streamlit.testing.v1 import AppTest

from rag_core import marginals
from rag_core.config import AnswerSettings
from rag_core.decoding.decode import score_answers
from rag_core.pipeline import Pipeline
from rag_core.training.output import read_manifest

from conftest import cache_sharing, visit

ROOT = Path(__file__).resolve().parent.parent
QUESTION, ANSWER = "Who wrote Moby-Dick?", "Herman Melville"


def open_train(k: int = 5, steps: int = 3) -> AppTest:
    at = AppTest.from_file(str(ROOT / "app/main.py"), default_timeout=600)
    at.session_state["index_name"] = "wiki"
    at.session_state["k"] = k
    at.session_state["question"] = QUESTION
    at.session_state["_train_for"] = QUESTION  # the answer below, not the prefill
    at.session_state["train_expected"] = ANSWER
    at.session_state["train_steps"] = steps
    return visit(at, "train.py")


def chart(at: AppTest, key_part: str) -> dict:
    for c in at.get("plotly_chart"):
        spec = json.loads(c.proto.spec)
        if key_part in c.proto.id:
            return spec
    raise AssertionError(f"no chart {key_part!r}")


def reference(k: int):
    """The bracket p(z|x,y) − p(z|x) and log p_seq(y|x) of the default pipeline, computed afresh."""
    from app import state

    pipe = Pipeline(state.models(), "wiki", state.index("wiki"), AnswerSettings(index="wiki"))
    hits = pipe.retrieve(QUESTION, k)
    gen = pipe.models.generator
    lp, _, _, _ = score_answers(
        gen, gen.prepare(QUESTION, [h.passage for h in hits]), [gen.encode_answer(ANSWER)], 1
    )
    log_pz = marginals.log_prior(torch.tensor([h.score for h in hits]), 20.0)  # (K,)
    token_logp = lp[0].double()  # (K, T)
    return (marginals.citation(log_pz, token_logp) - log_pz.exp()).tolist(), float(
        marginals.rag_sequence(log_pz, token_logp)
    )


@pytest.mark.slow  # over 5 s on 2 cores
def test_the_pull_and_the_walk_equal_a_fresh_recomputation():
    at = open_train()
    bars = chart(at, "train_pull")["data"][0]["x"]
    want, log_p = reference(5)
    assert bars == pytest.approx(want, abs=1e-5)
    assert max(abs(b) for b in bars) > 1e-3  # a real pull on this question, not zeros agreeing
    lines = chart(at, "train_lines")["data"][0]["y"]
    assert lines[0] == pytest.approx(log_p, abs=1e-5)
    assert len(lines) == 4 and lines[-1] > lines[0]  # three steps of ascent raise log p(y|x)
    shown = {m.label: m.value for m in at.metric}
    assert shown["log p(y|x)"] == f"{lines[-1]:.3f}"
    assert not [i.value for i in at.info if "Nothing moves" in i.value]
    assert chart(at, "train_map")["data"]  # the walk on the map


def test_one_passage_moves_nothing():
    at = open_train(k=1, steps=2)
    assert any("Nothing moves: K = 1" in i.value for i in at.info)
    assert chart(at, "train_pull")["data"][0]["x"] == [0.0]
    assert len(set(chart(at, "train_lines")["data"][0]["y"])) == 1  # log p(y|x) never changes


def wait_for_job(timeout: float = 400):
    from app.ui import jobs

    t0 = time.time()
    while (job := jobs.get("train")) is not None and job.running:
        assert time.time() - t0 < timeout, "the fine-tuning job did not finish"
        time.sleep(0.5)
    return job


@pytest.mark.slow
def test_fine_tuning_runs_in_the_background_and_a_cancelled_run_resumes(tmp_path, monkeypatch):
    monkeypatch.setenv("RAG_LOUPE_CACHE", str(cache_sharing(tmp_path, ("models", "indexes"))))
    at = open_train(steps=0)
    at.session_state["ft_steps"] = 1
    at.run()
    at.button(key="ft_start").click().run()
    from app.ui import jobs

    job = jobs.get("train")
    job.cancel()  # asked before the first step ends: the run stops at a step boundary with a checkpoint
    wait_for_job()
    assert job.error is None and job.result["status"] == "stopped", (job.error, job.message)
    at.run()
    assert at.button(key="ft_start").label == "Resume from the checkpoint"
    at.button(key="ft_start").click().run()
    job = wait_for_job()
    assert job.error is None and job.result["status"] == "done", job.error
    out = next((tmp_path / "training").glob("query-sequence-k5-s1-*"))
    manifest = read_manifest(out)
    assert manifest["steps_done"] == 1 and len(manifest["losses"]) == 1
    at.run()
    assert at.button(key="ft_start").label == "Train again from scratch"
    assert chart(at, "ft_loss")["data"][0]["y"] == pytest.approx(manifest["losses"])
    assert (out / "question_encoder").is_dir()


@pytest.mark.slow  # over 5 s on 2 cores
def test_the_map_draws_the_pull_of_the_answer_typed_on_train():
    from app import state
    from rag_core.maps import projection
    from rag_core.training.query_walk import walk

    at = open_train(steps=1)
    at.session_state["map_method"] = "PCA"
    at.session_state["map_pull"] = True
    visit(at, "map.py")
    arrows = chart(at, "passage-map")["layout"]["annotations"]
    pipe = Pipeline(state.models(), "wiki", state.index("wiki"), AnswerSettings(index="wiki"))
    w = walk(pipe, QUESTION, ANSWER, "sequence", 5, None, 0.02, 1)
    start, end = projection.fit_map(state.index("wiki"), "pca", 2).place(np.stack([s.query for s in w.steps]))
    assert len(arrows) == 1
    assert [arrows[0]["ax"], arrows[0]["ay"]] == pytest.approx(start.tolist(), abs=1e-5)
    assert [arrows[0]["x"], arrows[0]["y"]] == pytest.approx(end.tolist(), abs=1e-5)
    assert float(np.linalg.norm(end - start)) > 0  # the answer really pulls


def test_the_map_pull_uses_the_known_answer_without_a_visit_to_train():
    at = AppTest.from_file(str(ROOT / "app/main.py"), default_timeout=600)
    at.session_state["index_name"] = "wiki"
    at.session_state["map_method"] = "PCA"
    at.session_state["map_pull"] = True
    visit(at, "map.py")  # the default question, whose dev-set answer is "Herman Melville | Melville"
    assert len(chart(at, "passage-map")["layout"]["annotations"]) == 1
    at.session_state["question"] = "Which passage would a made-up question pull toward?"
    at.run()
    assert not chart(at, "passage-map")["layout"].get("annotations")
    assert any("No expected answer is known" in i.value for i in at.info)
