"""Where each answer token came from, on toy models whose answer is known, and the closed-book row
against transformers' own BART call."""

from __future__ import annotations

import math

import pytest
import torch

from rag_core import marginals
from rag_core.analysis.attribution.token_sources import (
    END,
    KNOWN,
    PASSAGE,
    SEVERAL,
    UNSEEN,
    WEIGHTS,
    credit_differences,
    differing_steps,
    in_passages,
    kind,
    shares,
    token_sources,
)
from rag_core.config import AnswerSettings
from rag_core.corpus import Passage
from rag_core.decoding.decode import score_answers
from rag_core.generators.toy import ToyGenerator

from conftest import tiny_pipeline

PRIOR = torch.tensor([0.6, 0.4], dtype=torch.float64).log()  # (K=2,)
PASSAGES = [Passage("z1", "Eiffel Tower", ""), Passage("z2", "Louvre", "")]


def sources_of(tables: dict, closed: dict, answer: str):
    """The token sources of `answer` under a toy with per-passage `tables` and a closed-book table."""
    gen = ToyGenerator(tables, closed_book=closed)
    ids = gen.encode_answer(answer)
    rag, _, _, _ = score_answers(gen, gen.prepare("q?", PASSAGES), [ids])  # (1, K, T)
    book, _, _, _ = score_answers(gen, gen.prepare("q?", None), [ids])  # (1, 1, T)
    return token_sources(PRIOR, rag[0], book[0, 0], ends_with_eos=True), rag[0], book[0, 0]


def test_an_answer_only_the_first_passage_holds_is_copied_from_it():
    found, rag, book = sources_of(
        {"z1": {"": {"Paris": 0.9}, "Paris": {"</s>": 1.0}}, "z2": {"": {"Lyon": 0.9}}},
        {"": {"Paris": 0.01}},
        "Paris",
    )
    assert [s.label for s in found] == [PASSAGE, END]
    first = found[0]
    assert first.top == 0
    # the numbers are the mixture and the closed-book row, recomputed here by hand
    mix = 0.6 * 0.9 + 0.4 * rag[1, 0].exp().item()
    assert first.logp_rag == pytest.approx(math.log(mix), abs=1e-12)
    assert first.logp_closed == pytest.approx(math.log(0.01), abs=1e-12)
    assert first.top_share == pytest.approx(0.6 * 0.9 / mix, abs=1e-12)
    assert shares(found)[PASSAGE] == 1.0


def test_an_answer_every_passage_holds_comes_from_several():
    same = {"": {"Paris": 0.8}, "Paris": {"</s>": 1.0}}
    found, _, _ = sources_of({"z1": same, "z2": same}, {"": {"Paris": 0.02}}, "Paris")
    assert [s.label for s in found] == [SEVERAL, END]
    assert found[0].responsibility == pytest.approx(
        [0.6, 0.4], abs=1e-12
    )  # equal conditionals: r = the prior


def test_an_answer_no_passage_holds_but_the_model_knows_comes_from_the_weights():
    found, _, _ = sources_of(
        {"z1": {"": {"Lyon": 0.9}}, "z2": {"": {"Nice": 0.9}}},
        {"": {"Paris": 0.9}, "Paris": {"</s>": 1.0}},
        "Paris",
    )
    assert found[0].label == WEIGHTS
    assert found[0].gain < 0  # the passages made it less likely than the closed-book model alone
    assert shares(found) == {PASSAGE: 0.0, SEVERAL: 0.0, WEIGHTS: 1.0}


def test_the_gain_threshold_is_a_doubling():
    """Just under twice the closed-book probability is "weights", just over is credited to the passage."""
    for closed, want in ((0.2501, WEIGHTS), (0.2499, SEVERAL)):  # the mixture is 0.5
        found, _, _ = sources_of(
            {"z1": {"": {"Paris": 0.5}}, "z2": {"": {"Paris": 0.5}}}, {"": {"Paris": closed}}, "Paris"
        )
        assert found[0].label == want, closed


# ------------------------------------------------ already known: in a passage, or in none
def test_a_known_token_is_split_by_whether_a_passage_holds_its_word():
    """ "1989" the model already gives (closed-book 0.9, the passages 0.95: no doubling) is "weights"
    either way; shown as "in a passage, already known" beside a passage that says 1989, and as
    "not in any passage" beside passages that do not. The machine label and `weights_share` stay."""
    gen = ToyGenerator(
        {"z1": {"": {"1989": 0.95}, "1989": {"</s>": 1.0}}, "z2": {"": {"1989": 0.95}}},
        closed_book={"": {"1989": 0.9}, "1989": {"</s>": 1.0}},
    )
    ids = gen.encode_answer("1989")
    rag, _, _, _ = score_answers(gen, gen.prepare("q?", PASSAGES), [ids])  # (1, K, T)
    book, _, _, _ = score_answers(gen, gen.prepare("q?", None), [ids])  # (1, 1, T)
    tokens = [gen.token_text(i) for i in ids]
    for texts, want in (
        (["Berlin Wall\nThe wall fell on 9 November 1989.", "Louvre\nA museum."], KNOWN),
        (["Berlin Wall\nThe wall fell in 19890 BC.", "Louvre\nA museum."], UNSEEN),
    ):
        found = token_sources(PRIOR, rag[0], book[0, 0], ends_with_eos=True, passages=texts, tokens=tokens)
        assert [s.label for s in found] == [WEIGHTS, END]
        assert kind(found[0]) == want
        assert shares(found)[WEIGHTS] == 1.0
        assert shares(found, shown=True) == {
            PASSAGE: 0.0,
            SEVERAL: 0.0,
            KNOWN: float(want == KNOWN),
            UNSEEN: float(want == UNSEEN),
            WEIGHTS: 0.0,
        }


@pytest.mark.parametrize(
    "tokens,passages,want",
    [
        ([" Herman", " Mel", "ville"], ["Moby-Dick\nA novel by Herman Melville."], [True, True, True]),
        (
            [" Herman", " Mel", "ville"],
            ["Melbourne\nA city; Herman is a name."],
            [True, False, False],
        ),  # no Melville
        ([" Mel", "ville"], ["MELVILLE"], [True, True]),  # case-folded
        ([" Mel", "ville"], ["Melvilles"], [False, False]),  # a whole word, not part of one
        ([" Herman", " Mel", "ville"], ["Herman", "Melville"], [True, True, True]),
        (
            [" ", "1", "9", "8", "9"],
            ["It fell in 1989."],
            [True] * 5,
        ),  # the space is part of the word after it
        ([" ", "1", "9", "8", "9"], ["It fell in 11989."], [False] * 5),
        (["\n"], ["any text"], [False]),  # a blank token with no word after it is in no passage
    ],
)
def test_in_passages_reads_the_word_a_token_belongs_to(tokens, passages, want):
    assert in_passages(tokens, passages) == want


def test_a_rag_sequence_answer_can_credit_another_passage_than_the_responsibility_does():
    """Token 1 is likelier under z2 (r_1: z2), but the answer's first token has already made z1 the
    passage the whole answer comes from (prefix posterior: z1). Under RAG-Sequence's weighting the
    strip credits z1 at step 1, where the r_i(z) strip shows z2; under RAG-Token's, nothing differs."""
    lp = torch.tensor([0.6, 0.4], dtype=torch.float64).log()  # (K,)
    tok = torch.tensor([[0.9, 0.3], [0.1, 0.95]], dtype=torch.float64).log()  # (K, T)
    closed = torch.tensor([0.01, 0.01], dtype=torch.float64).log()  # (T,)
    as_seq = token_sources(lp, tok, closed, marginal="sequence")
    as_tok = token_sources(lp, tok, closed)
    assert [(s.label, s.top) for s in as_seq] == [(PASSAGE, 0), (PASSAGE, 0)]
    assert [(s.label, s.top) for s in as_tok] == [(PASSAGE, 0), (PASSAGE, 1)]
    assert credit_differences(as_seq, lp, tok) == [1]
    assert credit_differences(as_tok, lp, tok) == []
    assert differing_steps(as_tok, as_seq) == [1]


# ------------------------------------------------------------------- the closed-book row, for real
@pytest.fixture(scope="module")
def tiny(tmp_path_factory):
    return tiny_pipeline(
        tmp_path_factory.mktemp("tiny-stack"), AnswerSettings(k=3, beams=2, max_new_tokens=6)
    )[0]


def test_the_closed_book_row_equals_bart_called_directly(tiny):
    pipe = tiny
    gen = pipe.models.generator
    question = "Who built the old bridge of Paris?"
    answers = [gen.encode_answer(a) for a in ("Ada Lovelace", "the old tower of Oslo")]
    got = pipe.closed_book_scores(question, answers)  # (N, T)
    for n, ids in enumerate(answers):
        enc = gen.tokenizer([question], return_tensors="pt")
        labels = torch.tensor([ids])  # transformers shifts these right behind the decoder start token
        with torch.no_grad():
            logits = gen.model(
                input_ids=enc["input_ids"], attention_mask=enc["attention_mask"], labels=labels
            ).logits
        ref = torch.log_softmax(logits.float(), -1)[0].gather(-1, labels[0].unsqueeze(-1)).squeeze(-1)  # (T,)
        assert torch.allclose(got[n, : len(ids)].float(), ref, atol=1e-5)
        assert torch.isnan(got[n, len(ids) :]).all()  # past the shorter answer's end: not scored


def test_token_sources_of_a_real_trace_sum_to_its_mixture(tiny):
    """The per-token mixtures the labels are read from add up to the answer's RAG-Token likelihood."""
    pipe = tiny
    trace = pipe.run("Who built the old bridge of Paris?")
    c = trace.answer("rag-token")
    closed = pipe.closed_book_scores(trace.question, [c.token_ids])[0]  # (T,)
    found = token_sources(trace.log_prior, c.token_logp, closed, c.forced, c.finished)
    assert sum(s.logp_rag for s in found) == pytest.approx(c.log_p_tok(trace.log_prior), abs=1e-9)
    gains = torch.tensor([s.gain for s in found], dtype=torch.float64)
    assert torch.allclose(
        gains, marginals.token_mixture(trace.log_prior, c.token_logp) - closed.double(), atol=1e-12
    )


def test_a_rag_sequence_answers_steps_add_up_to_its_sequence_likelihood(tiny):
    """Weighted by p(z|x,y_<i), the per-step probabilities multiply to p_seq(y) (the chain rule of the
    RAG-Sequence marginal), and the responsibility at the last step is the citation p(z|x,y)."""
    pipe = tiny
    trace = pipe.run("Where is the old library?")
    c = trace.answer("rag-sequence")
    closed = pipe.closed_book_scores(trace.question, [c.token_ids])[0]  # (T,)
    found = token_sources(trace.log_prior, c.token_logp, closed, c.forced, c.finished, marginal="sequence")
    assert sum(s.logp_rag for s in found) == pytest.approx(c.log_p_seq(trace.log_prior), abs=1e-9)
    cite = marginals.citation(trace.log_prior, c.token_logp)  # (K,)
    assert found[-1].responsibility == pytest.approx(cite.tolist(), abs=1e-9)
