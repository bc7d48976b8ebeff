"""The index swap before and after RAG training: the held-out half's 2×2 cells of the untrained
base and of the trained default, from their shipped reference runs, beside the paper's.

One row per (stack, decoding); the paper's row first. Only shipped runs that are current for their
stack (fingerprint equal) enter, so a row never shows numbers another model made.
"""

from __future__ import annotations

import pandas as pd

from rag_core.config import AnswerSettings, StackSpec
from rag_core.index_swap.results import PAPER, YEARS, ExperimentResult
from rag_core.index_swap.store import Experiment, index_checksums, shipped_result
from rag_core.models.presets import PRESETS

STACK_LABELS = {"base": "untrained base (few-shot prompt)", "default": "trained default"}
CELLS = [(idx, year) for idx in YEARS for year in YEARS]  # (index, leaders' year): diagonal = matched


def cell_name(idx: str, year: str) -> str:
    """'2016 index · 2016 leaders (matched)' and the like."""
    return f"{idx} index · {year} leaders" + (" (matched)" if idx == year else "")


def held_out_rows(results: dict[str, ExperimentResult]) -> pd.DataFrame:
    """The comparison frame from results by preset name (a pure function of the results)."""
    rows = [
        {
            "model": "the paper (RAG, NQ-trained BART)",
            "decoding": "",
            **{cell_name(i, y): PAPER[(i, y)] for i, y in CELLS},
        }
    ]
    for name, result in results.items():
        for decoding in result.decodings():
            table = result.table(decoding, "test")
            rows.append(
                {
                    "model": STACK_LABELS.get(name, name),
                    "decoding": decoding,
                    **{cell_name(i, y): float(table.loc[f"index {i}", f"leaders {y}"]) for i, y in CELLS},
                }
            )
    return pd.DataFrame(rows)


def shipped_by_stack(
    checksums: dict[str, str] | None = None, settings: AnswerSettings | None = None
) -> dict[str, ExperimentResult]:
    """The current shipped run of each shipped stack, under the experiment's `settings` (the
    defaults without them)."""
    checksums = checksums or index_checksums()
    out = {}
    for name in STACK_LABELS:
        exp = Experiment(StackSpec(**PRESETS[name]), (settings or AnswerSettings()).validate())
        result = shipped_result(exp, checksums)
        if result is not None:
            out[name] = result
    return out
