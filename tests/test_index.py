import json

import numpy as np
import pytest

from rag_core.corpus import Passage
from rag_core.retrieval.index import HNSW, IndexLoadError, PassageIndex


def structured(n, d=64, latent=12, seed=0):
    """Unit vectors near a low-dimensional subspace, the shape real embeddings have.

    Isotropic random vectors have no neighbourhoods to find and make any graph index look broken.
    """
    rng = np.random.default_rng(seed)
    basis = np.random.default_rng(123).normal(size=(latent, d))  # shared by corpus and queries
    x = rng.normal(size=(n, latent)) @ basis + 0.3 * rng.normal(size=(n, d))
    return (x / np.linalg.norm(x, axis=1, keepdims=True)).astype("float32")


def passages(n):
    return [Passage(f"p{i}", f"T{i}", f"text {i}") for i in range(n)]


def test_save_load_round_trip(tmp_path):
    x = structured(200)
    idx = PassageIndex.build(x, passages(200), encoder_id="enc-a")
    idx.save(tmp_path / "ix")
    back = PassageIndex.load(tmp_path / "ix", encoder_id="enc-a", dim=64)
    q = structured(5, seed=1)
    s1, r1 = idx.search(q, 10)
    s2, r2 = back.search(q, 10)
    assert (r1 == r2).all() and np.allclose(s1, s2)
    assert [p.id for p in back.passages] == [p.id for p in idx.passages]
    assert back.manifest["count"] == 200 and back.manifest["encoder"] == "enc-a"


def test_manifest_mismatches_are_clear_errors(tmp_path):
    PassageIndex.build(structured(20), passages(20), encoder_id="enc-a").save(tmp_path / "ix")
    with pytest.raises(IndexLoadError, match="built with encoder 'enc-a'"):
        PassageIndex.load(tmp_path / "ix", encoder_id="enc-b")
    with pytest.raises(IndexLoadError, match="dimension"):
        PassageIndex.load(tmp_path / "ix", encoder_id="enc-a", dim=384)
    # a passages file edited by hand no longer matches the id checksum
    lines = (tmp_path / "ix" / "passages.jsonl").read_text().splitlines()
    lines[0] = json.dumps({"id": "other", "title": "x", "text": "y"})
    (tmp_path / "ix" / "passages.jsonl").write_text("\n".join(lines) + "\n")
    with pytest.raises(IndexLoadError, match="checksum"):
        PassageIndex.load(tmp_path / "ix")


def test_corrupt_and_missing_files(tmp_path):
    PassageIndex.build(structured(20), passages(20), encoder_id="e").save(tmp_path / "ix")
    (tmp_path / "ix" / "index.faiss").write_bytes(b"not an index")
    with pytest.raises(IndexLoadError, match="corrupt"):
        PassageIndex.load(tmp_path / "ix")
    (tmp_path / "ix" / "manifest.json").unlink()
    with pytest.raises(IndexLoadError, match="missing manifest.json"):
        PassageIndex.load(tmp_path / "ix")
    with pytest.raises(IndexLoadError, match="not found"):
        PassageIndex.load(tmp_path / "nowhere")


def test_hnsw_recall_against_flat_on_structured_vectors():
    x = structured(20000, d=64)
    q = structured(200, d=64, seed=7)
    flat = PassageIndex.build(x, passages(len(x)), encoder_id="e")
    hnsw = PassageIndex.build(x, passages(len(x)), encoder_id="e", factory=HNSW)
    _, exact = flat.search(q, 10)
    _, approx = hnsw.search(q, 10)
    recall = np.mean([len(set(a) & set(e)) / 10 for a, e in zip(approx, exact)])
    assert recall >= 0.95


def test_save_replaces_atomically(tmp_path):
    PassageIndex.build(structured(10), passages(10), encoder_id="e").save(tmp_path / "ix")
    PassageIndex.build(structured(30), passages(30), encoder_id="e").save(tmp_path / "ix")
    assert len(PassageIndex.load(tmp_path / "ix")) == 30
    assert [p.name for p in tmp_path.iterdir()] == ["ix"]  # no temp or old folders left behind
