"""The Train page's query walk (rag_core/training/query_walk.py) against references computed another
way: each step's move is autograd's gradient of log p(y|x) w.r.t. q, each top K is a brute-force
ranking of every passage vector, each step's conditionals are a fresh teacher-forced pass over that
top K, and the two cases where nothing moves (K = 1, equal conditionals) leave q where it was."""

import numpy as np
import pytest
import torch

from rag_core import marginals
from rag_core.config import AnswerSettings
from rag_core.decoding.decode import score_answers
from rag_core.training import query_walk
from rag_core.training.gradient import log_likelihood
from rag_core.training.query_walk import WalkError, walk

from conftest import tiny_pipeline

QUESTION, ANSWER = "Who built the old bridge?", "Marie Curie"


@pytest.fixture(scope="module")
def pipe(tmp_path_factory):
    return tiny_pipeline(tmp_path_factory.mktemp("walk"), AnswerSettings(k=3))[0]


def autograd_gradient(marginal: str, q: np.ndarray, d: np.ndarray, token_logp: torch.Tensor, scale: float):
    qt = torch.tensor(q, dtype=torch.float64, requires_grad=True)  # (D,)
    log_pz = marginals.log_prior(torch.tensor(d, dtype=torch.float64) @ qt, scale)  # (K,)
    log_likelihood(marginal, log_pz, token_logp).backward()
    return qt.grad.numpy()  # (D,)


def brute_top_k(pipe, q: np.ndarray, k: int) -> list[str]:
    x = np.asarray(pipe.index.index.reconstruct_n(0, len(pipe.index)), dtype=np.float64)  # (N, D)
    scores = x @ q.astype(np.float64)  # (N,)
    return [pipe.index.passages[i].id for i in np.argsort(-scores, kind="stable")[:k]]


@pytest.mark.parametrize("marginal", ["sequence", "token"])
def test_each_step_follows_autograd_and_re_retrieves_by_brute_force(pipe, marginal):
    w = walk(pipe, QUESTION, ANSWER, marginal, k=3, scale=1.0, step_size=2.0, steps=4)
    assert len(w.steps) == 5 and not w.normalised  # DPR's q keeps its length
    assert w.steps[0].ids == [h.passage.id for h in pipe.retrieve(QUESTION, 3)]
    assert np.allclose(w.steps[0].query, pipe.query_vector(QUESTION)[0])
    gen = pipe.models.generator
    ids = gen.encode_answer(ANSWER)
    for a, b in zip(w.steps, w.steps[1:]):
        d = np.stack(
            [pipe.index.index.reconstruct(pipe.index.passages.index(h.passage)) for h in a.hits]
        )  # (K, D)
        ref = autograd_gradient(marginal, a.query.astype(np.float64), d, a.token_logp, 1.0)  # (D,)
        assert np.allclose(a.gradient.numpy(), ref, atol=1e-6), (a.gradient, ref)
        assert np.allclose(b.query, a.query + 2.0 * ref, atol=1e-5)  # q ← q + η ∇
        assert b.ids == brute_top_k(pipe, b.query, 3)
    for s in w.steps:
        lp, _, _, _ = score_answers(
            gen, gen.prepare(QUESTION, [h.passage for h in s.hits]), [ids], 1
        )  # (1, K, T)
        assert torch.allclose(s.token_logp, lp[0].double(), atol=1e-5)
        assert s.log_likelihood == pytest.approx(
            float(log_likelihood(marginal, s.log_prior, lp[0].double())), abs=1e-5
        )
        assert torch.allclose(
            s.prior, marginals.log_prior(torch.tensor([h.score for h in s.hits]), 1.0).exp()
        )
    moved = [s for s in w.steps[1:] if s.entered]
    assert moved, "a step of 2.0 on the tiny stack changes the top 3: the test would not see a re-retrieval"
    # a step whose top K is the previous one costs no generator pass; a new passage costs one
    assert all(s.generator_passes == (1 if s.entered else 0) for s in w.steps[1:])
    assert all(
        set(s.entered) == set(s.ids) - set(p.ids) and set(s.left) == set(p.ids) - set(s.ids)
        for p, s in zip(w.steps, w.steps[1:])
    )


def test_the_likelihood_climbs_with_a_small_step(pipe):
    """Ascent: with a step small enough for the top K to stay, log p(y|x) never falls."""
    w = walk(pipe, QUESTION, ANSWER, "sequence", k=3, scale=1.0, step_size=0.01, steps=3)
    lls = [s.log_likelihood for s in w.steps]
    assert all(s.ids == w.steps[0].ids for s in w.steps)
    assert all(b >= a - 1e-12 for a, b in zip(lls, lls[1:])) and lls[-1] > lls[0], lls


def test_nothing_moves_with_one_passage(pipe):
    w = walk(pipe, QUESTION, ANSWER, "token", k=1, scale=1.0, step_size=5.0, steps=3)
    assert w.still
    assert all(np.array_equal(s.query, w.steps[0].query) and s.ids == w.steps[0].ids for s in w.steps)
    assert w.generator_passes == 1  # the one passage, once


def test_nothing_moves_when_every_passage_explains_the_answer_equally():
    lp = torch.log(torch.tensor([0.5, 0.3, 0.2], dtype=torch.float64))  # (K,)
    equal = torch.log(torch.tensor([[0.4, 0.9]], dtype=torch.float64)).expand(3, -1)  # (K, T)
    d = torch.randn(3, 4, dtype=torch.float64)  # (K, D)
    for marginal in ("sequence", "token"):
        g = query_walk.step_gradient(marginal, lp, equal, d, 20.0)
        assert float(g.bracket.abs().max()) < query_walk.STILL and float(g.gradient.abs().max()) < 1e-9
        unequal = query_walk.step_gradient(
            marginal, lp, equal + torch.tensor([[0.0], [-1.0], [0.0]]), d, 20.0
        )
        assert float(unequal.bracket.abs().max()) > 0.1  # the same numbers, one passage worse: a real pull


def test_a_normalising_encoder_keeps_q_on_the_unit_sphere(default_pipeline):
    w = walk(
        default_pipeline, "Who wrote Moby-Dick?", "Herman Melville", "sequence", k=5, step_size=0.05, steps=2
    )
    assert w.normalised and not w.still
    for a, b in zip(w.steps, w.steps[1:]):
        expected = a.query.astype(np.float64) + 0.05 * a.gradient.numpy()
        assert np.allclose(b.query, expected / np.linalg.norm(expected), atol=1e-6)
        assert abs(float(np.linalg.norm(b.query)) - 1.0) < 1e-5


@pytest.mark.parametrize(
    "answer, size, steps, why",
    [
        ("  ", 0.1, 2, "expected answer"),
        ("Paris", 0.0, 2, "step size"),
        ("Paris", float("nan"), 2, "step size"),
        ("Paris", 0.1, 51, "between 0 and 50"),
    ],
)
def test_bad_walks_say_why(pipe, answer, size, steps, why):
    with pytest.raises(WalkError, match=why):
        walk(pipe, QUESTION, answer, step_size=size, steps=steps)
