"""Query and passage encoders behind one interface: q(x) and d(z) as float32 numpy rows.

Two backends, chosen from the model config:
- sentence-transformers style (the default all-MiniLM-L6-v2): one BERT for queries and passages,
  mean pooling, L2-normalised, so the inner product is a cosine; its prior uses scale 20.
- DPR: separate question and context encoders, pooler output, no normalisation; scale 1. DPR reads
  a passage as the (title, text) pair.

We run the MiniLM model through transformers directly (mean pooling is four lines) instead of
importing sentence-transformers, whose import alone takes seconds; tests/test_encoder_reference.py
checks both agree.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Protocol

import numpy as np
import torch

from rag_core.config import Progress
from rag_core.corpus import Passage
from rag_core.errors import first_line
from rag_core.models.sources import TOKENIZER_LOCK, ModelSourceError, Source, model_type, resolve


class Encoder(Protocol):
    id: str  # what the manifest records
    dim: int
    default_scale: float

    def encode_queries(self, texts: Sequence[str]) -> np.ndarray: ...

    def encode_passages(
        self, passages: Sequence[Passage], progress: Progress | None = None
    ) -> np.ndarray: ...


def passage_text(p: Passage) -> str:
    """How a single-tower encoder reads a passage: its title, then its text."""
    return f"{p.title}. {p.text}" if p.title else p.text


def _length_sorted_batches(texts: Sequence, batch_size: int, key=len):
    """Batches of similar length (less padding), with the positions to put results back."""
    order = sorted(range(len(texts)), key=lambda i: key(texts[i]))
    for start in range(0, len(order), batch_size):
        yield order[start : start + batch_size]


@dataclass
class MeanPoolEncoder:
    """A sentence-transformers model (Transformer -> mean pooling -> normalise) run directly.

    One tower reads queries and passages, unless `passage_model` is given: a query tower fine-tuned
    against the frozen passage vectors of its base (a training run) reads queries, the base reads
    passages. `id` is then the base's: the passage vectors, and every index built from them, are
    exactly the base encoder's, so nothing is re-encoded."""

    id: str
    model: torch.nn.Module
    tokenizer: object
    device: torch.device
    max_length: int = 256
    batch_size: int = 64
    default_scale: float = 20.0
    normalises: bool = True  # every vector it makes is unit-length (so s(z) is a cosine)
    passage_model: torch.nn.Module | None = (
        None  # a separate passage tower (None: `model` reads passages too)
    )
    passage_tokenizer: object | None = None

    @property
    def dim(self) -> int:
        return int(self.model.config.hidden_size)

    @torch.inference_mode()
    def _encode(
        self, texts: Sequence[str], progress: Progress | None = None, passages: bool = False
    ) -> np.ndarray:
        two = passages and self.passage_model is not None
        model, tokenizer = (
            (self.passage_model, self.passage_tokenizer) if two else (self.model, self.tokenizer)
        )
        out = np.zeros((len(texts), self.dim), dtype=np.float32)
        done = 0
        for idx in _length_sorted_batches(texts, self.batch_size):
            with TOKENIZER_LOCK:
                enc = tokenizer(
                    [texts[i] for i in idx],
                    padding=True,
                    truncation=True,
                    max_length=self.max_length,
                    return_tensors="pt",
                ).to(self.device)
            hidden = model(**enc).last_hidden_state  # (B, L, D)
            mask = enc["attention_mask"].unsqueeze(-1).to(hidden.dtype)  # (B, L, 1)
            pooled = (hidden * mask).sum(1) / mask.sum(1).clamp(min=1e-9)  # (B, D)
            pooled = torch.nn.functional.normalize(pooled.float(), dim=-1)  # (B, D)
            out[idx] = pooled.cpu().numpy()
            done += len(idx)
            if progress:
                progress(f"Encoding passages {done}/{len(texts)}", done / len(texts))
        return out

    def encode_queries(self, texts: Sequence[str]) -> np.ndarray:
        return self._encode(list(texts))

    def encode_passages(self, passages: Sequence[Passage], progress: Progress | None = None) -> np.ndarray:
        return self._encode([passage_text(p) for p in passages], progress, passages=True)


@dataclass
class DPREncoder:
    """DPR: a question encoder and a context encoder (pooler output, inner product, scale 1)."""

    id: str
    question_model: torch.nn.Module | None
    question_tokenizer: object | None
    ctx_model: torch.nn.Module | None
    ctx_tokenizer: object | None
    device: torch.device
    max_length: int = 256
    batch_size: int = 32
    default_scale: float = 1.0
    normalises: bool = False  # pooler output as it is: q's length is part of the score

    @property
    def dim(self) -> int:
        model = self.question_model or self.ctx_model
        return int(model.config.projection_dim or model.config.hidden_size)

    @torch.inference_mode()
    def encode_queries(self, texts: Sequence[str]) -> np.ndarray:
        if self.question_model is None:
            raise ModelSourceError("no question encoder was given")
        with TOKENIZER_LOCK:
            enc = self.question_tokenizer(
                list(texts), padding=True, truncation=True, max_length=self.max_length, return_tensors="pt"
            ).to(self.device)
        return self.question_model(**enc).pooler_output.float().cpu().numpy()  # (N, D)

    @torch.inference_mode()
    def encode_passages(self, passages: Sequence[Passage], progress: Progress | None = None) -> np.ndarray:
        if self.ctx_model is None:
            raise ModelSourceError("no passage (context) encoder was given: use --ctx-encoder")
        out = np.zeros((len(passages), self.dim), dtype=np.float32)
        done = 0
        for idx in _length_sorted_batches(
            passages, self.batch_size, key=lambda p: len(p.text) + len(p.title)
        ):
            batch = [passages[i] for i in idx]
            with TOKENIZER_LOCK:
                enc = self.ctx_tokenizer(
                    [p.title for p in batch],
                    [p.text for p in batch],
                    padding=True,
                    truncation="only_second",
                    max_length=self.max_length,
                    return_tensors="pt",
                ).to(self.device)
            out[idx] = self.ctx_model(**enc).pooler_output.float().cpu().numpy()  # (B, D)
            done += len(idx)
            if progress:
                progress(f"Encoding passages {done}/{len(passages)}", done / len(passages))
        return out


def _load_mean_pool(model_id: str, source: Source, device: torch.device, allow: bool) -> MeanPoolEncoder:
    from transformers import AutoModel, AutoTokenizer

    tok = AutoTokenizer.from_pretrained(source.ref, **source.kwargs(allow))
    model = AutoModel.from_pretrained(source.ref, **source.kwargs(allow)).to(device).eval()
    return MeanPoolEncoder(model_id, model, tok, device)


def _with_passage_tower(
    query: MeanPoolEncoder, ctx_id: str, device: torch.device, allow: bool
) -> MeanPoolEncoder:
    """A mean-pooling query tower with a mean-pooling passage tower of the same width (a tuned
    query encoder and the base it was trained against); keyed by the passage tower's id."""
    c_source = resolve(ctx_id, allow)
    if model_type(c_source, allow) in ("dpr", "rag"):
        raise ModelSourceError("a DPR --ctx-encoder needs a DPR question encoder")
    passages = _load_mean_pool(ctx_id, c_source, device, allow)
    if passages.dim != query.dim:
        raise ModelSourceError(
            f"the passage encoder {ctx_id} makes {passages.dim}-d vectors, the question encoder "
            f"{query.id} {query.dim}-d: they cannot share an index"
        )
    return MeanPoolEncoder(
        ctx_id,
        query.model,
        query.tokenizer,
        device,
        passage_model=passages.model,
        passage_tokenizer=passages.tokenizer,
    )


def _load_dpr_question(source: Source, kind: str, device: torch.device, allow: bool):
    from transformers import AutoTokenizer, DPRQuestionEncoder

    kw = source.kwargs(allow)
    if kind == "rag":  # a RAG checkpoint: its question encoder is a submodule
        from transformers import RagTokenForGeneration

        model = RagTokenForGeneration.from_pretrained(source.ref, **kw).question_encoder
        tok = AutoTokenizer.from_pretrained(source.ref, subfolder="question_encoder_tokenizer", **kw)
    else:
        model = DPRQuestionEncoder.from_pretrained(source.ref, **kw)
        tok = AutoTokenizer.from_pretrained(source.ref, **kw)
    return model.to(device).eval(), tok


def _load_dpr_ctx(source: Source, device: torch.device, allow: bool):
    from transformers import AutoTokenizer, DPRContextEncoder

    kw = source.kwargs(allow)
    return DPRContextEncoder.from_pretrained(source.ref, **kw).to(
        device
    ).eval(), AutoTokenizer.from_pretrained(source.ref, **kw)


def load_encoder(
    question_id: str, ctx_id: str | None, device: torch.device, allow_downloads: bool = False
) -> Encoder:
    """Pick the backend from the model config: DPR (or a RAG checkpoint) vs mean pooling."""
    q_source = resolve(question_id, allow_downloads)
    q_kind = model_type(q_source, allow_downloads)
    if q_kind in ("dpr", "rag"):
        try:
            q_model, q_tok = _load_dpr_question(q_source, q_kind, device, allow_downloads)
            c_model = c_tok = None
            if ctx_id:
                c_model, c_tok = _load_dpr_ctx(resolve(ctx_id, allow_downloads), device, allow_downloads)
        except OSError as e:
            raise ModelSourceError(f"cannot load the DPR encoders: {first_line(e)}") from None
        return DPREncoder(f"dpr:{question_id}|{ctx_id}", q_model, q_tok, c_model, c_tok, device)
    try:
        encoder = _load_mean_pool(question_id, q_source, device, allow_downloads)
        if ctx_id and ctx_id != question_id:
            return _with_passage_tower(encoder, ctx_id, device, allow_downloads)
        return encoder
    except OSError as e:
        raise ModelSourceError(f"cannot load the encoder {question_id}: {first_line(e)}") from None
