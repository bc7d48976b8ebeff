"""Why is this answer wrong? Verdicts, each with the evidence that decided it.

Six verdicts, each a check on numbers the trace (or one teacher-forced pass) already holds; they
can overlap, and each carries the evidence that decided it:

- `retrieval-miss`: no retrieved passage contains the expected answer. A deeper search (the top 100,
  or the whole index when it is smaller) finds the best passage that does: its rank and how far its
  score s(z) is below the top one.
- `evidence-ignored`: a retrieved passage contains the expected answer, yet under that passage the
  generator prefers the produced answer: log p(produced|x,z) > log p(expected|x,z).
- `parametric`: the produced answer is about as likely under every passage (p(y|x,z) varies by at
  most a factor FLAT_RATIO over the K passages, so its responsibilities stay at the prior: the
  passages did not move it) and closed-book gives it too.
- `frankenstein`: RAG-Token's answer takes tokens from different passages (the top responsibility
  r_i(z) of a step that moves r_i away from the prior, as `decoding.stepper.top_sources` reads it), and
  RAG-Sequence answers something else and scores it higher: p_seq(its answer) > p_seq(RAG-Token's).
- `misleading-passage`: the passage with the highest posterior p(z|x,y) does not contain the
  expected answer but does contain the produced one.
- `search-error`: the model itself
  scores the expected answer higher than the produced one under the decoding's own marginal
  (p_seq for RAG-Sequence, p_tok for RAG-Token), so the model was right and greedy/beam search
  missed it; more beams may find it.

An answer that matches the expected one (SQuAD exact match) is not diagnosed: nothing fires.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from rag_core.analysis import matching
from rag_core.analysis.diagnosis.deep_search import DeepHit
from rag_core.analysis.diagnosis.verdict_rules import (
    VERDICTS,
    Verdict,
    check_evidence_ignored,
    check_frankenstein,
    check_misleading,
    check_parametric,
    check_retrieval_miss,
    check_search_error,
)
from rag_core.analysis.scoring import AnswerScores, ForcedAnswers
from rag_core.config import RAG_SEQUENCE, RAG_TOKEN
from rag_core.trace import Trace


@dataclass
class Diagnosis:
    question: str
    decoding: str  # the answer diagnosed: "rag-token" or "rag-sequence"
    answer: str
    expected: list[str]
    correct: bool | None  # None when no expected answer was given
    verdicts: list[Verdict]
    scores: list[AnswerScores]  # the produced answers and the teacher-forced expected ones

    @property
    def fired(self) -> list[str]:
        return [v.code for v in self.verdicts if v.fired]

    def verdict(self, code: str) -> Verdict:
        return next(v for v in self.verdicts if v.code == code)


def diagnose(
    trace: Trace,
    expected: str | Sequence[str] | None = None,
    decoding: str | None = None,
    forced: ForcedAnswers | None = None,
    deep: DeepHit | None = None,
    closed_book: str | None = None,
) -> Diagnosis:
    """Every verdict on one answer of a trace.

    `expected`: the right answer(s) (a string may list aliases separated by "|"). `decoding`: the
    answer to diagnose; by default the first wrong one of RAG-Sequence, RAG-Token. `forced`: the
    teacher-forced expected answers (`score_texts`/`force_answers`); `deep`: `deep_search`'s result;
    `closed_book`: the generator's answer with no passage (default: the trace's, if it has one).
    """
    if isinstance(expected, str):
        expected = [a.strip() for a in expected.split("|")]
    expected = [a for a in (expected or []) if a and matching.normalize_answer(a)]
    closed_book = closed_book if closed_book is not None else trace.closed_book
    decodings = [d for d in (RAG_SEQUENCE, RAG_TOKEN) if trace.answer(d) is not None]
    if not decodings:
        raise ValueError("the trace has no decoded answer to diagnose")
    if decoding is None:
        wrong = [
            d for d in decodings if expected and not matching.exact_match(trace.answer(d).answer, expected)
        ]
        decoding = (wrong or decodings)[0]
    cand = trace.answer(decoding)
    if cand is None:
        raise ValueError(f"the trace has no {decoding} answer")
    produced = AnswerScores.of(cand)
    if forced is not None and not produced.complete:
        produced = next((a for a in forced.by_label(decoding)), produced)
    forced_exp = forced.expected if forced is not None else None
    scores = [
        AnswerScores.of(c) for c in (trace.answer(d) for d in (RAG_TOKEN, RAG_SEQUENCE)) if c is not None
    ]
    scores += forced_exp or []
    correct = matching.exact_match(cand.answer, expected) if expected else None
    if correct:
        verdicts = [Verdict(code, False, "the answer matches the expected answer") for code in VERDICTS]
    else:
        need = "needs an expected answer"
        verdicts = [
            check_retrieval_miss(trace, expected, deep)
            if expected
            else Verdict("retrieval-miss", None, need),
            check_evidence_ignored(trace, expected, produced, forced_exp)
            if expected
            else Verdict("evidence-ignored", None, need),
            check_parametric(trace, produced, closed_book),
            check_frankenstein(trace, decoding),
            check_misleading(trace, expected, produced, forced_exp)
            if expected
            else Verdict("misleading-passage", None, need),
            check_search_error(trace, decoding, produced, forced_exp)
            if expected
            else Verdict("search-error", None, need),
        ]
    return Diagnosis(trace.question, decoding, cand.answer, list(expected), correct, verdicts, scores)
