"""Exact match over K and the retriever scale from stored traces, with no model call.

`eval --traces DIR` stores each question's trace. Keeping the top k' <= K passages or changing the
scale only changes the prior p(z|x); the per-passage conditionals are already in the trace, so the
RAG-Sequence answer under the new prior is exact (a passage's beams do not depend on the prior or
on the other passages), and the greedy RAG-Token answer is exact wherever every token of the
stored path still wins its step (otherwise it needs a model call: counted as a miss, so its EM is a
lower bound, and flagged).

>>> sweep_grid([1, 5], [10.0])
[(1, 10.0), (5, 10.0)]
"""

from __future__ import annotations

import gzip
import json
from collections.abc import Iterator
from pathlib import Path

import pandas as pd

from rag_core.analysis.diagnosis.counterfactual import counterfactual
from rag_core.analysis.matching import exact_match
from rag_core.config import RAG_SEQUENCE, RAG_TOKEN
from rag_core.trace import trace_from_dict


def sweep_grid(ks, scales) -> list[tuple[int, float]]:
    return [(int(k), float(s)) for s in scales for k in ks]


def load_traces(folder: str | Path) -> list[tuple[list[str], object]]:
    """(gold answers, trace) per question, in question order, from `eval --traces` (JSON)."""
    out = [(list(item["question"]["answers"]), trace) for _, item, trace in stored_traces(folder)]
    if not out:
        raise FileNotFoundError(f"no stored traces in {folder} (run eval with --traces {folder})")
    return out


def stored_traces(folder: str | Path, names: set[str] | None = None) -> Iterator[tuple[Path, dict, object]]:
    """(file, stored item, trace) per question file of an `eval --traces` folder, in question order
    (only the files named in `names`, when given)."""
    for path in sorted(Path(folder).glob("*.json.gz")):
        if names is not None and path.name not in names:
            continue
        try:
            item = json.loads(gzip.decompress(path.read_bytes()))
            trace = trace_from_dict(item["trace"])
        except (OSError, ValueError, KeyError, TypeError) as e:
            raise ValueError(f"{path.name} is not a stored trace ({e})") from None
        yield path, item, trace


def sweep(items, ks, scales) -> pd.DataFrame:
    """One row per (k, scale): EM of RAG-Token and RAG-Sequence, and how many RAG-Token answers
    could not be settled without a model call (each counted as a miss)."""
    rows = []
    for k, scale in sweep_grid(ks, scales):
        em = {RAG_TOKEN: 0, RAG_SEQUENCE: 0}
        unsettled = 0
        n = 0
        for answers, trace in items:
            if k > trace.k:
                continue
            n += 1
            cf = counterfactual(trace, k=k, scale=scale)
            for mode, a in cf.answers.items():
                em[mode] += a.answer is not None and exact_match(a.answer, answers)
                unsettled += mode == RAG_TOKEN and not a.exact
        rows.append(
            {
                "k": k,
                "scale": scale,
                "questions": n,
                "rag-token EM": em[RAG_TOKEN] / max(n, 1),
                "rag-sequence EM": em[RAG_SEQUENCE] / max(n, 1),
                "rag-token not exact": unsettled,
            }
        )
    return pd.DataFrame(rows)
