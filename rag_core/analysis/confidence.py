"""When the model is guessing: one rule, from numbers every answer card already has, so that an answer
at p = 0.0008 never reads like one at p = 0.57 (docs/design.md §1.8).

Three numbers of the chosen answer y of one decoding, all exact:

- **p**, the answer's probability under its own decoding's marginal (p_tok for RAG-Token, p_seq for
  RAG-Sequence), as the answer card prints it;
- **the runner-up**: among the other candidates the same decoding kept (the pooled RAG-Sequence
  hypotheses, RAG-Token's other beams), those whose answer differs from y after SQuAD normalisation
  (`matching.normalize_answer`, so "Melville." is not a rival of "Melville"), the one with the highest
  probability under the same marginal; none when the decoding kept no other answer (greedy RAG-Token).
  The **margin** is p − p(runner-up). (A RAG-Token beam search ranks by its length-penalised score,
  so the runner-up can be more likely than the answer: the margin is then negative.);
- **the support**: max_z [log p(y|x,z) − log p_closed(y|x)] in nats, how much the passage that helps
  most raises the whole answer over the same generator with no passage (the closed-book row, one
  teacher-forced pass). A passage fast rescoring never scored counts p(y|x,z) = 0, as in the marginal.

The answer is **low confidence** when any of these holds (each adds its reason):

1. guessing: p < P_GUESS = 0.1;
2. a near tie: p < TIE_RATIO · p(runner-up) with TIE_RATIO = 2 (the answer is not even twice as
   likely as the best different answer the decoding found);
3. unsupported: support ≤ 0 (no retrieved passage makes the whole answer more likely than the
   model alone does) *and* p < P_SURE = 0.5. A well-known fact the model gives at p ≥ 0.5 without
   passages is not a guess; an unsupported answer below even odds is. (Any gain counts here, not
   the doubling that credits a single token to the passages: for a whole answer the question is
   whether reading a passage helped at all. On the default stack, "Leonardo da Vinci", which its
   best passage makes about 1.5 times as likely, is supported; "<br>" for the HTML line break,
   which every passage makes less likely, is not.)

The thresholds are round numbers fixed in advance, not tuned on any split (the test split was not
looked at to choose them). An unknown support (no closed-book row) leaves rule 3 out.

>>> c = assess(0.068, support=-0.2)
>>> c.low, c.codes
(True, ('guessing', 'unsupported'))
>>> c.reasons[0]
'the model is guessing: p = 0.068'
>>> c.summary() == ", and ".join(c.reasons)
True
>>> assess(0.57, support=3.0, runner_up="Moby", p_runner_up=0.1).low
False
>>> assess(0.57, support=3.0, runner_up="Moby", p_runner_up=0.3).codes
('near-tie',)
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch

from rag_core import marginals
from rag_core.analysis.matching import normalize_answer
from rag_core.config import DECODINGS, STUFFED
from rag_core.marginals import p_text, prob
from rag_core.trace import Candidate, Trace, log_p_under

P_GUESS = 0.1  # below 1 in 10 the model is guessing
P_SURE = 0.5  # an answer no passage supports is trusted from even odds up
TIE_RATIO = 2.0  # the answer must be at least twice as likely as the runner-up
SUPPORT_MIN = 0.0  # a passage supports the answer when it makes it more likely than closed-book (nats)
GUESSING, NEAR_TIE, UNSUPPORTED = "guessing", "near-tie", "unsupported"


@dataclass(frozen=True)
class Confidence:
    p: float  # the answer's probability under its own decoding's marginal
    codes: tuple[str, ...]  # the rules that fired (GUESSING, NEAR_TIE, UNSUPPORTED), in that order
    reasons: tuple[str, ...]  # one plain sentence per code
    runner_up: str | None = None  # the best different answer the decoding kept
    p_runner_up: float | None = None
    support: float | None = None  # max_z log p(y|x,z) − log p_closed(y|x), nats; None: not known

    @property
    def low(self) -> bool:
        return bool(self.codes)

    @property
    def margin(self) -> float | None:
        """p − p(runner-up); None when the decoding kept no other answer."""
        return None if self.p_runner_up is None else self.p - self.p_runner_up

    @property
    def supported(self) -> bool | None:
        return None if self.support is None else bool(self.support > SUPPORT_MIN)

    def summary(self) -> str:
        """The reasons as one sentence ("" when the answer is not low confidence)."""
        return ", and ".join(self.reasons)

    def to_json(self) -> dict:
        return {
            "low": self.low,
            "codes": list(self.codes),
            "reasons": list(self.reasons),
            "p": self.p,
            "runner_up": self.runner_up,
            "p_runner_up": self.p_runner_up,
            "margin": self.margin,
            "support": self.support if self.support is not None and math.isfinite(self.support) else None,
            "supported": self.supported,
        }  # a support of -inf (no passage gives y any probability): null


def assess(
    p: float, support: float | None = None, runner_up: str | None = None, p_runner_up: float | None = None
) -> Confidence:
    """The rule of the module docstring on its three numbers."""
    codes, reasons = [], []
    if p < P_GUESS:
        codes.append(GUESSING)
        reasons.append(f"the model is guessing: p = {p_text(p)}")
    if p_runner_up is not None and p < TIE_RATIO * p_runner_up:
        codes.append(NEAR_TIE)
        reasons.append(
            f"a near tie: the runner-up “{runner_up}” has p = {p_text(p_runner_up)}"
            + ("" if GUESSING in codes else f" against {p_text(p)}")
        )
    if support is not None and not support > SUPPORT_MIN and p < P_SURE:  # NaN counts as no support
        codes.append(UNSUPPORTED)
        reasons.append(
            "no retrieved passage makes this answer more likely than the model alone"
            + ("" if GUESSING in codes else f" (p = {p_text(p)}, below {P_SURE:g})")
        )
    return Confidence(p, tuple(codes), tuple(reasons), runner_up, p_runner_up, support)


def answer_logp(log_pz: torch.Tensor, cand: Candidate) -> float:
    """log p(y|x) of a candidate under its own decoding's marginal."""
    return log_p_under(cand, cand.decoding, log_pz)


def runner_up(
    trace: Trace, cand: Candidate, log_prior: torch.Tensor | None = None
) -> tuple[str, float] | None:
    """(answer, p) of the most likely other candidate of `cand`'s decoding whose answer differs from
    `cand`'s after SQuAD normalisation, scored under the same marginal; None when there is none.

    `log_prior` (K,): a changed prior (a counterfactual's, -inf for a removed passage) instead of
    the trace's; a RAG-Sequence hypothesis only a removed passage made is then not a rival (the
    decoding of the kept passages would not have kept it)."""
    lpz = trace.log_prior if log_prior is None else log_prior  # (K,)
    kept = {z for z, on in enumerate(torch.isfinite(lpz).tolist()) if on}
    mine = normalize_answer(cand.answer)
    rivals = [
        c
        for c in trace.of(cand.decoding)
        if c is not cand and normalize_answer(c.answer) != mine and (not c.sources or c.sources & kept)
    ]
    if not rivals:
        return None
    scored = [(answer_logp(lpz, c), -c.rank, c.answer) for c in rivals]
    logp, _, answer = max(scored)  # the most likely; on a tie, the better-ranked
    return answer, prob(logp)


def support(token_logp: torch.Tensor, closed_logp: torch.Tensor, kept: torch.Tensor | None = None) -> float:
    """max_z [log p(y|x,z) − log p_closed(y|x)] (nats) over the kept passages: token_logp (K, T),
    closed_logp (T', T' ≥ T) the closed-book row (a batched row may run past the answer's end),
    kept (K,) bool (default: all)."""
    t = token_logp.shape[-1]
    doc = marginals.doc_sequence_logp(token_logp)  # (K,) log p(y|x,z); an unscored pair is -inf
    if kept is not None:
        doc = doc[kept]  # (K',) only the passages still read
    closed = closed_logp[:t].double().sum()  # () log p_closed(y|x)
    # max_z(doc) − closed, not max_z(doc − closed): a passage that cannot make y (-inf) minus a
    # closed-book reading that cannot either (-inf) is NaN, and a NaN would hide the passage that can
    return float(doc.max() - closed) if doc.numel() else math.nan


def candidate_confidence(
    trace: Trace, cand: Candidate, closed_logp: torch.Tensor | None, log_prior: torch.Tensor | None = None
) -> Confidence:
    """The rule for one candidate of a trace; `closed_logp` its closed-book row (T',), or None when
    there is none (then rule 3 is left out). `log_prior` (K,): score it under a changed prior (a
    counterfactual's; -inf marks a removed passage, which then neither supports nor rivals it)."""
    lpz = trace.log_prior if log_prior is None else log_prior  # (K,)
    rival = runner_up(trace, cand, lpz)
    return assess(
        prob(answer_logp(lpz, cand)),
        None if closed_logp is None else support(cand.token_logp, closed_logp, kept_rows(cand, lpz)),
        *(rival or (None, None)),
    )


def kept_rows(cand: Candidate, log_pz: torch.Tensor) -> torch.Tensor | None:
    """(K,) bool: the passages a marginal's answer is still read under (a counterfactual removes
    some); None for the stuffed reading, whose one row reads every passage together."""
    return None if cand.decoding == STUFFED else torch.isfinite(log_pz)


def answer_confidences(pipe, trace: Trace) -> dict[str, Confidence]:
    """The rule for each decoding's chosen answer of `trace`, with `pipe` (the trace's stack) making
    each answer's closed-book row in a teacher-forced pass of its own. (The app and an eval run
    batch several answers' rows in one pass: the same numbers to float32 rounding.)"""
    rows: dict[tuple[int, ...], torch.Tensor] = {}
    out = {}
    for c in filter(None, (trace.answer(d) for d in DECODINGS)):
        ids = tuple(c.token_ids)
        if ids and ids not in rows:
            rows[ids] = pipe.closed_book_scores(trace.query, [list(ids)])[0]  # (T,)
        out[c.decoding] = candidate_confidence(trace, c, rows.get(ids))
    return out
