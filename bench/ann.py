"""Single-query retrieval on 1M structured 384-d vectors with the large-corpus index vs exact search.

The 1M vectors are made from the 12.3k real MiniLM passage vectors shipped in assets/: each is a
random real vector plus Gaussian noise of norm ~1 (cosine ~0.7 to its source), renormalised, so
the set has the topical geometry of real sentence embeddings while neighbourhoods of different
sources overlap (random isotropic vectors have no neighbourhoods and would flatter no index).
Queries are made the same way. The large-corpus index is IVF: k-means cells, exact inner
products inside the probed cells.
"""

import sys
import time

import faiss
import numpy as np
from common import emit

N = int(sys.argv[1]) if len(sys.argv) > 1 else 1_000_000
D, QUERIES, SIGMA = 384, 200, 1.0
FACTORY = "IVF4096,Flat"
NPROBE = 32
TRAIN = 200_000  # k-means sample: ~49 points per cell


def structured(n, seed):
    from common import ROOT

    real = np.load(ROOT / "assets" / "vectors" / "wiki-minilm-f16.npy").astype("float32")  # (12324, 384)
    rng = np.random.default_rng(seed)
    out = np.empty((n, D), dtype="float32")
    for start in range(0, n, 100_000):  # in blocks, to keep the peak memory low
        m = min(100_000, n - start)
        x = real[rng.integers(0, len(real), m)] + (SIGMA / np.sqrt(D)) * rng.normal(size=(m, D)).astype(
            "float32"
        )
        out[start : start + m] = x / np.linalg.norm(x, axis=1, keepdims=True)
    return out


def main():
    faiss.omp_set_num_threads(2)
    x = structured(N, 0)
    q = structured(QUERIES, 7)
    t = time.perf_counter()
    ivf = faiss.index_factory(D, FACTORY, faiss.METRIC_INNER_PRODUCT)
    ivf.train(x[:TRAIN])
    ivf.add(x)
    build_s = time.perf_counter() - t
    ivf.nprobe = NPROBE
    flat = faiss.IndexFlatIP(D)
    flat.add(x)
    _, exact = flat.search(q, 10)
    faiss.omp_set_num_threads(1)  # single-query latency: one query at a time, as a user asks
    lat = []
    found = []
    for i in range(QUERIES):
        t = time.perf_counter()
        _, rows = ivf.search(q[i : i + 1], 10)
        lat.append((time.perf_counter() - t) * 1000)
        found.append(rows[0])
    t = time.perf_counter()
    for i in range(20):
        flat.search(q[i : i + 1], 10)
    flat_ms = (time.perf_counter() - t) / 20 * 1000
    recall = float(np.mean([len(set(a) & set(e)) / 10 for a, e in zip(found, exact)]))
    emit(
        {
            "ann_1m_p50_ms": round(float(np.percentile(lat, 50)), 3),
            "ann_1m_p95_ms": round(float(np.percentile(lat, 95)), 3),
            "ann_1m_recall_at_10": round(recall, 4),
            "ann_1m_factory": f"{FACTORY} nprobe={NPROBE}",
            "ann_1m_build_s": round(build_s, 1),
            "flat_1m_ms": round(flat_ms, 2),
            "bytes_per_vector_flat": D * 4,
            "bytes_per_vector_ivf_flat": D * 4 + 8,
            "bytes_per_vector_hnsw32": D * 4 + 32 * 2 * 4,
            "ann_vectors": N,
        }
    )


if __name__ == "__main__":
    main()
