"""Decoding on toy models, where every probability is known and brute force is possible."""
import itertools
import math

import pytest
import torch

from rag_core import marginals
from rag_core.corpus import Passage
from rag_core.decoding import rag_sequence_decode, rag_token_decode
from rag_core.generators.toy import ToyGenerator
from rag_core.toys import run_toy

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
    best = rag_token_decode(gen, state, lpz, beams=1)[0]
    assert gen.decode(best.tokens) == "born Hawaii"
    # the recorded per-passage conditionals are the table's numbers
    assert best.token_logp.exp()[:, :2].tolist() == [pytest.approx([0.8, 0.9]), pytest.approx([0.4, 0.1])]


def test_wide_beam_finds_the_most_likely_rag_token_answer_by_enumeration():
    tables = {
        "a": {"": {"x": 0.55, "y": 0.45}, "x": {"p": 0.3, "q": 0.3}, "y": {"p": 0.95}},
        "b": {"": {"x": 0.6, "y": 0.4}, "x": {"q": 0.4}, "y": {"p": 0.9}},
    }
    gen, state, lpz = setup(tables, (0.5, 0.5))
    greedy = rag_token_decode(gen, state, lpz, beams=1)[0]
    beam = rag_token_decode(gen, state, lpz, beams=4)[0]
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
    assert beam.tokens == best
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
    assert math.exp(float(marginals.rag_sequence(lpz, f["born Hawaii"].token_logp))) == pytest.approx(0.7 * 0.72)
    assert torch.isnan(f["born Hawaii"].token_logp[1]).all()
    assert f["born Hawaii"].sources == {0}


def _same(a, b):
    assert a.tokens == b.tokens and a.finished == b.finished
    assert torch.allclose(torch.nan_to_num(a.token_logp, nan=9.0).float(), torch.nan_to_num(b.token_logp, nan=9.0).float(), atol=1e-6)


@pytest.mark.parametrize("rescore", ["thorough", "fast"])
@pytest.mark.parametrize("tables,prior", [
    (OBAMA, (0.7, 0.3)),
    ({"a": {"": {"x": 0.6}, "x": {"y": 0.7}, "x y": {"z": 0.9}}, "b": {"": {"w": 0.9}, "w": {"x": 0.8}},
      "c": {"": {"x": 0.5, "w": 0.4}, "x": {"w": 0.6}}}, (0.5, 0.2, 0.3)),
])
def test_joint_greedy_equals_separate_decoding(tables, prior, rescore):
    from rag_core.decoding import joint_greedy_decode, rescore_hypotheses

    gen, state, lpz = setup(tables, prior)
    tok_joint, per_passage = joint_greedy_decode(gen, state, lpz, max_new_tokens=6)
    _same(tok_joint[0], rag_token_decode(gen, state, lpz, beams=1, max_new_tokens=6)[0])
    joint = rescore_hypotheses(gen, state, lpz, per_passage, rescore, known=tok_joint)
    separate = rag_sequence_decode(gen, state, lpz, beams=1, max_new_tokens=6, rescore=rescore)
    assert [h.tokens for h in joint] == [h.tokens for h in separate]
    for a, b in zip(joint, separate):
        assert a.sources == b.sources
        if rescore == "thorough":
            _same(a, b)
