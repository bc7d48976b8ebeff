"""Is p a probability one can bet on? A reliability diagram of an eval run: each reading's answers
binned by their own p, the share right in each bin against the bin's mean p, and the expected
calibration error (ECE), the gap between the two averaged over answers.

With B equal-width bins over [0, 1] (an answer at p = 1 falls in the last), bin b holding n_b of the
N answers, its mean p conf_b and its share right acc_b:

    ECE = Σ_b (n_b / N) · |acc_b − conf_b|

>>> r = reliability([0.95, 0.9, 0.2, 0.3], [True, True, False, True], bins=2)
>>> [(b.n, round(b.confidence, 3), b.accuracy) for b in r.bins]
[(2, 0.25, 0.5), (2, 0.925, 1.0)]
>>> round(r.ece, 4)
0.1625
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from rag_core.config import STUFFED

BINS = 10
# Each reading's answer probability, as its answer card prints it (closed-book prints none).
P_FIELD = {"rag-token": "p_tok", "rag-sequence": "p_seq", STUFFED: "p_stuffed"}


@dataclass(frozen=True)
class Bin:
    lo: float
    hi: float
    n: int  # answers whose p falls in [lo, hi) (the last bin also holds p = 1)
    confidence: float  # their mean p (nan when empty)
    accuracy: float  # the share of them right (nan when empty)


@dataclass(frozen=True)
class Reliability:
    bins: tuple[Bin, ...]  # the non-empty bins, lowest p first
    ece: float
    n: int  # answers with a p


def reliability(p: Sequence[float], right: Sequence[bool], bins: int = BINS) -> Reliability:
    """The reliability diagram and ECE of answers with probability p and correctness `right`."""
    p_arr = np.asarray(p, dtype=np.float64)  # (N,)
    ok = np.asarray(right, dtype=np.float64)  # (N,)
    which = np.minimum((p_arr * bins).astype(int), bins - 1)  # (N,) bin of each answer; p = 1 in the last
    out, ece = [], 0.0
    for b in range(bins):
        in_bin = which == b  # (N,)
        n = int(in_bin.sum())
        if n:
            conf, acc = float(p_arr[in_bin].mean()), float(ok[in_bin].mean())
            out.append(Bin(b / bins, (b + 1) / bins, n, conf, acc))
            ece += n / len(p_arr) * abs(acc - conf)
    return Reliability(tuple(out), ece if len(p_arr) else float("nan"), len(p_arr))


def run_reliability(results, bins: int = BINS) -> dict[str, Reliability]:
    """The reliability of each reading of an eval run's results (`QuestionResult`s) that has a p."""
    out = {}
    for mode, field in P_FIELD.items():
        pairs = [
            (getattr(r.modes[mode], field), r.modes[mode].em)
            for r in results
            if mode in r.modes and getattr(r.modes[mode], field) is not None
        ]
        if pairs:
            out[mode] = reliability([p for p, _ in pairs], [em for _, em in pairs], bins)
    return out
