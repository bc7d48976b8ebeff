"""q(x) with gradients: the differentiable twin of the encoders' inference pass, and its saved folder.

`encoders` computes q(x) under `torch.inference_mode` (no graph, numpy out); training needs the same
vector as a tensor that remembers how it was made. Both backends are covered: mean pooling +
L2 normalisation (the default MiniLM) and DPR's pooler output. The tests check that this vector
equals `encode_queries` for both, so the two passes can never drift apart unnoticed.

Only the query tower trains: the passage vectors are the index's, frozen, as in the paper. (With
the default single-tower MiniLM the folder saved here holds the tuned query tower alone; the index
stays the one built with the base encoder.)
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import torch

from rag_core.models.sources import TOKENIZER_LOCK
from rag_core.retrieval.encoders import DPREncoder, Encoder, MeanPoolEncoder


def query_model(encoder: Encoder) -> torch.nn.Module:
    """The module that computes q(x): the one the query-encoder training updates."""
    if isinstance(encoder, MeanPoolEncoder):
        return encoder.model
    if isinstance(encoder, DPREncoder) and encoder.question_model is not None:
        return encoder.question_model
    raise ValueError(f"cannot train the query encoder {encoder.id!r}: not a mean-pooling or DPR encoder")


def _tokenizer(encoder: Encoder):
    return encoder.tokenizer if isinstance(encoder, MeanPoolEncoder) else encoder.question_tokenizer


def query_tensor(encoder: Encoder, texts: Sequence[str]) -> torch.Tensor:
    """q(x) for each text, float32 on the encoder's device, with a graph when grad is on: (N, D)."""
    model = query_model(encoder)
    with TOKENIZER_LOCK:  # fast tokenizers must not be used from two threads at once
        enc = _tokenizer(encoder)(
            list(texts), padding=True, truncation=True, max_length=encoder.max_length, return_tensors="pt"
        ).to(encoder.device)
    if isinstance(encoder, DPREncoder):
        return model(**enc).pooler_output.float()  # (N, D)
    hidden = model(**enc).last_hidden_state  # (N, L, D)
    mask = enc["attention_mask"].unsqueeze(-1).to(hidden.dtype)  # (N, L, 1)
    pooled = (hidden * mask).sum(1) / mask.sum(1).clamp(min=1e-9)  # (N, D)
    return torch.nn.functional.normalize(pooled.float(), dim=-1)  # (N, D)


def save_query_encoder(encoder: Encoder, folder: Path) -> None:
    """A folder that `--question-encoder DIR` loads: the model and its tokenizer."""
    query_model(encoder).save_pretrained(folder)
    _tokenizer(encoder).save_pretrained(folder)
