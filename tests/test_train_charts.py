"""The Train page's log p(y|x) chart: its axis rule (a negligible change draws as a flat line, a real
climb keeps its own scale) and the threshold under which the page says "no measurable change",
checked as properties over many walks rather than by repeating the formula."""

import numpy as np
import pytest

from app.train.train_charts import MIN_LOG_P_SPAN, NO_CHANGE, log_p_range, no_measurable_change, walk_lines


def test_the_axis_holds_every_value_centred_and_never_shorter_than_the_minimum():
    rng = np.random.default_rng(0)
    for spread in (0.0, 1e-4, 1e-3, 0.01, 0.3, 0.5, 2.0, 7.0):
        for _ in range(20):
            values = (-10.0 + spread * rng.random(6)).tolist()  # six steps of a walk, log p <= 0
            lo, hi = log_p_range(values)
            width = max(values) - min(values)
            assert lo < min(values) <= max(values) < hi
            assert hi - lo == pytest.approx(max(MIN_LOG_P_SPAN, 1.2 * width), abs=1e-12)
            assert (lo + hi) / 2 == pytest.approx((min(values) + max(values)) / 2, abs=1e-12)


def test_near_certainty_the_axis_stops_at_zero_and_keeps_its_span():
    """log p(y|x) is never above 0: an axis about values near it slides down instead of centring."""
    rng = np.random.default_rng(1)
    for spread in (0.0, 1e-3, 0.2):
        for _ in range(20):
            values = (-1e-4 - spread * rng.random(6)).tolist()
            lo, hi = log_p_range(values)
            width = max(values) - min(values)
            assert hi == 0.0
            assert lo < min(values)
            assert hi - lo == pytest.approx(max(MIN_LOG_P_SPAN, 1.2 * width), abs=1e-12)


def test_the_reported_walk_draws_flat_and_a_real_climb_fills_the_chart():
    flat = [-2.3410, -2.3406, -2.3403, -2.3401, -2.3400, -2.3400]  # 0.001 over five steps, as reported
    lo, hi = walk_lines(flat, [0.01] * 6, [0] * 6).layout.yaxis.range
    assert (max(flat) - min(flat)) / (hi - lo) < 0.01  # under 1 % of the chart's height: a flat line
    climb = [-1.56, -1.35, -1.14, -0.97, -0.85, -0.77]  # the README's Mona Lisa walk
    lo, hi = walk_lines(climb, [0.3] * 6, [0] * 6).layout.yaxis.range
    assert (max(climb) - min(climb)) / (hi - lo) > 0.8


def test_no_measurable_change_is_any_step_within_the_threshold_of_the_start():
    assert NO_CHANGE == 0.01  # the value the page and the README name
    assert no_measurable_change([-1.0, -1.0009, -0.9995])
    assert no_measurable_change([-1.0, -1.0 + 0.0099])
    assert not no_measurable_change([-1.0, -1.0 + 0.0101])
    assert not no_measurable_change([-1.0, -1.02, -1.0])  # away and back: it did move
