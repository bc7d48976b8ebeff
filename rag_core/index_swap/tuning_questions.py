"""The index swap's tuning half as training questions: each tuning position's question, answered
by that year's holder, asked on that year's index. The held-out half never appears.

Training on both years of one position teaches the generator what the experiment measures: the
same question has the answer the passages give, so it must read them (and take the holder a
passage names as current, not the successor it mentions or the name it read last).

>>> rows = tuning_questions()
>>> sorted({r["index"] for r in rows}), len(rows) == 2 * len({r["question"] for r in rows})
(['2016', '2018'], True)
"""

from __future__ import annotations

import json
from pathlib import Path

from rag_core.config import ASSETS
from rag_core.index_swap.results import YEARS, position_split
from rag_core.index_swap.store import leaders_frame

TUNING_FILE = ASSETS / "train" / "leaders_tune.jsonl"  # what `write_tuning_questions` writes


def tuning_questions() -> list[dict]:
    """One row per (tuning position, year), in leaders.csv order."""
    rows = []
    for leader in leaders_frame().to_dict("records"):
        if position_split(leader["position"]) != "tune":
            continue
        for year in YEARS:
            rows.append(
                {
                    "question": leader["question"],
                    "answers": [leader[f"holder_{year}"]],
                    "title": leader["position"],
                    "index": year,
                }
            )
    return rows


def write_tuning_questions(path: Path = TUNING_FILE) -> None:
    Path(path).write_text(
        "".join(json.dumps(r, ensure_ascii=False) + "\n" for r in tuning_questions()), encoding="utf-8"
    )
