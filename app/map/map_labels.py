"""Where the Map's rank numbers go: the plot's geometry in screen pixels, the axis ranges shown, and
a spot beside each ring that the fewest other marks cover. Geometry only: no figure is built here."""

from __future__ import annotations

import numpy as np

# The map's marks in screen pixels: rank numbers at font size 14, rings of size 16, the star of 18.
RING_R, STAR_R, DIGIT_W, LABEL_H = 8.0, 9.0, 9.0, 16.0
PLOT_PX = (600.0, 600.0)  # about the plot area's size at 1280 px (the page stretches it; close enough)
SPOTS = [
    (v, h)
    for v in ("top", "middle", "bottom")
    for h in ("left", "center", "right")
    if (v, h) != ("middle", "center")
]


def _boxes_overlap(a, b) -> bool:
    """Boxes as (x0, y0, x1, y1) share some area."""
    return a[0] < b[2] and b[0] < a[2] and a[1] < b[3] and b[1] < a[3]


def shown_ranges(coords: np.ndarray, ends: np.ndarray, qpos: np.ndarray, zoom: bool):
    """The x and y ranges the 2-D map shows: with `zoom`, the query point(s) `qpos` ((2,), or (M, 2):
    the question and the query moved by hand) and the ringed top-K (`ends`, (K, 2)) with a margin;
    else the whole cloud (`coords`) as plotly's autorange frames it (5% more)."""
    if zoom:
        box = np.vstack([ends[:, :2], np.atleast_2d(qpos)[:, :2]])  # (K + M, 2)
        lo, hi = box.min(0), box.max(0)
        pad = np.maximum(0.15 * (hi - lo), 0.01 * (coords.max(0) - coords.min(0)))
    else:
        lo, hi = coords.min(0), coords.max(0)
        pad = 0.05 * (hi - lo)
    return (float(lo[0] - pad[0]), float(hi[0] + pad[0])), (float(lo[1] - pad[1]), float(hi[1] + pad[1]))


def label_spots(points: np.ndarray, centre: np.ndarray, texts: list[str], x_range, y_range) -> list[str]:
    """Plotly text positions for the rank numbers of the rings at `points` (K, 2), so that none sits
    under the question's star at `centre` or on another number or ring. Greedy, in rank order, in
    screen pixels (the axis ranges shown mapped onto `PLOT_PX`): of the eight spots around a ring,
    the one that hits the fewest marks, and among those the farthest from the star.

    >>> label_spots(np.array([[1.0, 1.0], [-1.0, -2.0]]), np.zeros(2), ["1", "2"], (-3, 3), (-3, 3))
    ['top right', 'bottom left']
    >>> label_spots(np.array([[1.0, 1.0], [1.0, 1.0]]), np.zeros(2), ["1", "2"], (-3, 3), (-3, 3))
    ['top right', 'top center']
    """
    sx = PLOT_PX[0] / max(float(x_range[1] - x_range[0]), 1e-9)  # px per unit
    sy = PLOT_PX[1] / max(float(y_range[1] - y_range[0]), 1e-9)
    px = np.column_stack([points[:, 0] * sx, -points[:, 1] * sy])  # (K, 2) screen: y grows downwards
    star = np.array([centre[0] * sx, -centre[1] * sy])  # (2,)
    taken = [(star[0] - STAR_R, star[1] - STAR_R, star[0] + STAR_R, star[1] + STAR_R)]
    taken += [(x - RING_R, y - RING_R, x + RING_R, y + RING_R) for x, y in px]
    spots = []
    for (x, y), text in zip(px, texts):
        w = DIGIT_W * len(text)
        own = (x - RING_R, y - RING_R, x + RING_R, y + RING_R)  # a number may touch its own ring
        best = None
        for v, h in SPOTS:
            cx = x + {"left": -(RING_R + w / 2), "center": 0.0, "right": RING_R + w / 2}[h]
            cy = y + {"top": -(RING_R + LABEL_H / 2), "middle": 0.0, "bottom": RING_R + LABEL_H / 2}[v]
            box = (cx - w / 2, cy - LABEL_H / 2, cx + w / 2, cy + LABEL_H / 2)
            hits = sum(_boxes_overlap(box, t) for t in taken if t != own)
            key = (hits, -float(np.hypot(cx - star[0], cy - star[1])))
            if best is None or key < best[0]:
                best = (key, f"{v} {h}", box)
        spots.append(best[1])
        taken.append(best[2])
    return spots
