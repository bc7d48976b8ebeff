"""Retrieval: encode the question, search the index, keep the top K with their raw scores.

The prior p(z|x) = softmax(scale · s) is computed from these scores by `marginals.log_prior`; the
scale belongs to the encoder (20 for MiniLM's cosine scores, 1 for DPR) and the user may change it.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from rag_core.retrieval.encoders import Encoder
from rag_core.retrieval.index import PassageIndex
from rag_core.trace import Hit


@dataclass
class Retriever:
    encoder: Encoder
    index: PassageIndex
    name: str  # what the trace's "index" column says

    @property
    def default_scale(self) -> float:
        return float(self.encoder.default_scale)

    def query_vector(self, question: str) -> np.ndarray:
        return self.encoder.encode_queries([question])  # (1, D)

    def retrieve(self, question: str, k: int, query_vector: np.ndarray | None = None) -> list[Hit]:
        q = self.query_vector(question) if query_vector is None else query_vector  # (1, D)
        return self.search_vector(q, k)[0]

    def search_vector(self, q: np.ndarray, k: int) -> tuple[list[Hit], np.ndarray]:
        """The top k for a query vector (1, D): the hits, best first, and their index rows (k,)."""
        scores, rows = self.index.search(q, k)  # (1, k), (1, k)
        keep = rows[0] >= 0  # FAISS pads with -1 when the index holds fewer than k passages
        hits = [
            Hit(r + 1, self.index.passages[int(i)], float(s))
            for r, (s, i) in enumerate(zip(scores[0][keep], rows[0][keep]))
        ]
        return hits, rows[0][keep].astype(np.int64)
