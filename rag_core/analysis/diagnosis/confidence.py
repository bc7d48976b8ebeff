"""When not to trust an answer: one rule, from numbers every answer card already has, so that an
answer at p = 0.0008 never reads like one at p = 0.57, and two cards with the same evidence always
wear the same badge (docs/design.md §1.8).

The evidence about the chosen answer y of one reading, all exact:

- **p**, the answer's probability under its own reading (p_tok for RAG-Token, p_seq for
  RAG-Sequence, p(y | x, all passages) for the stuffed reading), as the answer card prints it;
- **the other readings**: the answers the other readings of the same question and passages gave
  (RAG-Token, RAG-Sequence and the stuffed reading, computed for the rule when a trace lacks it),
  compared after SQuAD normalisation (`matching.normalize_answer`, so "Melville." agrees with
  "Melville");
- **the support**: max_z [log p(y|x,z) − log p_closed(y|x)] in nats, how much the passage that helps
  most raises the whole answer over the same generator with no passage (the closed-book row, one
  teacher-forced pass); for the stuffed reading, whose one prompt reads every passage together,
  log p(y|x, all passages) − log p_closed(y|x). A passage fast rescoring never scored counts
  p(y|x,z) = 0, as in the marginal.
- **the runner-up**, shown beside the answer but not part of the rule: among the other candidates
  the same decoding kept, the likeliest whose answer differs from y. Greedy RAG-Token keeps none, so
  a rule that used it would judge two cards with the same p differently.

The answer is **low confidence** when any of these holds (each adds its reason):

1. unlikely: p < P_GUESS;
2. the readings disagree: another reading of the same passages gave a different answer, and
   p < P_TRUST (an answer its own reading is this sure of is not flagged by a disagreeing one; the
   disagreement is still shown);
3. unsupported: support ≤ 0 (no retrieved passage makes the whole answer more likely than the
   model alone does) *and* p < P_SURE = 0.5: an unsupported answer below even odds.

P_GUESS, P_TRUST and the readings compared were chosen on the dev split (docs/results.md, "A flag that
catches wrong answers"); P_SURE is a round number fixed in advance. An unknown support (no
closed-book row) leaves rule 3 out. An answer card and `ask` always compare all three readings;
an `eval` run compares the stuffed reading only when made with `--stuffed`; where the stuffed
prompt is too long for the generator, only the marginals are compared.

>>> c = assess(0.068, support=-0.2)
>>> c.low, c.codes
(True, ('guessing', 'unsupported'))
>>> c.reasons[0]
'the model is unlikely to be right: p = 0.068'
>>> c.summary() == ", and ".join(c.reasons)
True
>>> assess(0.97, support=3.0, runner_up="Moby", p_runner_up=0.02).low
False
>>> assess(0.62, support=3.0, disagree={"stuffed": "Moby"}).codes
('readings-disagree',)
>>> assess(0.97, support=3.0, disagree={"stuffed": "Moby"}).codes  # sure enough: shown, not flagged
()
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch

from rag_core import marginals
from rag_core.analysis.matching import normalize_answer
from rag_core.config import READING_LABELS, READINGS, STUFFED
from rag_core.marginals import p_text, prob
from rag_core.trace import Candidate, Trace, log_p_under

# P_GUESS, P_TRUST and AGREE_READINGS were chosen on dev: of the rules that flag at least 60% of the wrong
# answers under both marginals, the one that flags the fewest right ones (docs/results.md).
P_GUESS = 0.1  # below it the model is guessing
P_SURE = 0.5  # an answer no passage supports is trusted from even odds up
P_TRUST = 0.9  # a disagreeing reading flags an answer only below it (inf: always)
SUPPORT_MIN = 0.0  # a passage supports the answer when it makes it more likely than closed-book (nats)
AGREE_READINGS = READINGS  # the readings an answer is compared with
GUESSING, DISAGREE, UNSUPPORTED = "guessing", "readings-disagree", "unsupported"


@dataclass(frozen=True)
class Confidence:
    p: float  # the answer's probability under its own reading (a marginal, or the stuffed prompt's)
    codes: tuple[str, ...]  # the rules that fired (GUESSING, DISAGREE, UNSUPPORTED), in that order
    reasons: tuple[str, ...]  # one plain sentence per code
    runner_up: str | None = None  # the best different answer the decoding kept
    p_runner_up: float | None = None
    support: float | None = None  # max_z log p(y|x,z) − log p_closed(y|x), nats; None: not known
    disagree: tuple[tuple[str, str], ...] = ()  # (reading, its answer) of each reading that differs

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
            "disagree": dict(self.disagree),
        }  # a support of -inf (no passage gives y any probability): null


def assess(
    p: float,
    support: float | None = None,
    runner_up: str | None = None,
    p_runner_up: float | None = None,
    disagree: dict[str, str] | None = None,
) -> Confidence:
    """The rule of the module docstring on its evidence; `disagree` maps each other reading whose
    answer differs from this one to that answer."""
    codes, reasons = [], []
    if p < P_GUESS:
        codes.append(GUESSING)
        reasons.append(f"the model is unlikely to be right: p = {p_text(p)}")
    if disagree and p < P_TRUST:
        codes.append(DISAGREE)
        others = "; ".join(f"{READING_LABELS.get(r, r)} says “{a}”" for r, a in disagree.items())
        reasons.append(f"the readings disagree: {others}")
    if support is not None and not support > SUPPORT_MIN and p < P_SURE:  # NaN counts as no support
        codes.append(UNSUPPORTED)
        reasons.append(
            "no retrieved passage makes this answer more likely than the model alone"
            + ("" if GUESSING in codes else f" (p = {p_text(p)}, below {P_SURE:g})")
        )
    return Confidence(
        p, tuple(codes), tuple(reasons), runner_up, p_runner_up, support, tuple((disagree or {}).items())
    )


def disagreeing(trace: Trace, cand: Candidate) -> dict[str, str]:
    """The other readings of `trace` (among AGREE_READINGS, those computed) whose answer differs
    from `cand`'s after SQuAD normalisation: {reading: its answer}."""
    mine = normalize_answer(cand.answer)
    others = {r: trace.answer(r) for r in AGREE_READINGS if r != cand.decoding}
    return {r: c.answer for r, c in others.items() if c is not None and normalize_answer(c.answer) != mine}


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
    counterfactual's; -inf marks a removed passage, which then neither supports nor rivals it); the
    other readings were decoded under the trace's own prior, so they are compared only without one."""
    lpz = trace.log_prior if log_prior is None else log_prior  # (K,)
    rival = runner_up(trace, cand, lpz)
    return assess(
        prob(answer_logp(lpz, cand)),
        None if closed_logp is None else support(cand.token_logp, closed_logp, kept_rows(cand, lpz)),
        *(rival or (None, None)),
        disagree=disagreeing(trace, cand) if log_prior is None else None,
    )


def kept_rows(cand: Candidate, log_pz: torch.Tensor) -> torch.Tensor | None:
    """(K,) bool: the passages a marginal's answer is still read under (a counterfactual removes
    some); None for the stuffed reading, whose one row reads every passage together."""
    return None if cand.decoding == STUFFED else torch.isfinite(log_pz)


def answer_confidences(pipe, trace: Trace) -> dict[str, Confidence]:
    """The rule for each reading's chosen answer of `trace`, with `pipe` (the trace's stack) making
    each answer's closed-book row in a teacher-forced pass of its own. (The app and an eval run
    batch several answers' rows in one pass: the same numbers to float32 rounding.) The rule
    compares the three readings, so a trace without its stuffed reading gets its answers first
    (`pipe.with_stuffed`, without what each passage is worth: the rule never reads it); the
    confidences of the readings the trace was decoded with are returned."""
    asked = [d for d in READINGS if trace.answer(d) is not None]
    try:
        trace = pipe.with_stuffed(trace, explain=False)
    except ValueError:  # the K passages make a prompt longer than the generator reads: not compared
        pass
    rows: dict[tuple[int, ...], torch.Tensor] = {}
    out = {}
    for c in filter(None, (trace.answer(d) for d in asked)):
        ids = tuple(c.token_ids)
        if ids and ids not in rows:
            rows[ids] = pipe.closed_book_scores(trace.question, [list(ids)])[0]  # (T,)
        out[c.decoding] = candidate_confidence(trace, c, rows.get(ids))
    return out
