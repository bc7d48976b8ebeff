"""The hot-swap experiment's result: every answer, the 2×2 tables, the goal and computed findings.

Tables have rows = the index, columns = the leaders' year; the diagonal is matched accuracy (the
paper: 70% on 2016/2016, 68% on 2018/2018), the off-diagonal mismatched accuracy (12% for the
2018 index asked for 2016 leaders, 4% for the 2016 index asked for 2018 leaders). Positions fall
into a fixed tuning half and a held-out half (`position_split`).
"""

from __future__ import annotations

import hashlib
import math
import time
from dataclasses import asdict, dataclass, field

import pandas as pd

from rag_core.config import DECODINGS, STUFFED
from rag_core.corpus import reserved
from rag_core.trace import spreadsheet_safe

YEARS = ("2016", "2018")

# The paper's Table (§4.5): accuracy by (index year, leaders year), RAG on Natural Questions models.
PAPER = {("2016", "2016"): 0.70, ("2018", "2018"): 0.68, ("2018", "2016"): 0.12, ("2016", "2018"): 0.04}
# The goal this project set itself: beat the paper on both diagonals and both off-diagonals.
GOAL_MATCHED = 0.80
GOAL_MISMATCHED = 0.10

ROW_COLUMNS = [
    "position",
    "country",
    "holder_2016",
    "holder_2018",
    "question",
    "index",
    "decoding",
    "answer",
    "correct_2016",
    "correct_2018",
    "p_answer",
    "closed_book",
    "passages_name_2016",
    "passages_name_2018",
    "top_passage",
    "ambiguous",
    "split",
]
SPLITS = ("tune", "test")  # prompt and settings are chosen on "tune"; results are reported on "test"


def position_split(position: str) -> str:
    """The fixed half a position belongs to, from a stable hash of its name; a position whose title
    is in the reserved partition (`corpus.reserved`) is always held out, so no training row names it.

    >>> position_split("President of the United States") in SPLITS, position_split("Canberra")
    (True, 'test')
    """
    if reserved(position):
        return "test"
    return SPLITS[int(hashlib.sha256(f"split:{position}".encode()).hexdigest(), 16) % 2]


@dataclass
class ExperimentResult:
    """All answers of one run: `rows` one per (position, index, decoding); `closed` one per position."""

    rows: list[dict]
    closed: list[dict]
    settings: dict
    key: str
    elapsed_s: float = 0.0  # compute time summed over the positions (cached ones included)
    complete: bool = False  # every position of leaders.csv is in
    created: str = field(default_factory=lambda: time.strftime("%Y-%m-%dT%H:%M:%S"))
    shipped: bool = False  # the reference run shipped in assets/, not computed on this machine

    @property
    def positions(self) -> int:
        return len(self.closed)

    def frame(self) -> pd.DataFrame:
        frame = pd.DataFrame(self.rows, columns=ROW_COLUMNS)
        frame["split"] = [
            position_split(p) for p in frame["position"]
        ]  # fixed by the name, never stored wrong
        frame["ambiguous"] = frame["ambiguous"].fillna(False).astype(bool)
        return frame

    def decodings(self) -> list[str]:
        return [d for d in (*DECODINGS, STUFFED) if any(r["decoding"] == d for r in self.rows)]

    def table(self, decoding: str, split: str | None = None, column: str = "correct") -> pd.DataFrame:
        """Accuracy 2×2: rows 'index 2016'/'index 2018', columns 'leaders 2016'/'leaders 2018'.

        `split`: "tune" or "test" for one half of the positions, None for all. `column="ambiguous"`
        gives the share of answers naming both holders instead (the same in both columns)."""
        frame = self.frame()
        frame = frame[frame["decoding"] == decoding]
        if split is not None:
            frame = frame[frame["split"] == split]
        out = pd.DataFrame(
            index=[f"index {y}" for y in YEARS], columns=[f"leaders {y}" for y in YEARS], dtype=float
        )
        for idx in YEARS:
            part = frame[frame["index"] == idx]
            for year in YEARS:
                col = "ambiguous" if column == "ambiguous" else f"correct_{year}"
                out.loc[f"index {idx}", f"leaders {year}"] = (
                    float(part[col].astype(bool).mean()) if len(part) else math.nan
                )
        return out

    def closed_book_accuracy(self) -> dict[str, float]:
        frame = pd.DataFrame(self.closed)
        if frame.empty:
            return {y: math.nan for y in YEARS}
        return {y: float(frame[f"correct_{y}"].mean()) for y in YEARS}

    def goal_met(self, decoding: str, split: str | None = "test") -> bool:
        """The goal, judged on the held-out half by default."""
        t = self.table(decoding, split)
        matched = [t.loc[f"index {y}", f"leaders {y}"] for y in YEARS]
        mismatched = [t.loc["index 2016", "leaders 2018"], t.loc["index 2018", "leaders 2016"]]
        return all(m >= GOAL_MATCHED for m in matched) and all(m <= GOAL_MISMATCHED for m in mismatched)

    def summary(self) -> pd.DataFrame:
        """One row per (decoding, index, leaders year): measured accuracy beside the paper's."""
        rows = []
        for d in self.decodings():
            t = self.table(d)
            for idx in YEARS:
                for year in YEARS:
                    rows.append(
                        {
                            "decoding": d,
                            "index": idx,
                            "leaders": year,
                            "accuracy": t.loc[f"index {idx}", f"leaders {year}"],
                            "paper": PAPER[(idx, year)],
                        }
                    )
        return pd.DataFrame(rows)

    def override(self, decoding: str) -> dict[str, int]:
        """Where the generator's memory beats the passages: counts over the positions.

        - `other_year`: the answer names the other year's holder and not this index's;
        - `other_year_in_passages`: ... and a retrieved passage names that holder (copied from the
          passages, e.g. "X succeeded Y", rather than recalled from the generator's own memory);
        - `other_year_closed_book`: ... and the closed-book answer names that same holder;
        - `passages_lack_holder`: the K passages never name this index's holder (a retrieval miss);
        - `ambiguous`: the answer names both holders (right in neither cell);
        - `neither`: the answer names neither holder.
        """
        closed = {c["position"]: c for c in self.closed}
        out = {
            "other_year": 0,
            "other_year_in_passages": 0,
            "other_year_closed_book": 0,
            "passages_lack_holder": 0,
            "neither": 0,
            "ambiguous": 0,
            "total": 0,
        }
        for r in self.rows:
            if r["decoding"] != decoding:
                continue
            mine, other = r["index"], YEARS[1 - YEARS.index(r["index"])]
            out["total"] += 1
            out["passages_lack_holder"] += int(r[f"passages_name_{mine}"] == 0)
            if r[f"correct_{other}"] and not r[f"correct_{mine}"]:
                out["other_year"] += 1
                out["other_year_in_passages"] += int(r[f"passages_name_{other}"] > 0)
                out["other_year_closed_book"] += int(
                    bool(closed.get(r["position"], {}).get(f"correct_{other}"))
                )
            if r.get("ambiguous"):
                out["ambiguous"] += 1
            elif not r["correct_2016"] and not r["correct_2018"]:
                out["neither"] += 1
        return out

    def finding(self, decoding: str) -> str:
        """One sentence on where the wrong answers come from, from `override`'s counts.

        Memory overriding the index would show as wrong answers that the closed-book model also
        gives; answers copied from the passages show as the other holder named in a retrieved one.
        """
        o = self.override(decoding)
        cb = self.closed_book_accuracy()
        if not o["other_year"]:
            return "No answer names the other year's holder: the answers follow the index."
        copied, memory = o["other_year_in_passages"], o["other_year_closed_book"]
        text = (
            f"{o['other_year']} of {o['total']} answers name the other year's holder; "
            f"{copied} of those copy a name that a retrieved passage contains, and {memory} match the "
            f"closed-book answer (which names the 2016 holder {100 * cb['2016']:.0f}% and the 2018 holder "
            f"{100 * cb['2018']:.0f}% of the time). "
        )
        if copied >= max(1, 2 * memory):
            text += (
                "Most of them copy the other holder from the retrieved passages rather than "
                "from the model's memory."
            )
        elif memory >= max(1, 2 * copied):
            text += (
                "Most of them agree with the closed-book answer: the model's memory overrides the passages."
            )
        else:
            text += "Neither copying from the passages nor the model's memory accounts for most of them."
        if o["ambiguous"]:
            text += f" {o['ambiguous']} answers name both holders and count as right in neither cell."
        return text

    def failures(self, decoding: str | None = None) -> pd.DataFrame:
        """Rows whose answer misses this index's holder."""
        frame = self.frame()
        if decoding:
            frame = frame[frame["decoding"] == decoding]
        ok = [bool(r[f"correct_{r['index']}"]) for _, r in frame.iterrows()]
        return frame[[not o for o in ok]] if len(frame) else frame

    def to_csv(self, path) -> None:
        spreadsheet_safe(self.frame()).to_csv(path, index=False)

    def to_json(self) -> dict:
        return asdict(self)

    @classmethod
    def from_json(cls, data: dict) -> ExperimentResult:
        return cls(**data)
