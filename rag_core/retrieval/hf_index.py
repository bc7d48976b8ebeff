"""An index in the Hugging Face `datasets` layout: the paper's published `wiki_dpr` / `psgs_w100` files.

The layout is what transformers' `CustomHFIndex.load_from_disk(vector_size, dataset_path,
index_path)` reads: a folder written by `Dataset.save_to_disk` with `title`, `text` and `embeddings`
columns (and `id` where present), and a FAISS file written by `dataset.save_faiss_index("embeddings",
FILE)` (the same bytes as `dataset.get_index("embeddings").save(FILE)`). The command line spells it
`--index hf-dataset:DIR[:INDEX_FILE]`; INDEX_FILE defaults to `DIR/embeddings.faiss`.

The published files carry no RAG Loupe manifest, so one is computed on load (dimension, count, FAISS
type, checksum of the ids) and the sizes are checked: dataset rows = FAISS vectors, one embedding
width = the index's = the encoder's. A `rag_loupe_manifest.json` inside DIR, if any, is checked
against it, and an encoder it names must be the one in use; without one any encoder of the right
dimension is accepted, as the published DPR index records none.

>>> parse_spec("hf-dataset:/no/such/psgs_w100")
(PosixPath('/no/such/psgs_w100'), PosixPath('/no/such/psgs_w100/embeddings.faiss'))
>>> parse_spec("hf-dataset:/no/such/psgs_w100:/elsewhere/psgs_w100.nq.HNSW128_SQ8-IP-train.faiss")[1].name
'psgs_w100.nq.HNSW128_SQ8-IP-train.faiss'
"""

from __future__ import annotations

import json
import operator
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path

import faiss
import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from rag_core.corpus import Passage, ids_checksum
from rag_core.errors import first_line
from rag_core.retrieval.index import MANIFEST_VERSION, IndexLoadError, PassageIndex

PREFIX = "hf-dataset:"
DEFAULT_INDEX_FILE = "embeddings.faiss"  # looked for inside DIR when the spelling gives no INDEX_FILE
SIDECAR = "rag_loupe_manifest.json"  # optional, inside DIR: recorded encoder / dim / count / ids_checksum
COLUMNS = ("title", "text", "embeddings")
CHECKED_ROWS = 16  # rows spread over the dataset whose FAISS copy is compared with the stored embedding


def is_hf_spec(spec: str) -> bool:
    return spec.startswith(PREFIX)


def parse_spec(spec: str) -> tuple[Path, Path]:
    """`hf-dataset:DIR[:INDEX_FILE]` -> (DIR, INDEX_FILE). A colon splits them unless DIR itself has one."""
    rest = spec[len(PREFIX) :] if is_hf_spec(spec) else spec
    if not rest:
        raise IndexLoadError("hf-dataset: needs a folder: --index hf-dataset:DIR[:INDEX_FILE]")
    cuts = [i for i, c in enumerate(rest) if c == ":"]
    if Path(rest).expanduser().is_dir() or not cuts:
        folder, file = rest, ""
    else:  # the first cut that leaves an existing folder, else the first colon
        cut = next((i for i in cuts if Path(rest[:i]).expanduser().is_dir()), cuts[0])
        folder, file = rest[:cut], rest[cut + 1 :]
    folder_path = Path(folder).expanduser()
    return folder_path, (Path(file).expanduser() if file else folder_path / DEFAULT_INDEX_FILE)


class ArrowPassages(Sequence):
    """The passages, read row by row from the dataset's memory-mapped Arrow columns.

    Row i is `Passage(id, title, text)`; a dataset without an `id` column numbers its rows. Nothing
    is copied up front: 21M Passage objects would take tens of GB, and a query needs only K.
    """

    def __init__(self, table: pa.Table):
        self._n = table.num_rows
        self._title, self._text = table.column("title"), table.column("text")
        self._id = table.column("id") if "id" in table.column_names else None

    def __len__(self) -> int:
        return self._n

    def __getitem__(self, i):
        if isinstance(i, slice):
            return [self[j] for j in range(*i.indices(self._n))]
        i = operator.index(i)
        i = i + self._n if i < 0 else i
        if not 0 <= i < self._n:
            raise IndexError(f"passage {i} of {self._n}")
        pid = str(i) if self._id is None else str(self._id[i].as_py())
        return Passage(pid, self._title[i].as_py() or "", self._text[i].as_py() or "")

    def __iter__(self) -> Iterator[Passage]:
        titles = (t for c in self._title.chunks for t in c.to_pylist())  # a chunk at a time
        texts = (t for c in self._text.chunks for t in c.to_pylist())
        return (Passage(pid, title or "", text or "") for pid, title, text in zip(self.ids(), titles, texts))

    def ids(self) -> Iterator[str]:
        """Every passage id in row order, a chunk at a time (for the checksum)."""
        if self._id is None:
            yield from map(str, range(self._n))
            return
        for chunk in self._id.chunks:
            yield from map(str, chunk.to_pylist())


class ArrowVectors:
    """The (N, D) `embeddings` column as zero-copy views of the memory-mapped Arrow chunks.

    For the published 21M x 768 index a float16 copy would take 32 GB of memory and a float32 one 64:
    the views cost nothing until read, and a query reads only its K rows (the OS keeps what is hot).
    Indexing (`vectors[rows]`, any int array) gathers float32 rows; `np.asarray` copies everything.
    """

    def __init__(self, chunks: list[np.ndarray]):
        self._chunks = chunks  # each (n_i, D), a view of one Arrow chunk
        self._starts = np.cumsum([0] + [len(c) for c in chunks])  # (C + 1,) first row of each chunk
        self.shape = (int(self._starts[-1]), int(chunks[0].shape[1]))
        self.dtype = np.dtype(np.float32)
        self.ndim = 2

    def __len__(self) -> int:
        return self.shape[0]

    def __getitem__(self, rows) -> np.ndarray:
        n, d = self.shape
        r = np.arange(n)[rows] if isinstance(rows, slice) else np.asarray(rows, dtype=np.int64)
        flat = np.where(r.reshape(-1) < 0, r.reshape(-1) + n, r.reshape(-1))  # (M,)
        if flat.size and (flat.min() < 0 or flat.max() >= n):
            raise IndexError(f"row out of range for {n} vectors")
        which = np.searchsorted(self._starts, flat, side="right") - 1  # (M,) chunk of each row
        out = np.empty((flat.size, d), dtype=np.float32)  # (M, D)
        for c in np.unique(which):
            sel = which == c
            out[sel] = self._chunks[c][flat[sel] - self._starts[c]]
        return out.reshape(r.shape + (d,))

    def __array__(self, dtype=None, copy=None) -> np.ndarray:
        return np.concatenate(self._chunks).astype(dtype or np.float32, copy=False)

    def astype(self, dtype) -> np.ndarray:
        return np.asarray(self, dtype=dtype)


@dataclass
class HFDatasetIndex(PassageIndex):
    """A PassageIndex over the datasets layout. Search returns FAISS's top K (the rows
    `dataset.search_batch` and so RagRetriever return); the scores are s(z) = d(z)·q(x) with the
    stored embeddings, as RagModel computes its doc_scores. Where FAISS keeps the vectors exactly
    (Flat, HNSWFlat) its own scores are those; a lossy index (the published SQ8 and PQ ones) is
    rescored from the embeddings and re-sorted, best first."""

    exact_scores: bool = True  # FAISS stores the embeddings exactly: its scores are the inner products

    def search(self, queries: np.ndarray, k: int) -> tuple[np.ndarray, np.ndarray]:
        scores, rows = super().search(queries, k)  # (Q, k), (Q, k)
        if self.exact_scores:
            return scores, rows
        q = np.ascontiguousarray(queries, dtype=np.float32).reshape(len(rows), -1)  # (Q, D)
        found = rows >= 0  # (Q, k): FAISS pads a short result with row -1
        d = self.vectors[np.where(found, rows, 0)]  # (Q, k, D)
        exact = np.where(found, np.einsum("qd,qkd->qk", q, d), scores).astype(np.float32)  # (Q, k)
        order = np.argsort(-exact, axis=1, kind="stable")  # (Q, k) best first, padding stays last
        return np.take_along_axis(exact, order, 1), np.take_along_axis(rows, order, 1)


def read_table(folder: Path) -> pa.Table:
    """The Arrow table of a `save_to_disk` folder, memory-mapped as `datasets.load_from_disk` opens it."""
    if not folder.is_dir():
        raise IndexLoadError(f"hf-dataset folder not found: {folder}")
    import datasets  # imported here: it adds half a second to every start, and only this spelling needs it

    bars_were_off = datasets.are_progress_bars_disabled()
    datasets.disable_progress_bars()  # no progress bar of its own on the user's terminal
    try:
        ds = datasets.load_from_disk(str(folder))
    except (OSError, ValueError, KeyError, pa.ArrowException) as e:
        raise IndexLoadError(
            f"{folder} is not a dataset saved with Dataset.save_to_disk: {first_line(e, limit=200)}"
        ) from None
    finally:
        if not bars_were_off:
            datasets.enable_progress_bars()
    if isinstance(ds, datasets.DatasetDict):
        raise IndexLoadError(
            f"{folder} holds the splits {', '.join(ds)}: give one, e.g. hf-dataset:{folder / next(iter(ds))}"
        )
    missing = [c for c in COLUMNS if c not in ds.column_names]
    if missing:
        raise IndexLoadError(
            f"dataset {folder.name} has no {', '.join(missing)} column: an hf-dataset index needs "
            f"title, text and embeddings (it has {', '.join(ds.column_names)})"
        )
    if len(ds) == 0:
        raise IndexLoadError(f"dataset {folder.name} has no rows")
    if "id" in ds.column_names and ds.data.column("id").null_count:
        raise IndexLoadError(f"dataset {folder.name} has rows without an id")
    return ds.data.table  # save_to_disk writes rows in order (no indices mapping), so row i is FAISS's id i


def vector_views(column: pa.ChunkedArray, name: str) -> ArrowVectors:
    """Zero-copy (n_i, D) views of an `embeddings` column of equal-length float lists."""
    t = column.type
    if not (
        pa.types.is_list(t) or pa.types.is_large_list(t) or pa.types.is_fixed_size_list(t)
    ) or not pa.types.is_floating(t.value_type):
        raise IndexLoadError(f"dataset {name}: the embeddings column holds {t}, not lists of floats")
    if column.null_count:
        raise IndexLoadError(f"dataset {name}: {column.null_count} rows have no embedding")
    lengths = pc.min_max(pc.list_value_length(column)).as_py()  # {"min": .., "max": ..}
    if lengths["min"] != lengths["max"] or not lengths["min"]:
        raise IndexLoadError(
            f"dataset {name}: embeddings of unequal or zero length ({lengths['min']} to {lengths['max']})"
        )
    width = int(lengths["min"])
    try:
        views = [
            c.flatten().to_numpy(zero_copy_only=True).reshape(len(c), width) for c in column.chunks if len(c)
        ]
    except pa.ArrowException:
        raise IndexLoadError(f"dataset {name}: the embeddings have missing values") from None
    return ArrowVectors(views)


def read_faiss(path: Path) -> faiss.Index:
    if not path.is_file():
        raise IndexLoadError(
            f"no FAISS index at {path}: write one with dataset.save_faiss_index('embeddings', FILE) "
            "and give it as hf-dataset:DIR:FILE"
        )
    try:
        index = faiss.read_index(str(path))
    except RuntimeError as e:
        raise IndexLoadError(f"cannot read the FAISS index {path}: {first_line(e, limit=200)}") from None
    if index.metric_type != faiss.METRIC_INNER_PRODUCT:
        raise IndexLoadError(
            f"the FAISS index {path.name} ranks by distance (metric {index.metric_type}), not by the "
            "inner product DPR scores with: build it with metric_type=faiss.METRIC_INNER_PRODUCT"
        )
    return index


def keeps_exact_vectors(index: faiss.Index, vectors: ArrowVectors, name: str) -> bool:
    """Whether FAISS stores these embeddings exactly (its scores are then the inner products).

    Rows spread over the dataset are read back from FAISS: equal to the stored embeddings -> exact;
    each nearer its own embedding than any other checked row's -> a lossy code of them (SQ8, PQ);
    otherwise the FAISS file was built from other vectors (the nq and multiset embeddings have the
    same count and width), an error. An index that cannot read back (IVF without a direct map) is
    treated as lossy, unchecked.
    """
    rows = np.unique(
        np.linspace(0, len(vectors) - 1, min(len(vectors), CHECKED_ROWS)).astype(np.int64)
    )  # (S,)
    try:
        got = np.asarray(index.reconstruct_batch(rows), dtype=np.float32)  # (S, D)
    except RuntimeError:
        return False
    want = vectors[rows]  # (S, D)
    if np.array_equal(got, want):
        return True
    dist = ((got[:, None, :] - want[None, :, :]) ** 2).sum(-1)  # (S, S) read-back row vs stored row
    if (np.diag(dist) > dist.min(axis=1)).any():
        raise IndexLoadError(
            f"the FAISS index does not hold the embeddings of dataset {name}: "
            "pair the dataset folder with the index built from it"
        )
    return False


def check_sidecar(folder: Path, manifest: dict, encoder_id: str | None) -> dict:
    """`manifest` checked against a `rag_loupe_manifest.json` in `folder`, when there is one."""
    path = folder / SIDECAR
    if not path.is_file():
        return manifest
    try:
        recorded = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as e:
        raise IndexLoadError(f"{path} is unreadable: {first_line(e, limit=120)}") from None
    if not isinstance(recorded, dict):
        raise IndexLoadError(f"{path} is not a JSON object")
    for key in ("dim", "count", "ids_checksum"):
        if key in recorded and recorded[key] != manifest[key]:
            raise IndexLoadError(
                f"dataset {folder.name} does not match its {SIDECAR}: {key} is {manifest[key]!r}, "
                f"recorded {recorded[key]!r}"
            )
    encoder = recorded.get("encoder") or None
    if encoder and encoder_id is not None and encoder != encoder_id:
        raise IndexLoadError(f"index {folder.name} was built with encoder {encoder!r}, not {encoder_id!r}")
    return {**recorded, **manifest, "encoder": encoder}


def load_hf_index(
    folder: str | Path,
    index_file: str | Path | None = None,
    encoder_id: str | None = None,
    dim: int | None = None,
) -> HFDatasetIndex:
    """Load and check a `save_to_disk` folder and its FAISS file; IndexLoadError says what is wrong."""
    folder = Path(folder)
    index_file = Path(index_file) if index_file else folder / DEFAULT_INDEX_FILE
    table = read_table(folder)
    vectors = vector_views(table.column("embeddings"), folder.name)
    index = read_faiss(index_file)
    if index.ntotal != table.num_rows:
        raise IndexLoadError(
            f"dataset {folder.name} has {table.num_rows} rows but the FAISS index "
            f"{index_file.name} holds {index.ntotal} vectors"
        )
    if index.d != vectors.shape[1]:
        raise IndexLoadError(
            f"the FAISS index {index_file.name} has dimension {index.d}, "
            f"the dataset's embeddings {vectors.shape[1]}"
        )
    if dim is not None and index.d != dim:
        raise IndexLoadError(f"index {folder.name} has dimension {index.d}, the encoder gives {dim}")
    passages = ArrowPassages(table)
    manifest = {
        "version": MANIFEST_VERSION,
        "name": folder.name,
        "encoder": None,  # the published files record none
        "dim": int(index.d),
        "count": len(passages),
        "factory": type(faiss.downcast_index(index)).__name__,
        "ids_checksum": ids_checksum(passages.ids()),  # one pass over the id column: ~6 s for 21M ids
        "built_at": time.strftime("%Y-%m-%dT%H:%M:%S", time.localtime(index_file.stat().st_mtime)),
        "source": "hf-dataset",
    }
    manifest = check_sidecar(folder, manifest, encoder_id)
    exact = keeps_exact_vectors(index, vectors, folder.name)
    return HFDatasetIndex(index, passages, vectors, manifest, exact_scores=exact)
