"""Decoding on toy models, where every probability is known and brute force is possible."""

import itertools
import math

import pytest
import torch

from rag_core import marginals
from rag_core.corpus import Passage
from rag_core.decoding.decode import (
    DecodeJob,
    SearchSettings,
    decode_jobs,
    rag_sequence_decode,
    rag_token_decode,
)
from rag_core.generators.toy import ToyGenerator
from rag_core.toys.examples import run_toy

OBAMA = {
    "z1": {"": {"born": 0.8, "Chicago": 0.1}, "born": {"Hawaii": 0.9}, "Chicago": {"Hawaii": 0.5}},
    "z2": {"": {"born": 0.4, "Chicago": 0.5}, "born": {"Hawaii": 0.1}, "Chicago": {"Hawaii": 0.2}},
}


def setup(tables=OBAMA, prior=(0.7, 0.3)):
    gen = ToyGenerator(tables)
    passages = [Passage(z, z, "") for z in tables]
    state = gen.prepare("q", passages)
    return gen, state, torch.tensor(prior, dtype=torch.float64).log()


def test_seed_numbers_through_the_toy_files():
    r = run_toy("obama")
    by_answer = {c.answer: c for c in r.trace.of("rag-sequence")}
    assert round(math.exp(by_answer["born Hawaii"].log_p_seq(r.log_prior)), 3) == 0.516
    assert round(math.exp(by_answer["born Hawaii"].log_p_tok(r.log_prior)), 3) == 0.449
    assert round(math.exp(by_answer["Chicago Hawaii"].log_p_seq(r.log_prior)), 3) == 0.065
    assert round(math.exp(by_answer["Chicago Hawaii"].log_p_tok(r.log_prior)), 3) == 0.090
    assert [round(p, 3) for p in run_toy("softmax").log_prior.exp().tolist()] == [0.550, 0.247, 0.202]
    post = run_toy("posterior")
    c = post.trace.candidates[0]
    assert [round(p, 3) for p in marginals.citation(post.log_prior, c.token_logp).tolist()] == [0.913, 0.087]


def test_greedy_rag_token_follows_the_mixture():
    gen, state, lpz = setup()
    best = rag_token_decode(gen, state, lpz)[0]
    assert gen.decode(best.tokens) == "born Hawaii"
    # the recorded per-passage conditionals are the table's numbers
    assert best.token_logp.exp()[:, :2].tolist() == [pytest.approx([0.8, 0.9]), pytest.approx([0.4, 0.1])]


def test_wide_beam_finds_the_most_likely_rag_token_answer_by_enumeration():
    tables = {
        "a": {"": {"x": 0.55, "y": 0.45}, "x": {"p": 0.3, "q": 0.3}, "y": {"p": 0.95}},
        "b": {"": {"x": 0.6, "y": 0.4}, "x": {"q": 0.4}, "y": {"p": 0.9}},
    }
    gen, state, lpz = setup(tables, (0.5, 0.5))
    greedy = rag_token_decode(gen, state, lpz)[0]
    beam = rag_token_decode(gen, state, lpz, SearchSettings(beams=4, length_penalty=0.0))[0]
    best_score, best = -math.inf, None
    words = ["x", "y", "p", "q", "<other>"]
    for n in (1, 2, 3):
        for seq in itertools.product(words, repeat=n):
            ids = [gen.vocab.index(w) for w in seq] + [0]
            lp = gen.teacher_force(gen.select(state, torch.arange(2)), torch.tensor([ids, ids]))
            tok = lp.gather(-1, torch.tensor([ids, ids]).unsqueeze(-1)).squeeze(-1)  # (K, T)
            score = float(marginals.rag_token(lpz, tok))
            if score > best_score:
                best_score, best = score, ids
    assert beam.tokens == best  # with no length penalty the beam ranks by the plain likelihood
    assert gen.decode(greedy.tokens) != gen.decode(beam.tokens)  # greedy is fooled here, the beam is not


def test_thorough_and_fast_rescoring_differ_where_a_passage_never_produced_the_answer():
    gen, state, lpz = setup()
    thorough = rag_sequence_decode(gen, state, lpz, rescore="thorough")
    fast = rag_sequence_decode(gen, state, lpz, rescore="fast")
    t = {gen.decode(h.tokens): h for h in thorough}
    f = {gen.decode(h.tokens): h for h in fast}
    assert set(t) == set(f) == {"born Hawaii", "Chicago <other>"}
    # "born Hawaii" came from z1's beam only: fast counts p(y|x,z2) = 0
    assert math.exp(float(marginals.rag_sequence(lpz, t["born Hawaii"].token_logp))) == pytest.approx(0.516)
    assert math.exp(float(marginals.rag_sequence(lpz, f["born Hawaii"].token_logp))) == pytest.approx(
        0.7 * 0.72
    )
    assert torch.isnan(f["born Hawaii"].token_logp[1]).all()
    assert f["born Hawaii"].sources == {0}


def _same(a, b):
    assert a.tokens == b.tokens and a.finished == b.finished and a.sources == b.sources
    assert torch.equal(a.token_logp.isnan(), b.token_logp.isnan())
    assert torch.allclose(
        torch.nan_to_num(a.token_logp, nan=9.0), torch.nan_to_num(b.token_logp, nan=9.0), atol=1e-12
    )


RUNNER_UP_END = {"z": {"": {"a": 0.6, "</s>": 0.4}, "a": {"b": 0.5, "c": 0.5}}}


def both_at_once(gen, state, lpz, settings, rescore="thorough"):
    """Both marginals of one question from one decode loop, as the pipeline decodes them."""
    return decode_jobs(gen, state, [DecodeJob(list(range(len(lpz))), lpz, settings, "both", rescore)])[0]


def test_greedy_never_lets_a_runner_up_end_token_win():
    """At step 0 the end token is the runner-up (0.4 < 0.6): greedy follows "a", as argmax must,
    and every path (token, sequence, both, closed-book) gives the same answer."""
    gen, state, lpz = setup(RUNNER_UP_END, (1.0,))
    token = rag_token_decode(gen, state, lpz)
    seq = rag_sequence_decode(gen, state, lpz)
    both_tok, both_seq = both_at_once(gen, state, lpz, SearchSettings())
    assert [gen.decode(h.tokens) for h in token] == ["a b"]
    assert [gen.decode(h.tokens) for h in seq] == ["a b"]
    assert [h.tokens for h in both_tok] == [h.tokens for h in token]
    assert [h.tokens for h in both_seq] == [h.tokens for h in seq]


def test_a_length_cut_answer_is_marked_unfinished():
    gen, state, lpz = setup(RUNNER_UP_END, (1.0,))
    cut = rag_token_decode(gen, state, lpz, SearchSettings(max_new_tokens=2))[0]
    whole = rag_token_decode(gen, state, lpz, SearchSettings(max_new_tokens=3))[0]
    assert gen.decode(cut.tokens) == "a b" and not cut.finished
    assert whole.tokens == cut.tokens + [0] and whole.finished


@pytest.mark.parametrize("beams", [1, 3])
@pytest.mark.parametrize("rescore", ["thorough", "fast"])
@pytest.mark.parametrize(
    "tables,prior",
    [
        (OBAMA, (0.7, 0.3)),
        (
            {
                "a": {"": {"x": 0.6}, "x": {"y": 0.7}, "x y": {"z": 0.9}},
                "b": {"": {"w": 0.9}, "w": {"x": 0.8}},
                "c": {"": {"x": 0.5, "w": 0.4}, "x": {"w": 0.6}},
            },
            (0.5, 0.2, 0.3),
        ),
        (RUNNER_UP_END, (1.0,)),
    ],
)
def test_decoding_both_at_once_equals_each_alone(tables, prior, rescore, beams):
    """`decode_jobs` with both marginals shares rows between the searches; its answers, sources and
    every stored log-probability equal those of the searches run separately."""
    gen, state, lpz = setup(tables, prior)
    settings = SearchSettings(beams=beams, max_new_tokens=6)
    tok_joint, seq_joint = both_at_once(gen, state, lpz, settings, rescore)
    for a, b in zip(tok_joint, rag_token_decode(gen, state, lpz, settings), strict=True):
        _same(a, b)
    for a, b in zip(seq_joint, rag_sequence_decode(gen, state, lpz, settings, rescore), strict=True):
        _same(a, b)
