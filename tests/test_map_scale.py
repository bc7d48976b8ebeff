"""Maps of large indexes: above `max_fit` passages UMAP fits a fixed sample and every other passage
is placed by the query rule among the fitted ones; small indexes keep the full fit; the drawn
subset of a large map keeps the top-K and the high-posterior passages and stays within its cap."""

import numpy as np
import pytest
from test_projection import clustered, make_index

from app.map import map_chart
from rag_core.maps import map_layout, projection

N, MAX_FIT = 3000, 600


@pytest.fixture(scope="module")
def sampled(tmp_path_factory):
    """One real UMAP layout of 3,000 passages with the threshold lowered to 600, the fit spied on."""
    calls = []

    def spy(x, dims):
        out = map_layout.umap_coords(x, dims)
        calls.append((x.copy(), out.copy()))
        return out

    mp = pytest.MonkeyPatch()
    mp.setenv("RAG_LOUPE_CACHE", str(tmp_path_factory.mktemp("maps")))
    mp.setattr(projection, "_umap_coords", spy)
    idx = make_index(clustered(N, d=32))
    seen = []
    m = projection.fit_map(idx, "umap", 2, lambda msg, frac: seen.append(msg), max_fit=MAX_FIT)
    yield idx, m, calls, seen
    mp.undo()


@pytest.mark.slow  # over 5 s on 2 cores
def test_every_passage_gets_coordinates(sampled):
    idx, m, calls, seen = sampled
    assert m.method == "umap" and m.coords.shape == (N, 2) and np.isfinite(m.coords).all()
    assert len(calls) == 1 and len(m.fitted) == MAX_FIT == len(np.unique(m.fitted))
    assert np.array_equal(m.fitted, np.sort(m.fitted)) and m.vectors.shape == (N, 32)
    assert "UMAP fitted on 600 of 3,000 passages" in m.note and "nearest fitted neighbours" in m.note
    assert any("sample of 600 of 3,000" in s for s in seen) and any(
        "Placing the other 2,400" in s for s in seen
    )
    # the same sample on every run (fixed seed), and the layout comes back from the disk cache whole
    assert np.array_equal(m.fitted, map_layout.sample_rows(N, MAX_FIT))
    again = projection.fit_map(idx, "umap", 2, max_fit=MAX_FIT)
    assert again.loaded_from is not None and len(calls) == 1 and again.note == m.note
    assert np.array_equal(again.coords, m.coords) and np.array_equal(again.fitted, m.fitted)


@pytest.mark.slow  # its fixture fits UMAP: over 15 s on 2 cores
def test_sampled_passages_keep_the_fitted_umap_coordinates(sampled):
    idx, m, calls, _ = sampled
    x_fit, out = calls[0]
    np.testing.assert_array_equal(x_fit, np.asarray(idx.vectors, np.float32)[m.fitted])  # UMAP saw the sample
    np.testing.assert_array_equal(m.coords[m.fitted], out)  # and its coordinates are kept as they came


@pytest.mark.slow  # its fixture fits UMAP: over 15 s on 2 cores
def test_other_passages_land_where_a_query_with_their_vector_would(sampled):
    idx, m, _, _ = sampled
    x = np.asarray(idx.vectors, np.float32)
    rest = np.setdiff1d(np.arange(N), m.fitted)
    sample_map = projection.PassageMap("umap", m.coords[m.fitted], x[m.fitted])  # the fitted passages alone
    np.testing.assert_allclose(m.coords[rest], sample_map.place(x[rest]), rtol=0, atol=1e-6)
    for r in rest[:: len(rest) // 25]:  # one query at a time, as the Map page places the question
        np.testing.assert_allclose(
            m.coords[r], sample_map.place(x[r]), rtol=1e-6, atol=1e-6
        )  # float32 rounding
    # and the placed passages sit in their own cluster, as queries do
    labels = np.arange(N) % 8
    centroids = np.stack([m.coords[m.fitted][labels[m.fitted] == c].mean(0) for c in range(8)])
    d = np.linalg.norm(m.coords[rest][:, None, :] - centroids[None], axis=2)  # (N - S, 8)
    assert (d.argmin(1) == labels[rest]).mean() > 0.95


def test_small_indexes_keep_the_full_fit(cache, monkeypatch):
    calls = []

    def fake_fit(x, dims):
        calls.append(len(x))
        return x[:, :dims] * 2

    monkeypatch.setattr(projection, "_umap_coords", fake_fit)
    idx = make_index(clustered(500, d=16))
    m = projection.fit_map(idx, "umap", 2)  # the default threshold is far above today's indexes
    assert calls == [500] and m.fitted is None and "fitted on" not in m.note
    np.testing.assert_array_equal(m.coords, np.asarray(idx.vectors, np.float32)[:, :2] * 2)
    assert projection.MAX_FIT >= 20_000  # the shipped indexes (12-13k passages) are fitted whole
    m = projection.fit_map(
        idx, "umap", 2, max_fit=500
    )  # exactly at the threshold: still whole, from the cache
    assert calls == [500] and m.loaded_from is not None and m.fitted is None
    m = projection.fit_map(idx, "umap", 2, max_fit=499)
    assert calls == [500, 499] and len(m.fitted) == 499
    # another threshold is another layout: the cached one is not reused for it
    assert projection.fit_map(idx, "umap", 2, max_fit=498).loaded_from is None and calls == [500, 499, 498]


def test_drawing_keeps_the_top_k_and_high_posterior_rows_within_the_cap():
    rng = np.random.default_rng(3)
    coords = rng.normal(size=(50_000, 2)).astype(np.float32) * 10  # (N, 2)
    centre = np.array([25.0, 25.0], np.float32)  # the question, out at the edge of the cloud
    top_k = [17, 4242, 31337, 49_999, 0]
    far = np.argsort(np.linalg.norm(coords - centre, axis=1))[-3:]  # the farthest rows from the question
    high_posterior = far.tolist()  # (a passage the answer leans on need not sit near the question)
    keep = top_k + high_posterior
    for cap, c in [(5000, centre), (5000, None), (800, centre)]:
        rows = map_layout.draw_rows(coords, cap, c, keep)
        assert len(rows) == cap and set(keep) <= set(rows.tolist())
        assert np.array_equal(rows, np.unique(rows))  # sorted, no row twice
    rows = map_layout.draw_rows(coords, 5000, centre, keep)
    nearest = np.argsort(np.linalg.norm(coords - centre, axis=1))[: int(5000 * map_layout.NEAR_SHARE)]
    assert set(nearest.tolist()) <= set(rows.tolist())  # dense around the question
    assert np.array_equal(rows, map_layout.draw_rows(coords, 5000, centre, keep))  # stable across reruns
    assert np.array_equal(map_layout.draw_rows(coords[:4000], 5000, centre, keep[:1]), np.arange(4000))
    # the chart sends exactly those rows in its cloud, and rings the top-K at their true positions
    hover, topic = (
        np.array([f"p{i}" for i in range(len(coords))], dtype=object),
        np.array(["t"] * len(coords)),
    )

    class Hit:
        def __init__(self, rank):
            self.rank, self.score = rank, 0.5

    fig = map_chart.passage_map(
        coords, hover, topic, [Hit(i + 1) for i in range(5)], top_k, centre, "q?", 2, False, "u", drawn=rows
    )
    cloud = [t for t in fig.data if t.legendgroup == "topics"]
    assert sum(len(t.x) for t in cloud) == len(rows) and all(t.type == "scattergl" for t in cloud)
    rings = next(t for t in fig.data if t.name.startswith("top-"))
    np.testing.assert_array_equal(np.c_[rings.x, rings.y], coords[top_k])
