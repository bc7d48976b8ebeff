"""Thorough rescoring packs every hypothesis of a passage into one row behind a block-diagonal mask
(`CausalGenerator.teacher_force_packed`). Its scores must be the ones of the plain path, which
teacher-forces each (answer, passage) pair in a row of its own."""

import pytest
import torch

from rag_core.decoding.decode import score_answers
from rag_core.generators.base import ForwardCounter
from rag_core.generators.causal import CausalGenerator

# float32 arithmetic in another order (longer masked rows): |packed - plain| <= TOL * max(1, |plain|)
TOL = 2e-5


def _plain(gen, state, answers, a):
    """The same call with packing switched off for this generator object only."""
    saved = CausalGenerator.teacher_force_packed
    try:
        del CausalGenerator.teacher_force_packed
        return score_answers(gen, state, answers, a)
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
