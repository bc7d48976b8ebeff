"""Two saved evaluation runs compared question by question, from the stored runs alone (no model call).

Questions are paired by their text (the n-th occurrence of a text with the n-th), so two runs of one
question file under different settings (index, K, scale, decoding, beams, generator) line up. Each
question's *outcome* in a run is "right" (exact match) or, when wrong, the first diagnosis verdict
that fired ("wrong, no verdict" when none did); the transitions count the outcome pairs.

>>> from .question_result import ModeResult, QuestionResult
>>> def run(*ems): return [QuestionResult(f"q{i}", ["a"], "",
...                                       {"rag-sequence": ModeResult("a" if em else "b", em, em)},
...                                       True, 1) for i, em in enumerate(ems)]
>>> c = compare_results(run(True, False, False), run(True, True, False))
>>> c.counts()
{'same': 2, 'fixed': 1, 'broken': 0, 'only in A': 0, 'only in B': 0}
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field

import pandas as pd

from rag_core.analysis.diagnosis.verdict_rules import VERDICTS
from rag_core.analysis.evaluation.question_result import QuestionResult
from rag_core.config import RAG_SEQUENCE

RIGHT, WRONG = "right", "wrong, no verdict"
COLUMNS = ["question", "answers", "answer_a", "answer_b", "em_a", "em_b", "outcome_a", "outcome_b", "change"]


def outcome(r: QuestionResult, mode: str) -> str | None:
    """'right', the first fired verdict's title, or 'wrong, no verdict'; None when the mode was not run."""
    m = r.modes.get(mode)
    if m is None:
        return None
    if m.em:
        return RIGHT
    return VERDICTS.get(m.verdicts[0], m.verdicts[0]) if m.verdicts else WRONG


def _keyed(results: Sequence[QuestionResult]) -> dict[tuple[str, int], QuestionResult]:
    seen: Counter = Counter()
    out = {}
    for r in results:
        out[(r.question, seen[r.question])] = r
        seen[r.question] += 1
    return out


@dataclass
class Comparison:
    mode: str
    rows: list[dict]  # one per question present in both runs, in A's order
    only_a: list[str] = field(default_factory=list)
    only_b: list[str] = field(default_factory=list)

    def frame(self) -> pd.DataFrame:
        return pd.DataFrame(self.rows, columns=COLUMNS)

    def counts(self) -> dict[str, int]:
        changes = Counter(r["change"] for r in self.rows)
        return {
            "same": changes["same"],
            "fixed": changes["fixed"],
            "broken": changes["broken"],
            "only in A": len(self.only_a),
            "only in B": len(self.only_b),
        }

    def em(self) -> tuple[float, float]:
        """EM of run A and of run B over the paired questions."""
        n = len(self.rows)
        return (
            (sum(r["em_a"] for r in self.rows) / n, sum(r["em_b"] for r in self.rows) / n)
            if n
            else (0.0, 0.0)
        )

    def transitions(self) -> pd.DataFrame:
        """(outcome in A, outcome in B, number of questions), largest first."""
        pairs = Counter((r["outcome_a"], r["outcome_b"]) for r in self.rows)
        rows = [{"outcome_a": a, "outcome_b": b, "questions": n} for (a, b), n in pairs.items()]
        return pd.DataFrame(rows, columns=["outcome_a", "outcome_b", "questions"]).sort_values(
            ["questions", "outcome_a", "outcome_b"], ascending=[False, True, True], ignore_index=True
        )

    def flipped(self, change: str) -> list[str]:
        """The questions that went `change` ("fixed": wrong in A, right in B; "broken": the reverse)."""
        return [r["question"] for r in self.rows if r["change"] == change]


def compare_results(
    a: Sequence[QuestionResult], b: Sequence[QuestionResult], mode: str = RAG_SEQUENCE
) -> Comparison:
    ka, kb = _keyed(a), _keyed(b)
    rows = []
    for key, ra in ka.items():
        rb = kb.get(key)
        if rb is None or mode not in ra.modes or mode not in rb.modes:
            continue
        ma, mb = ra.modes[mode], rb.modes[mode]
        change = "same" if ma.em == mb.em else ("fixed" if mb.em else "broken")
        rows.append(
            {
                "question": ra.question,
                "answers": " | ".join(ra.answers),
                "answer_a": ma.answer,
                "answer_b": mb.answer,
                "em_a": int(ma.em),
                "em_b": int(mb.em),
                "outcome_a": outcome(ra, mode),
                "outcome_b": outcome(rb, mode),
                "change": change,
            }
        )
    only_a = [k[0] for k in ka if k not in kb]
    only_b = [k[0] for k in kb if k not in ka]
    return Comparison(mode, rows, only_a, only_b)
