"""Retrieval metrics beside EM, and the split of answers by whether a passage held the answer.

A retrieved passage is *relevant* when its title and text contain a gold answer (`matching`), so
every metric here is judged the same way answer-recall@K is. Per question, from the 1-based ranks
of its relevant passages among the K retrieved:

- hit@1: the top passage is relevant;
- answer-recall@K: some passage is;
- MRR@K: 1 / rank of the first relevant passage (0 when none is);
- nDCG@K: Σ 1/log2(rank + 1) over the relevant ranks, divided by the same sum with those passages
  moved to the top (the ideal order of what was retrieved; 0 when none is relevant).

>>> round(ndcg([2], 5), 3), round(ndcg([1, 3], 5), 3), ndcg([], 5)
(0.631, 0.92, 0.0)

The error split puts each (question, RAG mode) in one of four cells: right with a relevant passage,
read but wrong (a relevant passage and a wrong answer), retrieval miss (no relevant passage, wrong),
and from the weights (no relevant passage, yet right).
"""

from __future__ import annotations

import math
from collections.abc import Sequence

from rag_core.analysis.evaluation.question_result import QuestionResult

RIGHT_READ, READ_WRONG, MISS, FROM_WEIGHTS = (
    "right, passage read",
    "read but wrong",
    "retrieval miss",
    "right from the weights",
)
CELLS = (RIGHT_READ, READ_WRONG, MISS, FROM_WEIGHTS)


def ndcg(ranks: Sequence[int], k: int) -> float:
    """nDCG@k of binary relevance at the 1-based `ranks`, ideal = the same number at the top."""
    rel = sorted(r for r in ranks if 1 <= r <= k)
    if not rel:
        return 0.0
    dcg = sum(1.0 / math.log2(r + 1) for r in rel)
    ideal = sum(1.0 / math.log2(i + 1) for i in range(1, len(rel) + 1))
    return dcg / ideal


def relevant_ranks(r: QuestionResult, k: int) -> list[int] | None:
    """The ranks of the retrieved passages holding an answer; None for a run saved before every rank
    was stored (then only the first one is known)."""
    if r.answer_ranks is not None:
        return [x for x in r.answer_ranks if x <= k]
    return None


def retrieval_metrics(results: Sequence[QuestionResult], k: int) -> dict[str, float | None]:
    """hit@1, answer-recall@K, MRR@K and nDCG@K as fractions over the questions (nDCG None when a
    question lacks its full rank list)."""
    n = len(results)
    if not n:
        return {"hit@1": 0.0, f"recall@{k}": 0.0, f"MRR@{k}": 0.0, f"nDCG@{k}": None}
    first = [
        r.answer_rank if (r.recall and r.answer_rank is not None and r.answer_rank <= k) else None
        for r in results
    ]
    all_ranks = [relevant_ranks(r, k) for r in results]
    return {
        "hit@1": sum(f == 1 for f in first) / n,
        f"recall@{k}": sum(r.recall for r in results) / n,
        f"MRR@{k}": sum(1.0 / f for f in first if f) / n,
        f"nDCG@{k}": None if any(a is None for a in all_ranks) else sum(ndcg(a, k) for a in all_ranks) / n,
    }


def cell(r: QuestionResult, mode: str) -> str | None:
    """The error-split cell of one question under one RAG mode (None when the mode was not run)."""
    m = r.modes.get(mode)
    if m is None:
        return None
    if r.recall:
        return RIGHT_READ if m.em else READ_WRONG
    return FROM_WEIGHTS if m.em else MISS


def error_split(results: Sequence[QuestionResult], mode: str, examples: int = 3) -> dict[str, dict]:
    """Per cell: the count and the first few questions,
    e.g. {"retrieval miss": {"n": 4, "examples": [...]}}."""
    out = {c: {"n": 0, "examples": []} for c in CELLS}
    for r in results:
        c = cell(r, mode)
        if c is None:
            continue
        out[c]["n"] += 1
        if len(out[c]["examples"]) < examples:
            out[c]["examples"].append(r.question)
    return out
