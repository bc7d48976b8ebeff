"""The reliability diagram and ECE of the Eval page (rag_core/analysis/evaluation/calibration.py) against a
plain loop over the answers, and read from a run's own rows."""

import random

import pytest

from rag_core.analysis.evaluation import calibration
from rag_core.analysis.evaluation.question_result import ModeResult, QuestionResult


def by_loop(p, right, bins):
    """Bins and ECE with lists and a loop: bin b holds lo <= p < hi, p = 1 in the last."""
    groups = [[] for _ in range(bins)]
    for q, ok in zip(p, right):
        groups[min(int(q * bins), bins - 1)].append((q, ok))
    rows, ece = [], 0.0
    for b, g in enumerate(groups):
        if g:
            conf = sum(q for q, _ in g) / len(g)
            acc = sum(ok for _, ok in g) / len(g)
            rows.append((b / bins, len(g), conf, acc))
            ece += len(g) / len(p) * abs(acc - conf)
    return rows, ece


@pytest.mark.parametrize("seed", range(5))
@pytest.mark.parametrize("bins", [5, 10])
def test_bins_and_ece_equal_a_plain_loop(seed, bins):
    rng = random.Random(seed)
    p = [rng.random() for _ in range(200)] + [1.0, 0.0, 0.5]
    right = [rng.random() < q for q in p]
    got = calibration.reliability(p, right, bins)
    rows, ece = by_loop(p, right, bins)
    assert [(b.lo, b.n) for b in got.bins] == [(lo, n) for lo, n, _, _ in rows]
    assert [b.confidence for b in got.bins] == pytest.approx([c for _, _, c, _ in rows], abs=1e-12)
    assert [b.accuracy for b in got.bins] == pytest.approx([a for _, _, _, a in rows], abs=1e-12)
    assert got.ece == pytest.approx(ece, abs=1e-12) and got.n == len(p)


def test_a_run_gives_each_reading_its_own_p():
    def result(p_tok, p_seq, p_stuffed, em):
        modes = {
            "rag-token": ModeResult("a", em, em, p_seq=p_seq, p_tok=p_tok),
            "rag-sequence": ModeResult("a", em, em, p_seq=p_seq, p_tok=p_tok),
            "stuffed": ModeResult("a", em, em, p_stuffed=p_stuffed),
            "closed-book": ModeResult("a", em, em),
        }
        return QuestionResult("q", ["a"], "", modes, True, 1)

    results = [result(0.95, 0.15, 0.55, True), result(0.91, 0.35, 0.45, False)]
    got = calibration.run_reliability(results)
    assert set(got) == {"rag-token", "rag-sequence", "stuffed"}  # closed-book has no p
    assert [b.n for b in got["rag-token"].bins] == [2]
    assert got["rag-token"].ece == pytest.approx(abs(0.5 - 0.93))
    assert [round(b.confidence, 2) for b in got["rag-sequence"].bins] == [0.15, 0.35]
    assert got["stuffed"].ece == pytest.approx(0.5 * 0.45 + 0.5 * 0.45)


def test_the_bin_edges_by_hand():
    """Ten bins: 0.1 opens the second bin, 0.0999 stays in the first, 1.0 falls in the last; ECE
    weighs each bin's gap by its share of the answers (worked out by hand)."""
    got = calibration.reliability([0.0999, 0.1, 1.0, 0.95], [False, True, True, False], bins=10)
    assert [(b.lo, b.n) for b in got.bins] == [(0.0, 1), (0.1, 1), (0.9, 2)]
    assert got.bins[2].confidence == pytest.approx(0.975) and got.bins[2].accuracy == 0.5
    # |0 - 0.0999| / 4 + |1 - 0.1| / 4 + 2 · |0.5 - 0.975| / 4
    assert got.ece == pytest.approx((0.0999 + 0.9 + 2 * 0.475) / 4, abs=1e-12)
