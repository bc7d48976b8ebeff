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

from rag_core.analysis.diagnosis.verdict_rules import Verdict
from rag_core.analysis.matching import exact_match
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
    dropped: list[str]  # ids of documents retrieved but not in the prompt that hold the expected answer


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
    dropped: Sequence[str],
    p_answer: float,
    p_expected: float | None,
    without: Sequence[str] | None,
    orders: Sequence[tuple[tuple[int, ...], str]] | None,
    closed_book: str,
) -> list[ReplayVerdict]:
    """Every replay verdict on one logged answer. `holds_expected`: per document in prompt order;
    `dropped`: documents retrieved but left out of the prompt that hold the expected answer;
    `without`: the greedy answer without each document; `orders`: (order, its greedy answer).

    >>> [v.fired for v in judge("Bob", ["Ann"], [False, True], [], 0.6, 0.3, ["Bob", "Ann"], [], "Eve")]
    [False, True, True, False, False]
    >>> [v.fired for v in judge("Ann", ["Ann"], [True], [], 0.9, 0.9, None, None, "Ann")]
    [False, False, False, False, False]
    >>> judge("Bob", ["Ann"], [False], ["d2"], 0.6, 0.1, None, None, "Eve")[0].summary
    'no document the model read holds the expected answer; d2, retrieved but left out of the prompt, does'
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
            + (f"; {', '.join(dropped)}, retrieved but left out of the prompt, does" if dropped else "")
            if not holding
            else f"document(s) {', '.join(map(str, holding))} hold the expected answer",
            {"documents": len(holds_expected), "dropped": list(dropped)},
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
        _decoded(
            "misleading-document",
            None if without is None else {"positions": fixes, "answers": list(without)},
            f"without document {', '.join(map(str, fixes))} the answer becomes the expected one",
            "no single document's removal gives the expected answer",
        ),
        _decoded(
            "position",
            None if orders is None else {"orders": moved},
            "the documents in the order " + " or ".join("-".join(map(str, o)) for o in moved) + " give it",
            "no other order of the documents gives the expected answer",
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


def _decoded(code: str, evidence: dict | None, fired: str, quiet: str) -> ReplayVerdict:
    """A verdict on answers decoded afresh (without one document, or in another order); `evidence`:
    None when they were not decoded (a right answer, or no expected one), else which gave the
    expected answer (its first list)."""
    if evidence is None:
        return ReplayVerdict(code, None, "not checked")
    hit = bool(next(iter(evidence.values())))
    return ReplayVerdict(code, hit, fired if hit else quiet, evidence)
