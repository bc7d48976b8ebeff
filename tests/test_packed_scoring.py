"""Thorough rescoring packs every hypothesis of a passage into one row behind a block-diagonal mask
(`CausalGenerator.teacher_force_packed`). Its scores must be the ones of the plain path, which
teacher-forces each (answer, passage) pair in a row of its own."""

import pytest
import torch

from rag_core.decoding.decode import answer_groups, score_answers
from rag_core.generators.base import ForwardCounter
from rag_core.generators.causal import CausalGenerator

# float32 arithmetic in another order (longer masked rows): |packed - plain| <= TOL * max(1, |plain|)
TOL = 2e-5


def _plain(gen, state, answers, a, **options):
    """The same call with packing switched off for this generator object only."""
    saved = CausalGenerator.teacher_force_packed
    try:
        del CausalGenerator.teacher_force_packed
        return score_answers(gen, state, answers, a, **options)
    finally:
        CausalGenerator.teacher_force_packed = saved


@pytest.fixture(scope="module")
def prepared(default_pipeline):
    gen = default_pipeline.models.generator
    question = "Who wrote Moby-Dick?"
    hits = default_pipeline.retrieve(question, 4)
    texts = ["Herman Melville", "Melville", "Nathaniel Hawthorne of Salem, Massachusetts", "1851"]
    # a one-token answer (the end token alone) has nothing to pack: its only step is the prompt's
    answers = [gen.encode_answer(t) for t in texts] + [[gen.newline_id]]
    return gen, gen.prepare(question, [h.passage for h in hits]), answers


def test_packed_scores_equal_one_row_per_answer_and_passage(prepared):
    gen, state, answers = prepared
    before = ForwardCounter.count
    tok, mask, ids, lp = score_answers(gen, state, answers, 5)
    assert ForwardCounter.count - before == 1  # one forward for all answers under all 4 passages
    ref_tok, ref_mask, ref_ids, ref_lp = _plain(gen, state, answers, 5)
    assert tok.shape == ref_tok.shape == (5, 4, max(map(len, answers)))
    assert torch.equal(mask, ref_mask)
    assert torch.equal(torch.isnan(tok), torch.isnan(ref_tok))
    assert torch.equal(torch.isnan(tok), ~mask.unsqueeze(1).expand_as(tok))
    real = ~torch.isnan(ref_tok)
    assert ((tok[real] - ref_tok[real]).abs() <= TOL * ref_tok[real].abs().clamp(min=1)).all()
    assert torch.equal(ids, ref_ids)  # the same alternatives, in the same order
    real = ~torch.isnan(ref_lp)
    assert torch.equal(real, ~torch.isnan(lp))
    assert ((lp[real] - ref_lp[real]).abs() <= TOL * ref_lp[real].abs().clamp(min=1)).all()


def test_each_answer_reads_only_its_own_tokens(prepared):
    """An answer's scores do not depend on which other answers share its row."""
    gen, state, answers = prepared
    alone = score_answers(gen, state, [answers[2]], 1)[0][0]  # (K, T)
    together = score_answers(gen, state, answers, 1)[0][2]  # (K, T)
    real = ~torch.isnan(alone)
    width = alone.shape[-1]
    assert ((together[:, :width][real] - alone[real]).abs() <= TOL * alone[real].abs().clamp(min=1)).all()


@pytest.mark.parametrize("packed", [True, False])
def test_answers_scored_in_groups_under_a_memory_budget_give_the_one_pass_numbers(prepared, packed):
    """Many long hypotheses under many passages would not fit in memory as one pass: under a budget
    they are read in groups, each answer on its own, so every number is the one-pass one."""
    gen, state, answers = prepared
    k, vocab = state.logprobs.shape
    budget = 2 * k * max(map(len, answers)) * vocab  # two of the longest answers a pass
    groups = answer_groups([len(a) for a in answers], k, vocab, budget)
    assert 1 < len(groups) < len(answers)  # several passes, some of several answers
    score = score_answers if packed else _plain
    before = ForwardCounter.count
    grouped = score(gen, state, answers, 5, budget=budget)
    # one pass a group (a group of one-token answers reads its only step from the prompt pass)
    assert ForwardCounter.count - before == sum(any(len(answers[i]) > 1 for i in g) for g in groups) > 1
    whole = score(gen, state, answers, 5)
    assert torch.equal(grouped[1], whole[1])  # the masks
    assert torch.equal(grouped[2], whole[2])  # the alternatives
    for g, w in (grouped[0], whole[0]), (grouped[3], whole[3]):  # log-probs
        assert torch.equal(torch.isnan(g), torch.isnan(w))
        real = ~torch.isnan(w)
        assert ((g[real] - w[real]).abs() <= TOL * w[real].abs().clamp(min=1)).all()
