"""Write the shipped base-corpus data again: the passages' float16 vectors and their 2-D and 3-D
UMAP layouts (`make shipped-data`). Run it after the corpus or its chunking changes; the year
snapshots' vectors are written by `catalog.write_snapshot_vectors`, the shipped runs by `eval`."""

import numpy as np
import torch

from rag_core.maps.projection import write_shipped_base_map
from rag_core.retrieval import catalog, encoders


def main() -> None:
    torch.set_num_threads(2)
    encoder = encoders.load_encoder(catalog.DEFAULT_ENCODER, None, torch.device("cpu"))
    npy = catalog.write_base_vectors(encoder, lambda message, _: print(message, flush=True))
    x = np.load(npy, allow_pickle=False).astype(np.float32)  # (N_base, D)
    for dims in (2, 3):
        print(write_shipped_base_map(x, dims), flush=True)


if __name__ == "__main__":
    main()
