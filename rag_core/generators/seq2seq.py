"""A seq2seq generator (BART, as in the paper) reading `title / text // question` per passage.

The input format is the one transformers' RagRetriever builds for the rag checkpoints
(`title + " / " + text + " // " + question`, double spaces collapsed, at most 300 tokens). The
encoder runs once over the K inputs; decoding reuses its states and re-reads only the short
decoder prefix.
"""

from __future__ import annotations

from collections.abc import Sequence

import torch

from rag_core.corpus import Passage, Stuffed
from rag_core.generators.base import ForwardCounter, GenState, forced_ids, rows_of, too_long
from rag_core.models.sources import TOKENIZER_LOCK

TITLE_SEP = " / "
DOC_SEP = " // "
MAX_COMBINED_LENGTH = 300
MAX_STUFFED_LENGTH = 1024  # several passages in one input: up to BART's position limit


def rag_input(question: str, passage: Passage | Stuffed | None) -> str:
    """`title / text // question`; several passages read together (`Stuffed`) are each written as
    one is, joined by the same separator: `t1 / x1 // t2 / x2 // question`.

    >>> rag_input("Who?", Stuffed((Passage("a", '"A"', "x"), Passage("b", "B", "y"))))
    'A / x // B / y // Who?'
    """
    if passage is None:
        return question
    parts = passage.passages if isinstance(passage, Stuffed) else (passage,)
    # RagRetriever strips the quotes DPR's TSV files carry
    docs = [p.title.strip('"') + TITLE_SEP + p.text + DOC_SEP for p in parts]
    return ("".join(docs) + question).replace("  ", " ")


class Seq2SeqGenerator:
    def __init__(self, model, tokenizer, model_id: str, device: torch.device):
        self.id = model_id
        self.model = model
        self.tokenizer = tokenizer
        self.device = device
        self.vocab_size = int(model.config.vocab_size)
        # generate() reads the start token from the generation config first, as we do
        start = getattr(model.generation_config, "decoder_start_token_id", None)
        self.start_id = int(start if start is not None else model.config.decoder_start_token_id)
        self.eos_ids = frozenset({int(model.config.eos_token_id)})
        self.pad_id = int(model.config.pad_token_id if model.config.pad_token_id is not None else 0)
        self.forced_bos_id, self.forced_eos_ids = forced_ids(model.generation_config, encoder_decoder=True)
        self.max_positions = int(getattr(model.config, "max_position_embeddings", MAX_STUFFED_LENGTH))

    def prepare(self, question: str, passages: Sequence[Passage] | None) -> GenState:
        return self.prepare_rows(rows_of(question, passages))

    @torch.inference_mode()
    def prepare_rows(self, rows: Sequence[tuple[str, Passage | Stuffed | None]]) -> GenState:
        texts = [rag_input(q, p) for q, p in rows]
        stuffed = sum(isinstance(p, Stuffed) for _, p in rows)
        limit = min(MAX_STUFFED_LENGTH, self.max_positions) if stuffed else MAX_COMBINED_LENGTH
        with TOKENIZER_LOCK:  # fast tokenizers must not be used from two threads at once
            if stuffed:  # never cut: the question is at the end of the stuffed input
                too_long(max(len(t) for t in self.tokenizer(texts)["input_ids"]), limit, stuffed)
            enc = self.tokenizer(texts, return_tensors="pt", padding=True, truncation=True, max_length=limit)
        mask = enc["attention_mask"].to(self.device)  # (K, L)
        ForwardCounter.tick()
        hidden = self.model.get_encoder()(
            input_ids=enc["input_ids"].to(self.device), attention_mask=mask
        ).last_hidden_state  # (K, L, H)
        prefix = torch.full((len(texts), 1), self.start_id, dtype=torch.long)  # (K, 1)
        cache = {"hidden": hidden, "mask": mask, "prefix": prefix}
        return GenState(self._decode(cache, prefix)[:, -1], torch.arange(len(texts)), 0, cache, 1)

    @torch.inference_mode()
    def _decode(self, cache: dict, decoder_ids: torch.Tensor) -> torch.Tensor:
        from transformers.modeling_outputs import BaseModelOutput

        ForwardCounter.tick()
        out = self.model(
            encoder_outputs=BaseModelOutput(last_hidden_state=cache["hidden"]),
            attention_mask=cache["mask"],
            decoder_input_ids=decoder_ids.to(self.device),
            use_cache=False,
        )
        return torch.log_softmax(out.logits.float(), dim=-1).cpu()  # (R, T, V)

    def select(self, state: GenState, idx: torch.Tensor) -> GenState:
        d = idx.to(self.device)
        cache = {
            "hidden": state.cache["hidden"].index_select(0, d),
            "mask": state.cache["mask"].index_select(0, d),
            "prefix": state.cache["prefix"][idx],
        }
        return GenState(state.logprobs[idx], state.rows[idx], state.steps, cache, state.calls)

    def advance(self, state: GenState, tokens: torch.Tensor) -> GenState:
        prefix = torch.cat([state.cache["prefix"], tokens.view(-1, 1)], dim=1)  # (R, t+1)
        cache = dict(state.cache, prefix=prefix)
        return GenState(
            self._decode(cache, prefix)[:, -1], state.rows, state.steps + 1, cache, state.calls + 1
        )

    def teacher_force(self, state: GenState, answers: torch.Tensor) -> torch.Tensor:
        # decoder input = start token + answer shifted right, as transformers' shift_tokens_right does
        dec = torch.cat([state.cache["prefix"], answers[:, :-1]], dim=1)  # (R, T)
        return self._decode(state.cache, dec)  # (R, T, V)

    def encode_answer(self, text: str) -> list[int]:
        return self.tokenizer(text.strip())["input_ids"]

    def decode(self, ids: Sequence[int]) -> str:
        return self.tokenizer.decode([int(i) for i in ids], skip_special_tokens=True).strip()

    def token_text(self, token_id: int) -> str:
        # convert_tokens_to_string undoes byte-level BPE ("Ã¼" -> "ü", "Ġ" -> " ") for one token
        token = self.tokenizer.convert_ids_to_tokens(int(token_id))
        if token is None:  # an id the model has but the tokenizer lacks (padded embedding rows)
            return f"<{int(token_id)}>"
        return self.tokenizer.convert_tokens_to_string([token])
