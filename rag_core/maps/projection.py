"""A map of an index: its passage vectors laid out in 2-D or 3-D (UMAP with cosine, or PCA).

Fitting UMAP on the ~12.3k default passages takes about a minute, so a fitted map is cached on
disk under `cache_dir()/maps/`, keyed by the index's manifest checksum and a digest of its vectors
(a rebuilt index with other vectors refits), and loads in milliseconds afterwards. An index of
more than `MAX_FIT` passages gets UMAP fitted on a fixed sample of that many, the rest placed
like queries (`map_layout.fit_layout`): 100k passages in under two minutes (a full fit: over six).

Placing a new query never calls UMAP's `transform()`: its first call compiles numba for ~90 s. A
query lands instead at the score-weighted mean of its m nearest passages' map positions, weights
softmax(scale · s) over the top m by inner product with the stored vectors: numpy only, ~1 ms.
For PCA the placement is the exact projection. Either way the map is a picture, not the ranking:
closeness on it is not the inner-product order of the retriever.

>>> import numpy as np
>>> v = np.array([[1, 0, 0], [0, 1, 0], [0, 0, 1], [1, 1, 0]], "float32")
>>> m = fit_pca(v, dims=2)
>>> bool(np.allclose(m.place(v[3]), m.coords[3], atol=1e-5))
True
"""

from __future__ import annotations

import hashlib
import json
import threading
import time
import zipfile
from dataclasses import replace
from pathlib import Path

import numpy as np

from rag_core.config import ASSETS, DEFAULT_ENCODER, Progress
from rag_core.corpus import load_wiki, passage_checksum
from rag_core.maps.map_layout import (
    MAX_FIT,
    MIN_DIST,
    N_NEIGHBORS,
    RANDOM_STATE,
    PassageMap,
    ProjectionError,
    estimate_umap_seconds,
    fit_layout,
    fit_pca,
    sample_note,
)
from rag_core.maps.map_layout import (
    umap_coords as _umap_coords,  # a module global, so tests can stand in for the fit
)
from rag_core.retrieval.index import PassageIndex
from rag_core.storage import caches
from rag_core.storage.files import write_atomic, write_npy_atomic

METHODS = ("umap", "pca")
MIN_UMAP_POINTS = 32  # below this UMAP's neighbour graph is meaningless; use PCA instead
FORMAT_VERSION = 1  # bump when the cached file layout or the fit parameters change
# The UMAP layout of the base corpus, fitted once with the parameters above and shipped (float16).
# Indexes made of the base corpus plus a few passages (wiki, 2016, 2018) reuse it: base passages
# keep their shipped position, the others are placed like queries. That makes those maps instant
# and gives the 2016 and 2018 indexes the same layout, so the two can be compared point by point.
SHIPPED_BASE_MAP = ASSETS / "vectors" / "wiki-umap-{dims}d-f16.npy"
SHIPPED_BASE_META = ASSETS / "vectors" / "wiki-minilm-f16.json"
MIN_BASE_SHARE = 0.5  # reuse the shipped layout only for indexes mostly made of base passages


def _fraction(elapsed: float, estimate: float) -> float:
    """Progress bar position: linear to 0.9 at the estimate, then creeping towards 0.99."""
    if elapsed <= estimate:
        return 0.02 + 0.88 * elapsed / estimate
    return 0.9 + 0.09 * (1.0 - np.exp(-(elapsed - estimate) / estimate))


# One UMAP fit per cache file at a time, even across threads (Streamlit sessions). A fit runs in a
# worker thread that also writes the cache, so a caller that stops waiting (a page rerun) loses
# nothing: the fit finishes, and the next call finds it on disk or joins it here.
_inflight: dict[Path, tuple[threading.Thread, dict]] = {}
_inflight_lock = threading.Lock()


def _fit_umap_cached(
    x: np.ndarray, dims: int, path: Path | None, meta: dict, progress: Progress, max_fit: int = MAX_FIT
) -> PassageMap:
    def work(out: dict) -> None:
        t0 = time.perf_counter()
        try:
            coords, fitted = fit_layout(x, dims, _umap_coords, max_fit, lambda msg: out.update(stage=msg))
            out["map"] = PassageMap("umap", coords, x, fit_seconds=time.perf_counter() - t0, fitted=fitted)
            if path is not None:
                _try_save(path, out["map"], meta)
        except BaseException as e:  # handed to the waiting caller
            out["error"] = e

    with _inflight_lock:
        job = _inflight.get(path) if path is not None else None
        if job is None or not job[0].is_alive():
            out: dict = {}
            job = (threading.Thread(target=work, args=(out,), daemon=True, name="umap-fit"), out)
            if path is not None:
                _inflight[path] = job
            job[0].start()
    thread, out = job
    est, t0 = estimate_umap_seconds(len(x), max_fit), time.perf_counter()
    while thread.is_alive():
        thread.join(0.5)
        el = time.perf_counter() - t0
        stage = out.get("stage", f"Fitting UMAP (cosine) on {len(x):,} passages")
        progress(
            f"{stage}: {el:.0f} s of about {est:.0f} s; done once, then cached on disk", _fraction(el, est)
        )
    with _inflight_lock:
        if path is not None and _inflight.get(path) is job:
            del _inflight[path]
    if "error" in out:
        raise out["error"]
    return out["map"]


def fit_map(
    index: PassageIndex,
    method: str = "umap",
    dims: int = 2,
    progress: Progress | None = None,
    cache: bool = True,
    max_fit: int = MAX_FIT,
) -> PassageMap:
    """The map of an index's passages, from the disk cache when it was fitted before.

    `method`: "umap" (cosine, n_neighbors 15, min_dist 0.1, seed 42) or "pca"; `dims`: 2 or 3.
    An index with fewer than 32 passages gets PCA (with a note): UMAP needs neighbours. UMAP fits
    at most `max_fit` passages, a fixed sample, and places the rest as queries (`map_layout`).
    """
    if method not in METHODS:
        raise ProjectionError(f"map method must be umap or pca, got {method!r}")
    if dims not in (2, 3):
        raise ProjectionError(f"a map has 2 or 3 dimensions, got {dims!r}")
    progress = progress or (lambda msg, frac: None)
    x = np.asarray(index.vectors, dtype=np.float32)  # (N, D)
    note = ""
    if method == "umap" and len(x) < MIN_UMAP_POINTS:
        method, note = "pca", f"only {len(x)} passages: too few for UMAP, so this map is PCA"
    meta = {
        "version": FORMAT_VERSION,
        "method": method,
        "dims": dims,
        "count": len(x),
        "ids_checksum": index.manifest.get("ids_checksum", ""),
        "vectors": vectors_digest(index.vectors),
    }
    if method == "umap":
        meta.update(n_neighbors=N_NEIGHBORS, min_dist=MIN_DIST, metric="cosine", random_state=RANDOM_STATE)
        if len(x) > max_fit:  # only sampled layouts carry the key: full-fit cache files stay valid
            meta["fit_sample"] = max_fit
        derived = from_shipped_base(index, x, dims)
        if derived is not None:
            derived.note = "; ".join(n for n in (note, derived.note) if n)
            progress("Map ready (shipped base layout)", 1.0)
            return derived
    path = cache_path(meta) if cache else None
    pmap = _load(path, meta, x) if path is not None else None
    if pmap is not None:
        progress("Map loaded from the cache", 1.0)
    elif method == "pca":
        pmap = fit_pca(x, dims)
        if path is not None:
            _try_save(path, pmap, meta)
    else:
        progress(f"Fitting UMAP (cosine) on {min(len(x), max_fit):,} passages", 0.01)
        pmap = _fit_umap_cached(x, dims, path, meta, progress, max_fit)
    progress("Map ready", 1.0)  # a copy: callers that joined one fit share its map, not their notes
    return replace(pmap, note="; ".join(n for n in (note, sample_note(pmap.fitted, len(x)), pmap.note) if n))


def from_shipped_base(index: PassageIndex, x: np.ndarray, dims: int) -> PassageMap | None:
    """The shipped base-corpus UMAP layout extended to this index, or None where it does not fit
    (another encoder, a changed base corpus, or an index mostly of other passages)."""
    path = Path(str(SHIPPED_BASE_MAP).format(dims=dims))
    if (
        index.manifest.get("encoder") != DEFAULT_ENCODER
        or not path.is_file()
        or not SHIPPED_BASE_META.is_file()
    ):
        return None
    base = load_wiki()
    if json.loads(SHIPPED_BASE_META.read_text()).get("checksum") != passage_checksum(base):
        return None
    base_coords = np.load(path, allow_pickle=False).astype(np.float32)  # (N_base, dims)
    if len(base_coords) != len(base):
        return None
    pos = {p.id: i for i, p in enumerate(base)}
    rows = np.array([pos.get(p.id, -1) for p in index.passages])  # (N,) base row or -1
    known = rows >= 0
    if known.mean() < MIN_BASE_SHARE:
        return None
    coords = np.zeros((len(rows), dims), dtype=np.float32)  # (N, dims)
    coords[known] = base_coords[rows[known]]
    partial = PassageMap("umap", coords[known], x[known])
    if (~known).any():
        coords[~known] = partial.place(x[~known])  # (n_new, dims): placed among the base passages
    added = int((~known).sum())
    note = (
        (
            "The base passages keep the layout shipped with the app; "
            f"the {added:,} passage{'s' if added != 1 else ''} this index adds "
            f"{'are' if added != 1 else 'is'} placed by the nearest neighbours, "
            "the way the question is placed."
        )
        if added
        else ""
    )
    return PassageMap("umap", coords, x, note=note, shipped=True)


def write_shipped_base_map(x: np.ndarray, dims: int) -> Path:
    """Fit the base corpus's UMAP layout from its shipped vectors x (N_base, D) and write it where
    `from_shipped_base` finds it (`make shipped-data`, after the corpus or its chunking changes)."""
    coords, _ = fit_layout(x, dims, _umap_coords, max(MAX_FIT, len(x)))  # (N_base, dims): a full fit
    path = Path(str(SHIPPED_BASE_MAP).format(dims=dims))
    write_npy_atomic(path, coords.astype(np.float16))
    return path


# ---------------------------------------------------------------- the disk cache
def vectors_digest(vectors: np.ndarray) -> str:
    """A short digest of the stored (float16) vectors: same ids with new vectors -> a new map."""
    v = np.ascontiguousarray(vectors, dtype=np.float16)
    return hashlib.blake2b(v.tobytes() + repr(v.shape).encode(), digest_size=8).hexdigest()


def cache_path(meta: dict) -> Path:
    return (
        caches.folder("maps")
        / f"{meta['ids_checksum'] or 'noids'}-{meta['vectors']}-{meta['method']}-{meta['dims']}.npz"
    )


def _try_save(path: Path, pmap: PassageMap, meta: dict) -> None:
    """Cache the map atomically (never a half-written file) if the disk lets us (full, read-only):
    an uncached map is still a map."""
    arrays = {"coords": pmap.coords, "meta": np.array(json.dumps(dict(meta, fit_seconds=pmap.fit_seconds)))}
    if pmap.method == "pca":
        arrays.update(mean=pmap.mean, components=pmap.components)
    if pmap.fitted is not None:
        arrays.update(fitted=pmap.fitted)

    def write(tmp: str) -> None:
        with open(tmp, "wb") as f:
            np.savez(f, **arrays)

    try:
        write_atomic(path, write)
        caches.keep_newest("maps", keep=path)
    except OSError as e:
        pmap.note = (pmap.note + "; " if pmap.note else "") + f"not cached on disk ({e.strerror or e})"


def _load(path: Path, meta: dict, x: np.ndarray) -> PassageMap | None:
    """The cached map if the file is there, readable and made for exactly this index; else None."""
    if not path.is_file():
        return None
    try:
        with np.load(path, allow_pickle=False) as z:
            stored = json.loads(str(z["meta"]))
            coords = z["coords"].astype(np.float32)
            mean = z["mean"] if "mean" in z.files else None
            comps = z["components"] if "components" in z.files else None
            fitted = z["fitted"].astype(np.int64) if "fitted" in z.files else None
    except (OSError, ValueError, KeyError, zipfile.BadZipFile, json.JSONDecodeError):
        return None  # broken cache: refit (and overwrite it)
    if any(stored.get(k) != v for k, v in meta.items()) or coords.shape != (len(x), meta["dims"]):
        return None
    if meta["method"] == "pca" and (mean is None or comps is None):
        return None
    if ("fit_sample" in meta) != (fitted is not None) or (
        fitted is not None and len(fitted) != meta["fit_sample"]
    ):
        return None
    return PassageMap(
        meta["method"],
        coords,
        x,
        mean,
        comps,
        float(stored.get("fit_seconds", 0.0)),
        loaded_from=path,
        fitted=fitted,
    )


def how_made(pmap: PassageMap) -> str:
    """One line on how the layout was made (the Map page's status box opens onto it).

    >>> how_made(fit_pca(np.eye(4, dtype="float32"), dims=2))[:52]
    'PCA: the 2 directions along which the 4-dimensional '
    """
    n = len(pmap.coords)
    if pmap.method == "pca":
        return (
            f"PCA: the {pmap.dims} directions along which the {pmap.vectors.shape[1]}-dimensional passage "
            "vectors vary most; a question is projected onto them exactly."
        )
    how = f"UMAP (cosine distance, {N_NEIGHBORS} neighbours, min_dist {MIN_DIST})"
    if pmap.shipped:
        return (
            f"{how}, fitted once on the base passages and shipped; any other passage, and the question, is "
            "placed by its nearest neighbours."
        )
    fitted = n if pmap.fitted is None else len(pmap.fitted)
    return (
        f"{how}, fitted on {fitted:,} of the {n:,} passages; "
        f"{'the question is' if fitted == n else 'the others, and the question, are'} placed by the nearest "
        "fitted neighbours."
    )
