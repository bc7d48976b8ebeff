"""Laying passages out on a map: the `PassageMap` (coordinates, and the rule that places a query
among them), PCA, UMAP, and for large indexes UMAP fitted on a sample with the rest placed by the
query rule.

UMAP's cost grows faster than N (nearest-neighbour descent, then 200 epochs over the neighbour
graph): on two cores a warm fit of 12.3k passages takes 8 s, of 100k over six minutes. Above
`MAX_FIT` passages UMAP fits a fixed random sample of `MAX_FIT` rows, and every other passage is
placed exactly as a query with its vector would be: the softmax(scale · s)-weighted mean of its m
nearest fitted passages. The layout is then a picture of the sample, with each remaining passage
drawn where its neighbours are; which rows were fitted is kept (`PassageMap.fitted`).

>>> x = np.random.default_rng(0).normal(size=(50, 8)).astype(np.float32)
>>> coords, fitted = fit_layout(x, 2, lambda v, d: v[:, :d], max_fit=20)  # a stand-in "fit"
>>> coords.shape, len(fitted), bool(np.array_equal(coords[fitted], x[fitted, :2]))
((50, 2), 20, True)
"""

from __future__ import annotations

import time
import warnings
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import numpy as np

N_NEIGHBORS = 15  # UMAP's neighbourhood: local structure at the scale of a topic
MIN_DIST = 0.1  # how tightly UMAP packs neighbours together
RANDOM_STATE = 42  # fixed seed: the same index always gives the same picture (and the same sample)
PLACE_TOP_M = 10  # passages a query's position is averaged over
PLACE_SCALE = 20.0  # softmax temperature of those weights: MiniLM's own retriever scale
PLACE_BLOCK = 1 << 24  # inner products computed at once when placing many vectors (64 MB of float32)
MAX_FIT = 20_000  # UMAP fits at most this many passages (~2 min on 2 cores); the rest are placed
# Progress bar only: a fit of N rows takes about a + b·N s (numba compiles for ~45 s in a fresh
# process, then ~0.6 ms a passage; more under load), and placing takes c s per (placed × fitted) pair.
EST_SECONDS = (45.0, 0.002)  # measured: 12.3k passages 52 s cold, 8 s warm; a 20k sample 12 s warm
EST_PLACE = 1.5e-8  # measured: 80k passages placed among 20k in 24 s
DRAW_CAP = 30_000  # most passage dots a map sends to the browser; beyond it far ones are thinned
NEAR_SHARE = 0.5  # the share of that cap given to the passages nearest the question on the map

Fit = Callable[[np.ndarray, int], np.ndarray]  # (N, D) vectors, dims -> (N, dims) layout


class ProjectionError(ValueError):
    """A map cannot be made as asked (bad method or dims); the message says why."""


@dataclass
class PassageMap:
    """Map coordinates of every passage, and what is needed to place a query among them."""

    method: str  # "umap" or "pca": how `coords` were made
    coords: np.ndarray  # (N, dims) float32: row i is passage i of the index
    vectors: np.ndarray  # (N, D) float32: the index's stored passage vectors, for placement
    mean: np.ndarray | None = None  # (D,) PCA only: the centre of the vectors
    components: np.ndarray | None = None  # (dims, D) PCA only: the principal axes
    fit_seconds: float = 0.0  # how long the fit took when it was made
    loaded_from: Path | None = None  # the cache file it was read from, None if fitted now
    note: str = ""  # anything the viewer should know (e.g. "too few passages for UMAP")
    shipped: bool = False  # extended from the shipped base layout: neither fitted now nor read from the cache
    top_m: int = PLACE_TOP_M
    scale: float = PLACE_SCALE
    fitted: np.ndarray | None = None  # (S,) sorted rows UMAP fitted, the rest placed; None: every row fitted

    @property
    def dims(self) -> int:
        return int(self.coords.shape[1])

    def place(self, query_vector: np.ndarray, scale: float | None = None) -> np.ndarray:
        """Map position of query vector(s): (D,) -> (dims,), (Q, D) -> (Q, dims).

        PCA: the exact projection. UMAP: Σ_j w_j coords[j] over the top m passages by inner
        product, w = softmax(scale · s) — a passage's own vector lands on (or right by) itself.
        Many queries go in blocks of rows, so the (Q, N) scores never outgrow `PLACE_BLOCK`.
        """
        q = np.asarray(query_vector, dtype=np.float32)
        single = q.ndim == 1
        q = q.reshape(-1, self.vectors.shape[1])  # (Q, D)
        if self.method == "pca":
            out = (q - self.mean) @ self.components.T  # (Q, dims): the exact projection
        else:
            step = max(1, PLACE_BLOCK // max(1, len(self.vectors)))
            out = (
                np.concatenate(
                    [
                        self._weighted(q[i : i + step], float(scale or self.scale))
                        for i in range(0, len(q), step)
                    ]
                )
                if len(q)
                else np.zeros((0, self.dims), np.float32)
            )
        return out[0] if single else out

    def lift(self, point: np.ndarray, m: int = PLACE_TOP_M, normalise: bool = True) -> np.ndarray:
        """The query vector for a map point, the inverse of `place`: (dims,) -> (D,). The mean of
        the vectors of the m passages nearest `point` on the map, weighted by 1 / map distance,
        made unit-length when the encoder's vectors are (every q it makes is).

        >>> pm = PassageMap("pca", np.array([[0, 0], [1, 0], [9, 9]], np.float32),
        ...                 np.eye(3, dtype=np.float32))
        >>> [round(float(v), 3) for v in pm.lift(np.array([0.25, 0.0]), m=2)]   # weights 4 : 4/3
        [0.949, 0.316, 0.0]
        """
        p = np.asarray(point, dtype=np.float64).reshape(-1)[: self.dims]  # (dims,)
        dist = np.linalg.norm(self.coords.astype(np.float64) - p, axis=1)  # (N,) map distance to the point
        m = min(m, len(dist))
        near = np.argpartition(dist, m - 1)[:m]  # (m,) nearest on the map
        w = 1.0 / np.maximum(dist[near], 1e-6)  # (m,) a passage right under the point dominates
        q = (w / w.sum()) @ self.vectors[near].astype(np.float64)  # (D,)
        if normalise:
            q = q / max(float(np.linalg.norm(q)), 1e-12)  # (D,)
        return q.astype(np.float32)

    def _weighted(self, q: np.ndarray, scale: float) -> np.ndarray:
        s = q @ self.vectors.T  # (Q, N) inner products, as the retriever scores
        m = min(self.top_m, s.shape[1])
        top = np.argpartition(-s, m - 1, axis=1)[:, :m]  # (Q, m) unordered top m
        ts = np.take_along_axis(s, top, axis=1) * scale  # (Q, m)
        w = np.exp(ts - ts.max(axis=1, keepdims=True))
        w /= w.sum(axis=1, keepdims=True)  # (Q, m) softmax weights
        return np.einsum("qm,qmd->qd", w, self.coords[top])  # (Q, dims)


def fit_pca(vectors: np.ndarray, dims: int = 2) -> PassageMap:
    """PCA: the top eigenvectors of the (D, D) scatter matrix of the centred vectors, in float64.

    Same axes as an SVD of the (N, D) matrix, ~10x faster for N >> D (0.3 s vs 6 s for 12k x 384
    on two cores). Signs are fixed (largest entry positive) so that refits agree.
    """
    x = np.asarray(vectors, dtype=np.float32)  # (N, D)
    if dims > x.shape[1]:
        raise ProjectionError(f"cannot project {x.shape[1]}-dimensional vectors onto {dims} axes")
    t0 = time.perf_counter()
    mean = x.mean(axis=0, dtype=np.float64)  # (D,)
    xc = x - mean  # (N, D) float64
    _, vecs = np.linalg.eigh(xc.T @ xc)  # (D, D), eigenvalues ascending
    comps = vecs[:, ::-1][:, :dims].T  # (dims, D): largest variance first
    big = np.argmax(np.abs(comps), axis=1)
    comps = comps * np.where(comps[np.arange(dims), big] < 0, -1.0, 1.0)[:, None]
    coords = (xc @ comps.T).astype(np.float32)  # (N, dims)
    return PassageMap(
        "pca", coords, x, mean.astype(np.float32), comps.astype(np.float32), time.perf_counter() - t0
    )


def umap_coords(x: np.ndarray, dims: int) -> np.ndarray:
    """UMAP (cosine, the parameters above, fixed seed) of every row of x: (N, D) -> (N, dims)."""
    import umap  # imported here: it takes seconds, and only a fit needs it

    reducer = umap.UMAP(
        n_neighbors=N_NEIGHBORS,
        min_dist=MIN_DIST,
        metric="cosine",
        n_components=dims,
        random_state=RANDOM_STATE,
    )
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # "n_jobs overridden by random_state" and numba chatter
        return np.asarray(reducer.fit_transform(x), dtype=np.float32)  # (N, dims)


def sample_rows(n: int, size: int) -> np.ndarray:
    """The rows a sampled fit uses: `size` of `n`, sorted, the same for every run (fixed seed)."""
    return np.sort(np.random.default_rng(RANDOM_STATE).choice(n, size, replace=False))


def fit_layout(
    x: np.ndarray, dims: int, fit: Fit, max_fit: int = MAX_FIT, stage: Callable[[str], None] | None = None
) -> tuple[np.ndarray, np.ndarray | None]:
    """Layout of every row of x (N, D) by `fit`: the whole set when N ≤ max_fit, else a sample.

    Returns (coords (N, dims) float32, fitted rows or None). Sampled: rows `sample_rows(N, max_fit)`
    get `fit`'s coordinates unchanged; each other row is placed by `PassageMap.place` among them.
    `stage` hears which step is running (for a progress message).
    """
    stage = stage or (lambda msg: None)
    n = len(x)
    if n <= max_fit:
        stage(f"Fitting UMAP (cosine) on {n:,} passages")
        return np.asarray(fit(x, dims), dtype=np.float32), None
    rows = sample_rows(n, max_fit)
    stage(f"Fitting UMAP (cosine) on a sample of {max_fit:,} of {n:,} passages")
    fitted = np.asarray(fit(x[rows], dims), dtype=np.float32)  # (S, dims)
    rest = np.ones(n, dtype=bool)
    rest[rows] = False
    stage(f"Placing the other {n - max_fit:,} passages by their nearest fitted neighbours")
    coords = np.empty((n, dims), dtype=np.float32)  # (N, dims)
    coords[rows] = fitted
    coords[rest] = PassageMap("umap", fitted, x[rows]).place(x[rest])  # (N - S, dims): placed like queries
    return coords, rows


def sample_note(fitted: np.ndarray | None, n: int) -> str:
    """What the viewer should know about a sampled layout ("" for a full fit)."""
    if fitted is None:
        return ""
    return (
        f"UMAP fitted on {len(fitted):,} of {n:,} passages (a fixed random sample); the other "
        f"{n - len(fitted):,} are placed by their nearest fitted neighbours, the way the question is placed"
    )


def estimate_umap_seconds(n: int, max_fit: int = MAX_FIT) -> float:
    """Seconds a UMAP layout of n passages should take: the fit, then placing the rest."""
    s = min(n, max_fit)
    return EST_SECONDS[0] + EST_SECONDS[1] * s + EST_PLACE * (n - s) * s


def draw_rows(
    coords: np.ndarray, cap: int | None = None, centre: np.ndarray | None = None, keep=()
) -> np.ndarray:
    """The rows of coords (N, dims) a chart draws, sorted: every row when N ≤ cap (default
    `DRAW_CAP`, read at the call). Beyond it, `keep`
    (the top-K, high-posterior passages) always, the rows nearest `centre` (the question) for
    `NEAR_SHARE` of the cap, and a fixed random share of the far ones for the rest: dense where
    the reader looks, thinned elsewhere, never more than max(cap, len(keep)) rows.

    >>> rows = draw_rows(np.arange(10.0)[:, None], cap=4, centre=np.array([9.0]), keep=[0])
    >>> len(rows), {0, 8, 9} <= set(rows.tolist())  # the kept row, the two nearest, one far one
    (4, True)
    """
    n, cap = len(coords), DRAW_CAP if cap is None else cap
    if n <= cap:
        return np.arange(n)
    chosen = np.zeros(n, dtype=bool)  # (N,)
    chosen[np.asarray(keep, dtype=np.int64)] = True
    near = min(int(cap * NEAR_SHARE), cap - int(chosen.sum()))
    if centre is not None and near > 0:
        d = np.linalg.norm(coords - np.asarray(centre)[None, :], axis=1)  # (N,) map distance to the question
        d[chosen] = np.inf
        chosen[np.argpartition(d, near - 1)[:near]] = True
    room = cap - int(chosen.sum())
    if room > 0:
        far = np.flatnonzero(~chosen)
        chosen[np.random.default_rng(RANDOM_STATE).choice(far, room, replace=False)] = True
    return np.flatnonzero(chosen)
