"""Choosing the low-confidence rule's free settings on a saved evaluation run (run it on dev).

The rule (`confidence`) flags an answer when p < P_GUESS, when another of the compared readings
answered otherwise while p < P_TRUST, or when no passage supports it at p < P_SURE. Three of its
settings are free: the thresholds P_GUESS and P_TRUST and which readings are compared
(`AGREE_READINGS`). For every candidate
this module recomputes, from the run's stored answers alone, the share of wrong and of right
answers each reading's rule would flag, and picks one: of the candidates that flag at least
`WRONG_GOAL` of the wrong answers under both marginals, the one flagging the fewest right ones
(the worse of the two marginals counts; a tie goes to the one flagging more wrong answers, then to
the earlier candidate). The unsupported code does not depend on these settings: it is read from
the run's stored codes.

>>> from rag_core.analysis.evaluation.question_result import ModeResult, QuestionResult
>>> def q(tok, seq, stuffed):  # (answer, p, right) per reading
...     modes = {m: ModeResult(a, ok, ok, p_tok=p, p_seq=p, p_stuffed=p, low_confidence=[])
...              for m, (a, p, ok) in zip(READINGS, (tok, seq, stuffed))}
...     return QuestionResult("q", ["x"], "", modes, True, 1)
>>> run = [q(*[("x", 0.9, True)] * 3), q(("y", 0.6, False), ("y", 0.6, False), ("x", 0.5, True))]
>>> rule = Rule(0.1, READINGS)
>>> flagged_shares(run, rule)["rag-token"]  # (wrong flagged, right flagged, wrong answers)
(1.0, 0.0, 1)
>>> flagged_shares(run, Rule(0.1, ()))["rag-token"]  # p = 0.6 is no guess, and nothing is compared
(0.0, 0.0, 1)
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from rag_core.analysis.diagnosis.confidence import UNSUPPORTED
from rag_core.analysis.evaluation.calibration import P_FIELD
from rag_core.analysis.evaluation.question_result import ModeResult, QuestionResult
from rag_core.analysis.matching import normalize_answer
from rag_core.config import DECODINGS, READING_LABELS, READINGS

MARGINALS = DECODINGS  # the goal is judged under both
WRONG_GOAL = 0.6  # the share of wrong answers a chosen rule must flag under both marginals
THRESHOLDS = (0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9)
COMPARED = ((), MARGINALS, READINGS)  # no comparison, the two marginals, all three readings
TRUSTS = (0.5, 0.6, 0.7, 0.8, 0.9, math.inf)  # P_TRUST: a disagreement flags only below it


@dataclass(frozen=True)
class Rule:
    p_guess: float  # flag when p < p_guess
    compared: tuple[str, ...]  # flag when one of these readings answered otherwise ...
    p_trust: float = math.inf  # ... and p < p_trust

    def words(self) -> str:
        """'p < 0.1 or any of RAG-Token / RAG-Sequence / stuffed disagrees (at p < 0.8)'."""
        if not self.compared:
            return f"p < {self.p_guess:g} alone"
        names = " / ".join(READING_LABELS.get(r, r) for r in self.compared)
        below = f" (at p < {self.p_trust:g})" if math.isfinite(self.p_trust) else ""
        return f"p < {self.p_guess:g} or any of {names} disagrees{below}"


def own_p(mode: str, m: ModeResult) -> float | None:
    """The answer's probability under its own reading, as its card prints it."""
    return getattr(m, P_FIELD[mode])


def flags(result: QuestionResult, mode: str, rule: Rule) -> bool | None:
    """Whether `rule` flags `mode`'s answer of one question; None where the run did not assess it."""
    m = result.modes.get(mode)
    if m is None or m.low_confidence is None or own_p(mode, m) is None:
        return None
    mine = normalize_answer(m.answer)
    disagree = any(
        normalize_answer(result.modes[r].answer) != mine
        for r in rule.compared
        if r != mode and r in result.modes
    )
    p = own_p(mode, m)
    return p < rule.p_guess or (disagree and p < rule.p_trust) or UNSUPPORTED in m.low_confidence


def flagged_shares(results: list[QuestionResult], rule: Rule) -> dict[str, tuple[float, float, int]]:
    """{reading: (share of its wrong answers flagged, share of its right ones flagged, wrong answers)}
    over the readings the run assessed (an empty group counts 0)."""
    out = {}
    for mode in READINGS:
        judged = [(r.modes[mode].em, f) for r in results if (f := flags(r, mode, rule)) is not None]
        if not judged:
            continue
        wrong = [f for em, f in judged if not em]
        right = [f for em, f in judged if em]
        out[mode] = (
            sum(wrong) / len(wrong) if wrong else 0.0,
            sum(right) / len(right) if right else 0.0,
            len(wrong),
        )
    return out


def candidates() -> list[Rule]:
    """Every threshold with every choice of compared readings and, where readings are compared,
    every P_TRUST above the threshold (below it the disagreement could flag nothing new)."""
    return [
        Rule(p, c, t) for p in THRESHOLDS for c in COMPARED for t in (TRUSTS if c else (math.inf,)) if t > p
    ]


def choose(results: list[QuestionResult]) -> tuple[Rule | None, list[tuple[Rule, dict]]]:
    """(the chosen rule, or None when none reaches WRONG_GOAL; every candidate with its shares)."""
    table = [(rule, flagged_shares(results, rule)) for rule in candidates()]
    ok = []
    for i, (rule, shares) in enumerate(table):
        marg = [shares[m] for m in MARGINALS if m in shares]
        if len(marg) == len(MARGINALS) and min(s[0] for s in marg) >= WRONG_GOAL:
            ok.append((max(s[1] for s in marg), -min(s[0] for s in marg), i, rule))
    return (min(ok)[3] if ok else None), table
