"""The retrieval-miss search: how deep the first passage holding the expected answer lies."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from rag_core.analysis.matching import contains_answer, passage_text
from rag_core.config import DEEP_DEPTH
from rag_core.trace import Trace


@dataclass
class DeepHit:
    """The best passage in a deeper search that contains the expected answer (rank None: none).
    `depth` is how many passages were searched: fewer than asked for when the index holds fewer,
    and then `whole_index` is set (an 8-passage index is searched 8 deep, not 100)."""

    depth: int
    k: int
    top_score: float  # s(z) of the top passage
    kth_score: float  # s(z) of the K-th (last retrieved) passage
    rank: int | None = None
    score: float | None = None
    title: str = ""
    text: str = ""
    whole_index: bool = False

    @property
    def gap_top(self) -> float | None:
        return None if self.score is None else self.top_score - self.score

    @property
    def gap_kth(self) -> float | None:
        return None if self.score is None else self.kth_score - self.score


def deep_search(retriever, trace: Trace, expected: Sequence[str], depth: int = DEEP_DEPTH) -> DeepHit:
    """Search `depth` deep (anything with `.retrieve(question, k)`: a Pipeline, a Retriever)."""
    hits = retriever.retrieve(trace.question, max(depth, trace.k))
    top = hits[0].score if hits else float("nan")
    kth = trace.hits[-1].score if trace.hits else float("nan")
    out = DeepHit(len(hits), trace.k, top, kth, whole_index=len(hits) < max(depth, trace.k))
    for h in hits:
        if contains_answer(passage_text(h.passage), expected):
            out.rank, out.score, out.title, out.text = h.rank, h.score, h.passage.title, h.passage.text
            break
    return out
