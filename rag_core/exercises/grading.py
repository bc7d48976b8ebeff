"""Whether a student's answer matches the figure the engine revealed, and the class's counts.

A number counts as right within the exercise's tolerance, a choice when it is the revealed option;
a reason is not graded (the student compares it with the figure and the explanation).

>>> from rag_core.exercises.figures import Reveal
>>> grade("number", 0.5, Reveal(0.549, "0.549"), tolerance=0.05)
True
>>> grade("number", 0.4, Reveal(0.549, "0.549"), tolerance=0.05)
False
>>> grade("choice", "RAG-Token", Reveal("RAG-Token", "RAG-Token")), grade("reason", "a softmax", None)
(True, None)
>>> tally = ClassTally()
>>> tally.record("softmax", True); tally.record("softmax", False); tally.record("why", None)
>>> tally.counts()
{'softmax': {'right': 1, 'wrong': 1, 'reasoned': 0}, 'why': {'right': 0, 'wrong': 0, 'reasoned': 1}}
"""

from __future__ import annotations

import threading

from rag_core.exercises.figures import CHOICE, NUMBER, Reveal

OUTCOMES = ("right", "wrong", "reasoned")


def grade(ask: str, given, reveal: Reveal | None, tolerance: float | None = None) -> bool | None:
    """True or False for a number or a choice, None for a reason (not graded)."""
    if ask == NUMBER:
        # a typed decimal on the edge counts: 0.52 against 0.55 is 0.03 away, not 0.030000000000000027
        return abs(float(given) - float(reveal.value)) <= float(tolerance) + 1e-9
    if ask == CHOICE:
        return given == reveal.value
    return None


class ClassTally:
    """How a server's sessions answered each exercise: counts only, no names, no answers' text
    (the teacher's view). Shared by every session of the server, safe across their threads."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._counts: dict[str, dict[str, int]] = {}

    def record(self, exercise_id: str, right: bool | None) -> None:
        outcome = "reasoned" if right is None else "right" if right else "wrong"
        with self._lock:
            row = self._counts.setdefault(exercise_id, dict.fromkeys(OUTCOMES, 0))
            row[outcome] += 1

    def counts(self) -> dict[str, dict[str, int]]:
        with self._lock:
            return {k: dict(v) for k, v in self._counts.items()}
