"""Write the shipped vectors again (`make shipped-data`): the base passages' float16 vectors with
their 2-D and 3-D UMAP layouts, and the year snapshots' vectors. Run it after the corpus, its
chunking or a snapshot changes; the shipped runs are written by `eval` and `index-swap`."""

import argparse
import os

import numpy as np
import torch

from rag_core.maps.projection import write_shipped_base_map
from rag_core.retrieval import catalog, encoders


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(prog="python -m rag_core.cli.shipped_data", description=__doc__)
    p.add_argument("--threads", type=int, default=os.cpu_count() or 1, help="torch's CPU threads")
    torch.set_num_threads(p.parse_args(argv).threads)
    encoder = encoders.load_encoder(catalog.DEFAULT_ENCODER, None, torch.device("cpu"))
    npy = catalog.write_base_vectors(encoder, lambda message, _: print(message, flush=True))
    x = np.load(npy, allow_pickle=False).astype(np.float32)  # (N_base, D)
    for dims in (2, 3):
        print(write_shipped_base_map(x, dims), flush=True)
    for year in ("2016", "2018"):
        print(catalog.write_snapshot_vectors(year, encoder), flush=True)


if __name__ == "__main__":
    main()
