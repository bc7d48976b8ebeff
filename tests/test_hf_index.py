"""`--index hf-dataset:DIR[:INDEX_FILE]`: the paper's published index layout (a `save_to_disk` folder
with title, text and embeddings, and a FAISS file from `save_faiss_index`), built here in miniature.
Retrieval must give the rows `datasets`' own search gives, with RagRetriever + RagModel's scores."""

import json
from types import SimpleNamespace

import datasets
import faiss
import numpy as np
import pytest

from rag_core.retrieval.catalog import resolve_index
from rag_core.retrieval.hf_index import HFDatasetIndex
from rag_core.retrieval.index import IndexLoadError

from conftest import run_cli

D, N = 16, 40
STUB = SimpleNamespace(id="stub-encoder", dim=D)  # resolve_index needs only the encoder's id and dim


def structured_vectors(n: int, d: int, seed: int = 0) -> np.ndarray:
    """Vectors around a few centres (isotropic noise makes approximate indexes look broken)."""
    rng = np.random.default_rng(seed)
    centres = rng.standard_normal((4, d))
    return (centres[rng.integers(0, 4, n)] + 0.3 * rng.standard_normal((n, d))).astype(np.float32)  # (n, d)


def save_layout(folder, vectors, columns=("id", "title", "text", "embeddings"), shard_bytes=2000):
    """The layout RagRetriever's CustomHFIndex loads: save_to_disk (several shards), reloaded."""
    n = len(vectors)
    data = {
        "id": [f"psg{i + 1}" for i in range(n)],
        "title": [f"Title {i}" for i in range(n)],
        "text": [f"passage number {i}" for i in range(n)],
        "embeddings": list(vectors),
    }
    datasets.Dataset.from_dict({c: data[c] for c in columns}).save_to_disk(
        str(folder), max_shard_size=shard_bytes
    )
    return datasets.load_from_disk(str(folder))


@pytest.fixture(scope="module")
def layout(tmp_path_factory):
    """A 40-passage dataset, its exact inner-product index saved outside and at the default path."""
    root = tmp_path_factory.mktemp("hf")
    ds = save_layout(root / "psgs", structured_vectors(N, D))
    ds.add_faiss_index("embeddings", metric_type=faiss.METRIC_INNER_PRODUCT)
    ds.save_faiss_index("embeddings", str(root / "psgs.IP.faiss"))
    ds.get_index("embeddings").save(str(root / "psgs" / "embeddings.faiss"))
    queries = structured_vectors(6, D, seed=1)  # (Q, D)
    return SimpleNamespace(
        root=root, folder=root / "psgs", file=root / "psgs.IP.faiss", ds=ds, queries=queries
    )


def test_top_k_rows_and_scores_equal_the_datasets_search(layout):
    name, idx = resolve_index(f"hf-dataset:{layout.folder}:{layout.file}", STUB)
    assert name == "psgs" and isinstance(idx, HFDatasetIndex) and len(idx) == N and idx.dim == D
    assert idx.manifest["count"] == N and idx.manifest["encoder"] is None and idx.exact_scores
    scores, rows = idx.search(layout.queries, 5)  # (Q, 5)
    ref = layout.ds.search_batch("embeddings", layout.queries, k=5)
    assert np.array_equal(rows, ref.total_indices)
    np.testing.assert_allclose(scores, ref.total_scores, rtol=0, atol=1e-6)
    for q, row in zip(layout.queries, rows):  # one query at a time, as get_nearest_examples runs it
        s, examples = layout.ds.get_nearest_examples("embeddings", q, k=5)
        assert examples["id"] == [idx.passages[int(r)].id for r in row]
        assert examples["title"] == [idx.passages[int(r)].title for r in row]
        np.testing.assert_allclose(idx.search(q[None], 5)[0][0], s, rtol=0, atol=1e-6)


def test_scores_equal_rag_retriever_and_rag_model_doc_scores(layout):
    from transformers.models.rag.retrieval_rag import CustomHFIndex

    hf = CustomHFIndex.load_from_disk(D, str(layout.folder), str(layout.file))
    hf.init_index()
    ids, vecs = hf.get_top_docs(layout.queries, 5)  # (Q, 5), (Q, 5, D)
    doc_scores = np.einsum("qd,qkd->qk", layout.queries, vecs)  # RagModel: bmm(question, doc embeddings)
    scores, rows = resolve_index(f"hf-dataset:{layout.folder}:{layout.file}", STUB)[1].search(
        layout.queries, 5
    )
    assert np.array_equal(rows, ids)
    np.testing.assert_allclose(scores, doc_scores, rtol=1e-6, atol=1e-6)


def test_a_lossy_index_is_rescored_with_the_stored_embeddings(layout, tmp_path):
    """The published indexes are SQ8 / PQ codes: FAISS's rows, RagModel's exact scores, best first."""
    ds = datasets.load_from_disk(str(layout.folder))
    ds.add_faiss_index(
        "embeddings", string_factory="HNSW16_SQ4", metric_type=faiss.METRIC_INNER_PRODUCT, train_size=N
    )
    ds.save_faiss_index("embeddings", str(tmp_path / "sq4.faiss"))
    idx = resolve_index(f"hf-dataset:{layout.folder}:{tmp_path / 'sq4.faiss'}", STUB)[1]
    assert idx.manifest["factory"] == "IndexHNSWSQ"
    assert not idx.exact_scores
    scores, rows = idx.search(layout.queries, 5)
    ref = ds.search_batch("embeddings", layout.queries, k=5)
    emb = np.stack(layout.ds.with_format("numpy")["embeddings"])  # (N, D)
    for q, s, row, ref_row in zip(layout.queries, scores, rows, ref.total_indices):
        assert sorted(row.tolist()) == sorted(ref_row.tolist())  # the same K passages as dataset.search
        np.testing.assert_allclose(s, emb[row] @ q, rtol=1e-6, atol=1e-6)  # exact d(z)·q(x)
        assert (np.diff(s) <= 0).all()
    faiss_rows_exact = np.einsum("qd,qkd->qk", layout.queries, emb[ref.total_indices])  # (Q, 5)
    assert not np.allclose(ref.total_scores, faiss_rows_exact, atol=1e-3)  # FAISS's own scores are the codes'


def test_the_default_index_file_is_dir_embeddings_faiss(layout):
    idx = resolve_index(f"hf-dataset:{layout.folder}", STUB)[1]
    assert np.array_equal(
        idx.search(layout.queries, 3)[1],
        layout.ds.search_batch("embeddings", layout.queries, k=3).total_indices,
    )
    assert [p.id for p in idx.passages][:3] == ["psg1", "psg2", "psg3"] and idx.passages[-1].id == f"psg{N}"
    assert np.array_equal(idx.vectors[[0, 17, N - 1]], np.stack(layout.ds[[0, 17, N - 1]]["embeddings"]))


def _index_of(vectors, path, metric=faiss.METRIC_INNER_PRODUCT):
    index = faiss.IndexFlat(vectors.shape[1], metric)
    index.add(vectors)
    faiss.write_index(index, str(path))
    return path


def broken(kind: str, layout, tmp) -> str:
    """An --index spelling with one thing a user can get wrong."""
    vecs = structured_vectors(N, D)
    if kind == "missing folder":
        return f"hf-dataset:{tmp / 'no-such-folder'}"
    if kind == "not a dataset":
        (tmp / "notes").mkdir()
        return f"hf-dataset:{tmp / 'notes'}"
    if kind == "splits":
        datasets.DatasetDict({"train": datasets.Dataset.from_dict({"title": ["a"]})}).save_to_disk(
            str(tmp / "dd")
        )
        return f"hf-dataset:{tmp / 'dd'}"
    if kind == "missing column":
        save_layout(tmp / "d", vecs, columns=("id", "text", "embeddings"))
        return f"hf-dataset:{tmp / 'd'}:{_index_of(vecs, tmp / 'x.faiss')}"
    if kind == "count mismatch":
        return f"hf-dataset:{layout.folder}:{_index_of(vecs[:-1], tmp / 'x.faiss')}"
    if kind == "index of other vectors":
        return f"hf-dataset:{layout.folder}:{_index_of(structured_vectors(N, D, seed=7), tmp / 'x.faiss')}"
    if kind == "L2 index":
        return f"hf-dataset:{layout.folder}:{_index_of(vecs, tmp / 'x.faiss', faiss.METRIC_L2)}"
    if kind == "unreadable faiss file":
        (tmp / "x.faiss").write_bytes(b"not a faiss index at all")
        return f"hf-dataset:{layout.folder}:{tmp / 'x.faiss'}"
    if kind == "no default faiss file":
        save_layout(tmp / "d", vecs)
        return f"hf-dataset:{tmp / 'd'}"
    if kind in ("sidecar encoder", "sidecar count"):
        save_layout(tmp / "d", vecs)
        _index_of(vecs, tmp / "d" / "embeddings.faiss")
        record = (
            {"encoder": "facebook/dpr-ctx_encoder-multiset-base"}
            if kind == "sidecar encoder"
            else {"count": N + 1}
        )
        (tmp / "d" / "rag_loupe_manifest.json").write_text(json.dumps(record))
        return f"hf-dataset:{tmp / 'd'}"
    raise AssertionError(kind)


@pytest.mark.parametrize(
    "kind,message",
    [
        ("missing folder", "hf-dataset folder not found"),
        ("not a dataset", "is not a dataset saved with Dataset.save_to_disk"),
        ("splits", "holds the splits train: give one"),
        ("missing column", "has no title column"),
        ("count mismatch", f"has {N} rows but the FAISS index x.faiss holds {N - 1} vectors"),
        ("index of other vectors", "does not hold the embeddings of dataset psgs"),
        ("L2 index", "not by the inner product"),
        ("unreadable faiss file", "cannot read the FAISS index"),
        ("no default faiss file", "no FAISS index at"),
        (
            "sidecar encoder",
            "was built with encoder 'facebook/dpr-ctx_encoder-multiset-base', not 'stub-encoder'",
        ),
        ("sidecar count", f"count is {N}, recorded {N + 1}"),
    ],
)
def test_each_user_error_is_one_clear_index_load_error(layout, tmp_path, kind, message):
    spec = broken(kind, layout, tmp_path)
    with pytest.raises(IndexLoadError) as err:
        resolve_index(spec, STUB)
    assert message in str(err.value) and "\n" not in str(err.value), str(err.value)


def test_the_wrong_dimension_for_the_encoder_is_refused(layout):
    with pytest.raises(IndexLoadError, match=f"dimension {D}, the encoder gives 768"):
        resolve_index(
            f"hf-dataset:{layout.folder}", SimpleNamespace(id="facebook/dpr-question_encoder", dim=768)
        )


def test_a_matching_sidecar_manifest_names_the_encoder(layout, tmp_path):
    folder = tmp_path / "d"
    save_layout(folder, structured_vectors(N, D))
    _index_of(structured_vectors(N, D), folder / "embeddings.faiss")
    ids_checksum = resolve_index(f"hf-dataset:{folder}", STUB)[1].manifest["ids_checksum"]
    (folder / "rag_loupe_manifest.json").write_text(
        json.dumps({"encoder": STUB.id, "dim": D, "ids_checksum": ids_checksum})
    )
    assert resolve_index(f"hf-dataset:{folder}", STUB)[1].manifest["encoder"] == STUB.id


PASSAGES = [  # (title, text): a question below has its answer in exactly one of them
    (
        "Moby-Dick",
        "Moby-Dick is an 1851 novel by the American writer Herman Melville about the whaling ship Pequod.",
    ),
    (
        "Pride and Prejudice",
        "Pride and Prejudice is an 1813 novel of manners by the English author Jane Austen.",
    ),
    ("Mount Everest", "Mount Everest is Earth's highest mountain above sea level, in the Himalayas."),
    (
        "Photosynthesis",
        "Photosynthesis is the process by which plants turn light, water and carbon dioxide into sugar.",
    ),
    ("Tokyo", "Tokyo is the capital of Japan and its most populous city."),
    (
        "Marie Curie",
        "Marie Curie was a Polish and French physicist and chemist who researched radioactivity.",
    ),
]


def test_ask_retrieves_from_an_hf_dataset_built_with_the_default_encoder(tmp_path):
    from rag_core.config import DEFAULT_ENCODER
    from rag_core.corpus import Passage
    from rag_core.models.sources import pick_device
    from rag_core.retrieval.encoders import load_encoder

    encoder = load_encoder(DEFAULT_ENCODER, None, pick_device("cpu"))
    vecs = encoder.encode_passages([Passage(f"p{i}", t, x) for i, (t, x) in enumerate(PASSAGES)])  # (6, 384)
    ds = datasets.Dataset.from_dict(
        {
            "id": [f"p{i}" for i in range(len(PASSAGES))],
            "title": [t for t, _ in PASSAGES],
            "text": [x for _, x in PASSAGES],
            "embeddings": list(vecs),
        }
    )
    ds.save_to_disk(str(tmp_path / "tiny"))
    ds.add_faiss_index("embeddings", metric_type=faiss.METRIC_INNER_PRODUCT)
    ds.save_faiss_index("embeddings", str(tmp_path / "tiny.faiss"))
    out = run_cli(
        "ask",
        "Who wrote Moby-Dick?",
        "--index",
        f"hf-dataset:{tmp_path / 'tiny'}:{tmp_path / 'tiny.faiss'}",
        "-k",
        "2",
        "--decode",
        "token",
        "--max-new-tokens",
        "6",
        "--json",
    )
    assert out.returncode == 0, out.stderr[-2000:]
    result = json.loads(out.stdout)
    assert result["index"] == "tiny" and [p["rank"] for p in result["passages"]] == [1, 2]
    rows = dict(zip(ds["id"], zip(ds["title"], ds["text"])))
    assert all(rows[p["id"]] == (p["title"], p["text"]) for p in result["passages"])
    assert result["passages"][0]["title"] == "Moby-Dick"
    scores, _ = ds.get_nearest_examples(
        "embeddings", encoder.encode_queries(["Who wrote Moby-Dick?"])[0], k=2
    )
    assert [p["score"] for p in result["passages"]] == pytest.approx(scores.tolist(), abs=1e-6)


def test_a_bad_hf_dataset_spelling_exits_2_with_one_error_line(tmp_path):
    out = run_cli("ask", "Who wrote Moby-Dick?", "--index", f"hf-dataset:{tmp_path / 'missing'}")
    assert out.returncode == 2
    lines = out.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: hf-dataset folder not found"), out.stderr
