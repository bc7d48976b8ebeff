"""The unlikelihood term on recorded distractors (`train --unlikelihood W`): −log(1 − p(d|x)) against
a brute-force mixture, its retriever gradient against autograd, the loop's loss and gradient with
distractors against the same numbers computed by hand, and training with it lowering p(d|x)."""

import math
from dataclasses import replace

import pytest
import torch
from test_training import random_case, stack, tiny_models, tiny_questions  # noqa: F401  (stack: fixture)

from rag_core import marginals
from rag_core.training.conditionals import answer_token_logp
from rag_core.training.gradient import (
    bracket,
    log_likelihood,
    nll,
    query_gradient,
    unlikelihood,
    unlikelihood_weight,
)
from rag_core.training.loop import (
    TrainSettings,
    question_loss,
    question_terms,
    settings_mismatch,
    start_run,
    train,
)
from rag_core.training.query import query_model, query_tensor


def brute_force_p(marginal: str, log_pz, token_logp, mask) -> float:
    """p(d|x) by plain loops over passages and steps, in probabilities."""
    prior = log_pz.exp().tolist()
    table = token_logp.exp().tolist()  # (K, T)
    steps = [t for t in range(len(table[0])) if bool(mask[t])]
    if marginal == "sequence":
        return sum(prior[z] * math.prod(table[z][t] for t in steps) for z in range(len(prior)))
    return math.prod(sum(prior[z] * table[z][t] for z in range(len(prior))) for t in steps)


@pytest.mark.parametrize("marginal", ["sequence", "token"])
@pytest.mark.parametrize("seed", [0, 1, 2])
def test_the_term_is_minus_log_one_minus_the_brute_force_probability(marginal, seed):
    q, d, token_logp, mask = random_case(4, t=2, vocab=3, seed=seed)  # short answers: p(d|x) not tiny
    log_pz = marginals.log_prior(d @ q, 0.5)  # (K,)
    p = brute_force_p(marginal, log_pz, token_logp, mask)
    assert p > 0.01  # a case where the term is more than rounding
    assert math.isclose(
        float(unlikelihood(marginal, log_pz, token_logp, mask)), -math.log(1 - p), rel_tol=1e-9
    )
    assert math.isclose(
        float(unlikelihood_weight(marginal, log_pz, token_logp, mask)), p / (1 - p), rel_tol=1e-9
    )


@pytest.mark.parametrize("marginal", ["sequence", "token"])
@pytest.mark.parametrize("seed", [0, 1])
def test_its_retriever_gradient_is_the_weight_times_the_distractors_pull(marginal, seed):
    q, d, token_logp, mask = random_case(5, t=2, vocab=3, seed=seed)
    q = q.clone().requires_grad_(True)
    unlikelihood(marginal, marginals.log_prior(d @ q, 0.5), token_logp, mask).backward()
    log_pz = marginals.log_prior(d @ q.detach(), 0.5)  # (K,)
    pull = query_gradient(bracket(marginal, log_pz, token_logp, mask), d, 0.5)  # (D,)
    analytic = unlikelihood_weight(marginal, log_pz, token_logp, mask) * pull  # (D,)
    assert torch.allclose(analytic, q.grad, atol=1e-9, rtol=0), (analytic, q.grad)
    assert q.grad.abs().max() > 1e-3


def misled(stack):
    """The tiny stack with every question recording the distractor "Paris", and a generator that
    already leans toward it: a bias toward its four tokens on the output layer, so p(d|x) is about
    0.4% (a random tiny model gives any name about e^-20, where the term is rounding)."""
    models, index = tiny_models(stack)
    gen = models.generator
    with torch.no_grad():
        gen.model.final_logits_bias[0, gen.encode_answer("Paris")] += 12.0  # (1, V)
    qs = [replace(q, distractors=("Paris",)) for q in tiny_questions(stack["corpus"])]
    return models, index, qs


def test_the_loops_loss_adds_the_weighted_term_for_each_recorded_distractor(stack):  # noqa: F811
    models, index, qs = misled(stack)
    qs[1] = replace(qs[1], distractors=())  # a question that records none
    run = start_run(models, index, qs, TrainSettings(part="generator", k=3, unlikelihood=0.5))
    gen = models.generator
    for qi in (0, 1):
        with torch.no_grad():
            t = question_terms(run, qi)
            q = query_tensor(models.encoder, [qs[qi].question])[0]  # (D,)
            scores, rows = index.search(q.numpy()[None], 3)  # (1, K)
            passages = [index.passages[int(r)] for r in rows[0]]
            log_pz = marginals.log_prior(torch.from_numpy(scores[0]).double(), run.scale)  # (K,)
            gold = answer_token_logp(gen, qs[qi].question, passages, gen.encode_answer(qs[qi].answers[0]))
            expected = nll("sequence", log_pz, gold)
            for other in qs[qi].distractors:
                wrong = answer_token_logp(gen, qs[qi].question, passages, gen.encode_answer(other))  # (K, T)
                expected = expected + 0.5 * -torch.log1p(-log_likelihood("sequence", log_pz, wrong).exp())
        assert len(t.distractor_logp) == len(qs[qi].distractors)
        assert math.isclose(float(t.loss), float(expected), rel_tol=1e-5), (
            qi,
            float(t.loss),
            float(expected),
        )
    fresh, _, _ = misled(stack)  # its own generator: adapters attach once to a model
    off = start_run(fresh, index, qs, TrainSettings(part="generator", k=3))
    with torch.no_grad():
        assert off.distractors[0] == [] and question_terms(off, 0).distractor_logp == []
        assert float(question_terms(off, 0).loss) < float(question_terms(run, 0).loss) - 1e-6


def test_the_loop_hands_the_encoder_the_autograd_gradient_of_the_whole_loss(stack):  # noqa: F811
    models, index, qs = misled(stack)
    run = start_run(models, index, qs, TrainSettings(part="query", k=4, marginal="token", unlikelihood=2.0))
    question_loss(run, 0, 1.0)
    ours = [p.grad.clone() for p in query_model(models.encoder).parameters()]
    for p in query_model(models.encoder).parameters():
        p.grad = None
    q = query_tensor(models.encoder, [qs[0].question])[0]  # the same loss, through autograd end to end
    _, rows = index.search(q.detach().numpy()[None], 4)
    d = torch.from_numpy(index.index.reconstruct_batch(rows[0])).double()
    log_pz = marginals.log_prior(d @ q.double(), run.scale)  # (K,)
    ids = tuple(index.passages[int(r)].id for r in rows[0])
    wrong = run.remembered[(0, ids, tuple(run.distractors[0][0]))]  # (K, T_d)
    loss = -log_likelihood("token", log_pz, run.remembered[(0, ids)]) + 2.0 * unlikelihood(
        "token", log_pz, wrong
    )
    loss.backward()
    theirs = [p.grad for p in query_model(models.encoder).parameters()]
    worst = max(float((a - b).abs().max() / (b.abs().max() + 1e-12)) for a, b in zip(ours, theirs))
    assert worst < 1e-5, worst
    assert float(unlikelihood_weight("token", log_pz.detach(), wrong)) > 1e-4  # the term really pulls


def test_training_with_the_term_lowers_the_distractors_probability(stack, tmp_path):  # noqa: F811
    """The same seeded run with and without the term: with it, the distractors end less likely."""

    def mean_log_p_distractor(weight: float) -> float:
        models, index, qs = misled(stack)
        settings = TrainSettings(part="generator", k=3, steps=6, batch=4, lr=3e-2, unlikelihood=weight)
        run = start_run(models, index, qs, settings)
        assert not train(run, tmp_path / f"w{weight}")
        # reads p(d|x) for both runs alike: the query part attaches nothing to the trained generator
        probe = start_run(models, index, qs, TrainSettings(part="query", k=3, unlikelihood=1.0))
        with torch.no_grad():
            terms = [question_terms(probe, qi) for qi in range(len(qs))]
        return sum(float(log_likelihood("sequence", t.log_pz, t.distractor_logp[0])) for t in terms) / len(
            terms
        )

    without, with_term = mean_log_p_distractor(0.0), mean_log_p_distractor(50.0)
    assert with_term < without - 0.1, (without, with_term)


def test_a_bad_weight_is_refused_and_older_runs_still_resume():
    with pytest.raises(ValueError, match="unlikelihood"):
        TrainSettings(unlikelihood=-1.0).validate()
    saved = TrainSettings().to_dict()
    saved.pop("unlikelihood")  # a run saved before the setting existed
    assert settings_mismatch(saved, TrainSettings()) is None
    assert "unlikelihood" in settings_mismatch(saved, TrainSettings(unlikelihood=1.0))
