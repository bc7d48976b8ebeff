"""Why a replayed answer is what it is, in the product's words, from numbers the replay computed
exactly (no judge model anywhere). Each is a `Verdict` with typed evidence, as Ask's are.

Against an expected answer, for a wrong logged answer (SQuAD exact match):

- `retrieval-miss`: no document the model read holds the expected answer;
- `evidence-ignored`: one does, yet the replayed prompt makes the logged answer more likely than the
  expected one (both teacher-forced);
- `misleading-document`: without document D (its span cut out of the prompt) the greedy answer
  becomes the expected one;
- `position`: another order of the same documents (reversed, one moved first or last) gives the
  expected answer;
- `parametric`: the prompt with every document cut out gives the logged answer too: the model
  answered from what it knows.

A right answer fires none; without an expected answer none is judged (each says what it needs).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TypedDict

from rag_core.analysis.matching import exact_match
from rag_core.analysis.verdict_rules import Verdict
from rag_core.marginals import p_text

REPLAY_VERDICTS = {
    "retrieval-miss": "Retrieval miss",
    "evidence-ignored": "Evidence ignored",
    "misleading-document": "Misleading document",
    "position": "Position",
    "parametric": "Parametric answer",
}


class ReplayMiss(TypedDict):
    documents: int  # documents the model read


class ReplayIgnored(TypedDict):
    holding: list[int]  # prompt positions (1-based) of the documents holding the expected answer
    p_expected: float  # p(expected | the replayed prompt), its best form
    p_answer: float  # p(logged answer | the replayed prompt)


class ReplayMisleading(TypedDict):
    positions: list[int]  # the documents (1-based) whose removal makes the answer the expected one
    answers: list[str]  # the greedy answer without each document, in prompt order


class ReplayPosition(TypedDict):
    orders: list[list[int]]  # the orders (documents' prompt positions, 1-based) giving the expected answer


class ReplayParametric(TypedDict):
    closed_book: str  # the greedy answer of the prompt with no document


REPLAY_EVIDENCE: dict[str, type] = {
    "retrieval-miss": ReplayMiss,
    "evidence-ignored": ReplayIgnored,
    "misleading-document": ReplayMisleading,
    "position": ReplayPosition,
    "parametric": ReplayParametric,
}


class ReplayVerdict(Verdict):
    @property
    def title(self) -> str:
        return REPLAY_VERDICTS[self.code]


def judge(
    answer: str,
    expected: Sequence[str] | None,
    holds_expected: Sequence[bool],
    p_answer: float,
    p_expected: float | None,
    without: Sequence[str] | None,
    orders: Sequence[tuple[tuple[int, ...], str]] | None,
    closed_book: str,
) -> list[ReplayVerdict]:
    """Every replay verdict on one logged answer. `holds_expected`: per document in prompt order;
    `without`: the greedy answer without each document; `orders`: (order, its greedy answer).

    >>> [v.fired for v in judge("Bob", ["Ann"], [False, True], 0.6, 0.3, ["Bob", "Ann"], [], "Eve")]
    [False, True, True, False, False]
    >>> [v.fired for v in judge("Ann", ["Ann"], [True], 0.9, 0.9, None, None, "Ann")]
    [False, False, False, False, False]
    """
    if not expected:
        need = "needs an expected answer"
        return [ReplayVerdict(code, None, need) for code in REPLAY_VERDICTS]
    if exact_match(answer, expected):
        return [
            ReplayVerdict(code, False, "the answer matches the expected answer") for code in REPLAY_VERDICTS
        ]
    holding = [i + 1 for i, h in enumerate(holds_expected) if h]
    fixes = [i + 1 for i, a in enumerate(without or []) if exact_match(a, expected)]
    moved = [[z + 1 for z in order] for order, a in (orders or []) if exact_match(a, expected)]
    ignored = bool(holding) and p_expected is not None and p_answer > p_expected
    return [
        ReplayVerdict(
            "retrieval-miss",
            not holding,
            "no document the model read holds the expected answer"
            if not holding
            else f"document(s) {', '.join(map(str, holding))} hold the expected answer",
            {"documents": len(holds_expected)},
        ),
        ReplayVerdict(
            "evidence-ignored",
            ignored,
            f"the prompt makes the logged answer more likely (p = {p_text(p_answer)}) than the expected one "
            f"(p = {p_text(p_expected)}), though a document holds it"
            if ignored
            else "no document holds the expected answer, or the prompt prefers it",
            {"holding": holding, "p_expected": float(p_expected or 0.0), "p_answer": float(p_answer)},
        ),
        ReplayVerdict(
            "misleading-document",
            None if without is None else bool(fixes),
            "not checked"
            if without is None
            else (
                f"without document {', '.join(map(str, fixes))} the answer becomes the expected one"
                if fixes
                else "no single document's removal gives the expected answer"
            ),
            {} if without is None else {"positions": fixes, "answers": list(without)},
        ),
        ReplayVerdict(
            "position",
            None if orders is None else bool(moved),
            "not checked"
            if orders is None
            else (
                f"other orders of the documents give the expected answer ({len(moved)})"
                if moved
                else "no other order gives the expected answer"
            ),
            {} if orders is None else {"orders": moved},
        ),
        ReplayVerdict(
            "parametric",
            exact_match(closed_book, [answer]),
            f"with no document the model gives the same answer (“{closed_book}”)"
            if exact_match(closed_book, [answer])
            else f"with no document the model answers “{closed_book}”",
            {"closed_book": closed_book},
        ),
    ]
