"""`build-index --engine ray`: the same index as a local build, made on a Ray cluster.

Encoding is what one machine cannot do for a large corpus (docs/scaling.md), so it is the part
spread out; the index comes out the same as `catalog.build_corpus_index` would make it:
1. encode: Ray Data maps passage blocks through one encoder copy per actor (one per GPU, or one
   torch thread per CPU); each row carries its position, so the vectors come back in passage order
   whatever order the blocks finish in;
2. train: the IVF/PQ quantiser is trained once, here, on a sample of the vectors: all of them up to
   64 a centroid (at least 65,536; so a corpus that small trains exactly as a local build does), a
   seeded sample above that;
3. add: each shard is added in a Ray task to a copy of the trained empty index, and the shards are
   merged in order (`merge_from`, the shard's first row as its id offset), so row i is passage i.
   An index that cannot merge (HNSW: one graph) is filled in order here instead.
The result is saved by `catalog.save_corpus_index`: the same files and manifest as a local build.

Ray is imported here and nowhere else, and nothing imports this module until a Ray build is asked
for, so the engine runs without Ray installed.
"""

from __future__ import annotations

import logging
import os
from dataclasses import dataclass
from pathlib import Path

import faiss
import numpy as np
import ray
import ray.data
import torch

from rag_core.config import Progress
from rag_core.corpus import Passage
from rag_core.models.sources import set_threads
from rag_core.retrieval.catalog import save_corpus_index
from rag_core.retrieval.encoders import Encoder, load_encoder
from rag_core.retrieval.index import FLAT, IndexLoadError, PassageIndex, empty_faiss_index

BATCH = 256  # passages an actor encodes per call (its encoder batches them again by length)
BLOCK = 4096  # passages a Ray Data block holds, above a few blocks an actor
# Training rows: 64 a centroid (FAISS asks for 39 to 256; k-means time grows with the sample, and
# IVF65536 on 21M passages would otherwise train on 16.8M), and never under 65,536 (a PQ's codebooks)
POINTS_PER_CENTROID = 64
MIN_TRAIN = 65_536


@dataclass(frozen=True)
class EncoderSpec:
    """What each actor loads: `encoders.load_encoder`'s arguments, the device aside."""

    question: str
    ctx: str | None = None
    allow_downloads: bool = False


class RayClusterError(ValueError):
    """The Ray cluster cannot be joined or cannot run the build; the message says why."""


def _auth_hint(e: BaseException) -> str:
    causes = []
    while e is not None:
        causes.append(str(e))
        e = e.__cause__ or e.__context__
    if any("Authentication" in c or "AuthToken" in c for c in causes):
        return (
            "it asks for a token: set RAY_AUTH_MODE=token here, with the cluster's token in ~/.ray/auth_token"
        )
    return "is it running, and is the address the one `ray start --head` printed?"


class EncodeBlock:
    """One Ray actor: one encoder copy, on its GPU or on one CPU thread (actors share the cores)."""

    def __init__(self, spec: EncoderSpec, use_gpu: bool):
        set_threads(1)
        device = torch.device("cuda" if use_gpu else "cpu")
        self.encoder = load_encoder(spec.question, spec.ctx, device, spec.allow_downloads)

    def __call__(self, batch: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
        passages = [
            Passage(str(i), str(t), str(x)) for i, t, x in zip(batch["id"], batch["title"], batch["text"])
        ]
        return {"row": batch["row"], "vector": self.encoder.encode_passages(passages)}  # (B,), (B, D)


def connect(address: str | None, cpus: int | None = None) -> bool:
    """Join the cluster at `address` (or $RAY_ADDRESS), else start Ray on this machine with `cpus`
    CPUs; True when this call started the session (so it is the one to shut it down)."""
    if ray.is_initialized():
        return False
    address = address or os.environ.get("RAY_ADDRESS")
    if address:
        try:
            ray.init(address=address, logging_level=logging.WARNING, log_to_driver=False)
        except ConnectionError as e:
            raise RayClusterError(f"cannot join the Ray cluster at {address} ({_auth_hint(e)})") from None
    else:  # a session of this process alone: its notices (token auth on a local cluster) are not the user's
        ray.init(
            num_cpus=cpus or os.cpu_count() or 1,
            include_dashboard=False,
            logging_level=logging.ERROR,
            log_to_driver=False,
        )
    ray.data.DataContext.get_current().enable_progress_bars = False  # ours is the one progress bar
    logging.getLogger("ray.data").setLevel(logging.WARNING)  # not a line a block; its logs folder has them
    logging.getLogger("ray.data._internal.progress").setLevel(logging.ERROR)  # "progress bars disabled"
    return True


def plan(workers: int | None, device: str) -> tuple[int, bool]:
    """(actors, whether each takes a GPU): by default one actor a GPU of the cluster, else one a CPU."""
    gpus = int(ray.cluster_resources().get("GPU", 0))
    if device == "cuda" and gpus == 0:
        raise RayClusterError("--device cuda was asked for but the Ray cluster has no GPU")
    use_gpu = gpus > 0 and device != "cpu"
    return workers or (gpus if use_gpu else max(1, int(ray.cluster_resources().get("CPU", 1)))), use_gpu


def encoding(
    passages: list[Passage], spec: EncoderSpec, workers: int, use_gpu: bool = False, actor: type = EncodeBlock
) -> ray.data.Dataset:
    """The (lazy) dataset of (row, vector) batches: `workers` copies of `actor` over the passages."""
    n = len(passages)
    items = [{"row": i, "id": p.id, "title": p.title, "text": p.text} for i, p in enumerate(passages)]
    # a few calls an actor at least, so no actor idles while another has a long queue
    calls = max(4 * workers, -(-n // BATCH))
    ds = ray.data.from_items(items, override_num_blocks=min(n, max(4 * workers, -(-n // BLOCK))))
    return ds.map_batches(
        actor,
        fn_constructor_kwargs={"spec": spec, "use_gpu": use_gpu},
        batch_size=-(-n // calls),
        compute=ray.data.ActorPoolStrategy(size=workers),
        num_cpus=0 if use_gpu else 1,
        num_gpus=1 if use_gpu else 0,
    )


def encode(
    passages: list[Passage],
    spec: EncoderSpec,
    workers: int,
    use_gpu: bool = False,
    progress: Progress | None = None,
) -> np.ndarray:
    """The passages' vectors (N, D) float32 in passage order, encoded by `workers` actors."""
    n = len(passages)
    ds = encoding(passages, spec, workers, use_gpu)
    out: np.ndarray | None = None
    seen = np.zeros(n, dtype=bool)
    for batch in ds.iter_batches(batch_size=None, batch_format="numpy"):
        rows, vecs = batch["row"].astype(np.int64), batch["vector"]  # (B,), (B, D)
        if out is None:
            out = np.zeros((n, vecs.shape[1]), dtype=np.float32)
        out[rows] = vecs
        seen[rows] = True
        if progress:
            progress(f"Encoding passages on Ray {int(seen.sum())}/{n}", float(seen.mean()))
    if out is None or not seen.all():
        raise RuntimeError(f"the Ray encoding returned {int(seen.sum())} of {n} passages")
    return out


def train_rows(n: int, index: faiss.Index) -> np.ndarray:
    """Which of n rows train the quantiser: all of them up to the cap, else a seeded sample, in row order."""
    ivf = faiss.try_extract_index_ivf(index)
    cap = max(MIN_TRAIN, POINTS_PER_CENTROID * (ivf.nlist if ivf is not None else 0))
    if n <= cap:
        return np.arange(n)
    return np.sort(np.random.default_rng(0).choice(n, cap, replace=False))


@ray.remote(num_cpus=1)
def _filled(trained: np.ndarray, x: np.ndarray) -> np.ndarray:
    """A copy of the trained empty index (serialised) with the shard `x` added."""
    faiss.omp_set_num_threads(1)
    index = faiss.deserialize_index(trained)
    index.add(x)
    return faiss.serialize_index(index)


def sharded_index(x: np.ndarray, factory: str, shards: int) -> faiss.Index:
    """A FAISS index of `x` (N, D) as `make_faiss_index` makes it: trained once, filled by shards."""
    n, d = x.shape
    index = empty_faiss_index(d, factory)
    if not index.is_trained:
        index.train(np.ascontiguousarray(x[train_rows(n, index)]))
    ivf = isinstance(index, faiss.IndexIVF)
    if not (ivf or isinstance(index, faiss.IndexFlatCodes)):
        index.add(x)  # HNSW and the like: one structure, filled in order
        return index
    trained = ray.put(faiss.serialize_index(index))
    bounds = np.linspace(0, n, min(shards, n) + 1).astype(int)
    parts = [_filled.remote(trained, x[a:b]) for a, b in zip(bounds[:-1], bounds[1:])]
    for a, part in zip(bounds[:-1], parts):
        # IVF stores ids, which the offset makes global; a flat index's ids are its row order
        index.merge_from(faiss.deserialize_index(ray.get(part)), int(a) if ivf else 0)
    return index


def build_corpus_index(
    passages: list[Passage],
    encoder: Encoder,
    spec: EncoderSpec,
    folder: Path,
    factory: str = FLAT,
    workers: int | None = None,
    address: str | None = None,
    device: str = "auto",
    name: str = "",
    progress: Progress | None = None,
) -> PassageIndex:
    """`catalog.build_corpus_index` on Ray: `encoder` (loaded here) names the index and checks the
    factory before any Ray work; `spec` is what each actor loads."""
    if not passages:
        raise IndexLoadError("cannot build an index over no passages")
    empty_faiss_index(encoder.dim, factory)  # a bad factory string is one clear error, before any work
    started = connect(address, workers)
    try:
        actors, use_gpu = plan(workers, device)
        vectors = encode(passages, spec, actors, use_gpu, progress)
        if progress:
            progress(f"Filling the {factory} index", 1.0)
        index = sharded_index(vectors, factory, actors)
    finally:
        if started:
            ray.shutdown()
    idx = PassageIndex.build(vectors, passages, encoder.id, factory, name=name or folder.name, index=index)
    return save_corpus_index(idx, folder)
