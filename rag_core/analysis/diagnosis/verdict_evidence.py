"""What each verdict's evidence holds: one TypedDict per verdict, `EVIDENCE[code]`, and a check.

A verdict's evidence stays a plain dict (eval runs store it as JSON and read it back as one); these
types name its keys and their types for the reader, and `evidence_problems` holds a dict to its
type, so a verdict rule that writes a key its type does not declare, leaves out a required one or
writes the wrong kind of value fails the tests. A new verdict adds its type here beside its rule.

>>> evidence_problems("search-error", {"marginal": "p_seq", "expected": "Rome", "p_expected": 0.4,
...                                    "p_produced": 0.2, "beams": 1})
[]
>>> evidence_problems("search-error", {"marginal": "p_seq", "p_expected": "high"})
["search-error: 'p_expected' is str, not float", 'search-error: missing beams, expected, p_produced']
"""

from __future__ import annotations

import types
import typing
from typing import Any, TypedDict, Union


class RetrievalMissRequired(TypedDict):
    containing_ranks: list[int]  # ranks of the retrieved passages holding the expected answer


class RetrievalMiss(RetrievalMissRequired, total=False):
    k: int  # passages retrieved
    depth: int  # how deep the search for a passage holding the answer went
    rank: int | None  # that passage's rank in the deeper search; None when none was found
    score: float | None  # its score s(z)
    title: str | None
    text: str | None
    top_score: float  # the score of rank 1
    kth_score: float  # the score of rank K, the last passage read
    gap_top: float | None  # top_score - score
    gap_kth: float | None  # kth_score - score


class IgnoredPassage(TypedDict):
    rank: int
    title: str
    prior: float
    posterior: float
    expected: str  # the expected answer's form scored under this passage
    p_expected: float  # p(expected | x, z)
    p_produced: float  # p(produced | x, z)
    prefers: str  # "produced" or "expected": which one the generator favours under this passage


class EvidenceIgnored(TypedDict):
    passages: list[IgnoredPassage]  # every retrieved passage holding the expected answer


class ParametricRequired(TypedDict):
    ratio: float  # max / min of p(y|x,z) over the K passages
    p_answer_given_passage: list[float]  # (K,)
    posterior: list[float]  # (K,) p(z|x,y)
    prior: list[float]  # (K,) p(z|x)
    tv_posterior_prior: float  # total variation between the two
    closed_book: str | None  # the closed-book answer, when it was computed
    threshold: float  # FLAT_RATIO


class Parametric(ParametricRequired, total=False):
    closed_book_agrees: bool


class FrankensteinRequired(TypedDict):
    rag_token: str
    rag_sequence: str
    p_tok_token: float  # p_tok of RAG-Token's answer
    p_seq_token: float  # p_seq of RAG-Token's answer
    p_tok_sequence: float  # p_tok of RAG-Sequence's answer
    p_seq_sequence: float  # p_seq of RAG-Sequence's answer


class FrankensteinStep(TypedDict):
    step: int
    token: str
    rank: int  # the passage with the top responsibility at this step
    responsibility: float  # r_i(z) of that passage
    prior: float  # its prior p(z|x)
    decided: bool  # whether the step moved r_i far enough from the prior to name a source


class Frankenstein(FrankensteinRequired, total=False):
    steps: list[FrankensteinStep]
    sources: list[int]  # ranks of the passages the steps were drawn from


class MisleadingRequired(TypedDict):
    rank: int  # the passage with the highest posterior p(z|x,y)
    title: str
    prior: float
    posterior: float
    contains_expected: bool
    contains_produced: bool
    text: str
    p_produced: float  # p(produced | x, z)


class Misleading(MisleadingRequired, total=False):
    p_expected: float  # p(expected | x, z), when the expected answer was teacher-forced


class SearchError(TypedDict):
    marginal: str  # "p_seq" or "p_tok": the decoding's own marginal
    expected: str
    p_expected: float
    p_produced: float
    beams: int


EVIDENCE: dict[str, type] = {
    "retrieval-miss": RetrievalMiss,
    "evidence-ignored": EvidenceIgnored,
    "parametric": Parametric,
    "frankenstein": Frankenstein,
    "misleading-passage": Misleading,
    "search-error": SearchError,
}
Evidence = Union[RetrievalMiss, EvidenceIgnored, Parametric, Frankenstein, Misleading, SearchError]  # noqa: UP007


def _fits(value: Any, hint: Any) -> bool:
    """Whether `value` is of the kind `hint` names (float takes an int; lists are checked item by item)."""
    origin = typing.get_origin(hint)
    if origin in (Union, types.UnionType):
        return any(_fits(value, h) for h in typing.get_args(hint))
    if hint is type(None):
        return value is None
    if origin is list:
        (item,) = typing.get_args(hint)
        return isinstance(value, list) and all(_fits(v, item) for v in value)
    if typing.is_typeddict(hint):
        return isinstance(value, dict) and not _problems(hint, value, "")
    if hint is float:
        return isinstance(value, (int, float)) and not isinstance(value, bool)
    if hint is int:
        return isinstance(value, int) and not isinstance(value, bool)
    return isinstance(value, hint)


def _problems(kind: type, evidence: dict, where: str) -> list[str]:
    hints = typing.get_type_hints(kind)
    out = [f"{where}unknown key {k!r}" for k in evidence if k not in hints]
    out += [
        f"{where}{k!r} is {type(v).__name__}, not {getattr(hints[k], '__name__', hints[k])}"
        for k, v in evidence.items()
        if k in hints and not _fits(v, hints[k])
    ]
    missing = sorted(kind.__required_keys__ - evidence.keys())
    return out + ([f"{where}missing {', '.join(missing)}"] if missing else [])


def evidence_problems(code: str, evidence: dict, kinds: dict[str, type] | None = None) -> list[str]:
    """What in `evidence` does not fit the type of verdict `code`'s evidence; [] when it fits.
    An empty dict fits every verdict: a verdict that could not be judged has no evidence. `kinds`:
    another family's types (Replay's verdicts), by default EVIDENCE."""
    return _problems((kinds or EVIDENCE)[code], evidence, f"{code}: ") if evidence else []
