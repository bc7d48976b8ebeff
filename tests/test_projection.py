"""The passage map: PCA placement is exact, weighted placement lands by its neighbours, the disk
cache round-trips (keyed by the index), and placing a query needs no UMAP transform."""

import time

import numpy as np
import pytest

from rag_core.corpus import Passage
from rag_core.maps import projection
from rag_core.retrieval.index import PassageIndex


def clustered(
    n: int = 2000, d: int = 32, clusters: int = 8, seed: int = 0, spread: float = 0.15
) -> np.ndarray:
    """Unit vectors in `clusters` tight groups around random centres: structure, like real embeddings."""
    rng = np.random.default_rng(seed)
    centres = rng.normal(size=(clusters, d))
    labels = np.arange(n) % clusters
    x = centres[labels] + spread * rng.normal(size=(n, d))
    return (x / np.linalg.norm(x, axis=1, keepdims=True)).astype(np.float32)


def make_index(x: np.ndarray, tag: str = "p") -> PassageIndex:
    ps = [Passage(f"{tag}{i}", f"T{i % 8}", f"text {i}", f"topic {i % 8}") for i in range(len(x))]
    return PassageIndex.build(x, ps, encoder_id="toy")


@pytest.fixture(scope="module")
def umap_pair(tmp_path_factory):
    """One UMAP fit (2-D) of a clustered index, and a second fit_map call that hits the cache."""
    mp = pytest.MonkeyPatch()
    mp.setenv("RAG_LOUPE_CACHE", str(tmp_path_factory.mktemp("maps")))
    idx = make_index(clustered(2000))
    t0 = time.perf_counter()
    first = projection.fit_map(idx, "umap", 2)
    t_first = time.perf_counter() - t0
    t0 = time.perf_counter()
    second = projection.fit_map(idx, "umap", 2)
    t_second = time.perf_counter() - t0
    yield idx, first, second, t_first, t_second
    mp.undo()


def test_pca_placement_is_the_exact_projection(cache):
    idx = make_index(clustered(1500, d=24))
    x = np.asarray(idx.vectors, np.float32)  # the stored (float16) vectors are what the map is of
    for dims in (2, 3):
        m = projection.fit_map(idx, "pca", dims)
        assert m.method == "pca" and m.coords.shape == (1500, dims)
        # passages placed as queries land exactly on their own coordinates
        np.testing.assert_allclose(m.place(x[:50]), m.coords[:50], atol=1e-5)
        # and any query is (q - mean) · components, the projection itself
        q = clustered(5, d=24, seed=7)
        np.testing.assert_allclose(m.place(q), (q - x.mean(0)) @ m.components.T, atol=1e-5)
        assert m.place(q[0]).shape == (dims,)
        # the axes are orthonormal, and the first carries the most variance
        np.testing.assert_allclose(m.components @ m.components.T, np.eye(dims), atol=1e-5)
        var = m.coords.var(axis=0)
        assert var[0] >= var[1]


def test_weighted_placement_is_the_softmax_mean_of_the_top_m():
    x = clustered(600, d=16, spread=0.3)
    coords = np.random.default_rng(1).normal(size=(600, 2)).astype(np.float32) * 10
    m = projection.PassageMap("umap", coords, x)
    q = x[3]
    s = x @ q  # inner products, as the retriever scores
    top = np.argsort(-s)[:10]
    w = np.exp(20 * (s[top] - s[top].max()))
    w /= w.sum()
    np.testing.assert_allclose(m.place(q), w @ coords[top], rtol=1e-5, atol=1e-4)
    np.testing.assert_allclose(m.place(x[:4]), np.stack([m.place(v) for v in x[:4]]), rtol=1e-5, atol=1e-4)
    # a sharp scale pins a passage's own vector to its own point
    np.testing.assert_allclose(m.place(q, scale=1000.0), coords[3], atol=1e-3)


@pytest.mark.slow
def test_weighted_placement_of_a_passage_lands_near_it(umap_pair):
    idx, m, _, _, _ = umap_pair
    x = np.asarray(idx.vectors, np.float32)
    extent = np.linalg.norm(m.coords.max(0) - m.coords.min(0))  # the map's diagonal
    err = np.linalg.norm(m.place(x) - m.coords, axis=1)  # (N,)
    # its neighbours by inner product are its neighbours on the map: it lands by its own point
    assert np.median(err) < 0.03 * extent and np.quantile(err, 0.95) < 0.1 * extent


@pytest.mark.slow  # its fixture fits UMAP: over 20 s on 2 cores
def test_umap_map_keeps_clusters_and_places_in_them(umap_pair):
    idx, m, _, _, _ = umap_pair
    assert m.method == "umap" and m.coords.shape == (len(idx), 2) and np.isfinite(m.coords).all()
    labels = np.arange(len(idx)) % 8
    centroids = np.stack([m.coords[labels == c].mean(0) for c in range(8)])
    # a passage is closer to its own cluster's centroid than to any other (UMAP kept the groups)
    d = np.linalg.norm(m.coords[:, None, :] - centroids[None], axis=2)  # (N, 8)
    assert (d.argmin(1) == labels).mean() > 0.95
    # a new query drawn from cluster 3 is placed inside cluster 3
    x = np.asarray(idx.vectors, np.float32)
    q = x[labels == 3][:5].mean(0)
    q /= np.linalg.norm(q)
    p = m.place(q)
    assert np.linalg.norm(centroids - p, axis=1).argmin() == 3


@pytest.mark.slow  # its fixture fits UMAP: over 20 s on 2 cores
def test_cache_round_trip(umap_pair):
    idx, first, second, t_first, t_second = umap_pair
    assert first.loaded_from is None and second.loaded_from is not None
    assert second.loaded_from.parent.name == "maps" and second.loaded_from.suffix == ".npz"
    assert idx.manifest["ids_checksum"] in second.loaded_from.name
    np.testing.assert_array_equal(first.coords, second.coords)
    assert t_second < 1.0 and t_second < t_first / 5
    # no temp files are left behind by the atomic write
    assert [p.name for p in second.loaded_from.parent.iterdir()] == [second.loaded_from.name]


def test_cache_is_keyed_by_the_index(cache):
    x = clustered(400, d=16)
    a = projection.fit_map(make_index(x), "pca", 2)
    assert projection.fit_map(make_index(x), "pca", 2).loaded_from is not None
    # same ids, other vectors (a rebuilt index): a new fit, not the old picture
    b = projection.fit_map(make_index(clustered(400, d=16, seed=5)), "pca", 2)
    assert b.loaded_from is None and not np.allclose(a.coords, b.coords)
    # other ids: a new fit too; and dims / method are part of the key
    assert projection.fit_map(make_index(x, tag="q"), "pca", 2).loaded_from is None
    assert projection.fit_map(make_index(x), "pca", 3).loaded_from is None
    # a corrupt cache file is refitted, not trusted
    path = projection.fit_map(make_index(x), "pca", 2).loaded_from
    path.write_bytes(b"not a zip")
    again = projection.fit_map(make_index(x), "pca", 2)
    assert again.loaded_from is None
    np.testing.assert_allclose(again.coords, a.coords, atol=1e-6)


def test_small_index_falls_back_to_pca_and_bad_args_are_errors(cache):
    idx = make_index(clustered(5, d=8))
    m = projection.fit_map(idx, "umap", 3)
    assert m.method == "pca" and m.coords.shape == (5, 3) and "too few" in m.note
    assert m.place(np.asarray(idx.vectors[0], np.float32)).shape == (3,)
    with pytest.raises(projection.ProjectionError):
        projection.fit_map(idx, "tsne", 2)
    with pytest.raises(projection.ProjectionError):
        projection.fit_map(idx, "pca", 4)


@pytest.mark.slow  # its fixture fits UMAP: over 20 s on 2 cores
def test_placement_is_fast_and_never_touches_umap_transform(umap_pair, monkeypatch):
    import umap

    def boom(*a, **k):
        raise AssertionError("UMAP.transform must not run on the request path")

    monkeypatch.setattr(umap.UMAP, "transform", boom)
    idx, _, m, _, _ = umap_pair
    q = np.asarray(idx.vectors[10], np.float32)
    t0 = time.perf_counter()
    m.place(q)
    assert time.perf_counter() - t0 < 0.1


def test_one_fit_per_map_even_when_the_caller_stops_waiting(cache, monkeypatch):
    """A page rerun interrupts the waiting caller (its progress callback raises); the fit goes on in
    its worker, lands in the cache, and the next caller joins it instead of fitting again."""
    calls = []

    def slow_fit(x, dims):
        calls.append(dims)
        time.sleep(1.5)
        return x[:, :dims].copy()

    monkeypatch.setattr(projection, "_umap_coords", slow_fit)
    idx = make_index(clustered(100, d=8))

    class Rerun(Exception):
        pass

    def impatient(msg, frac):
        if "s of about" in msg:
            raise Rerun

    with pytest.raises(Rerun):
        projection.fit_map(idx, "umap", 2, impatient)
    seen = []
    m = projection.fit_map(idx, "umap", 2, lambda msg, frac: seen.append(frac))
    assert calls == [2] and seen[-1] == 1.0
    np.testing.assert_allclose(m.coords, np.asarray(idx.vectors, np.float32)[:, :2])
    assert projection.fit_map(idx, "umap", 2).loaded_from is not None
