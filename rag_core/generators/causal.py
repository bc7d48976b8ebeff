"""A causal LM generator (default: SmolLM2-135M-Instruct) reading a few-shot prompt per passage.

The K prompts are left-padded into one batch so every row ends at the same position; positions are
counted from each row's first real token, so padding changes nothing. The prompt forward fills a
key/value cache that decoding and rescoring reuse: a new token costs one position per row.

The few-shot prompt teaches the small model to copy a short span from the passage. The closed-book
prompt has the same shape without passages, so "what the model knows by itself" is comparable.
"""
from __future__ import annotations

import re
from typing import Sequence

import torch

from ..corpus import Passage
from ..sources import TOKENIZER_LOCK
from .base import ForwardCounter, GenState

# Worked examples the prompt shows before the real question. Written for this prompt; none of them
# is about a question in the shipped dev set.
FEW_SHOT = [
    ("Mount Kilimanjaro",
     "Mount Kilimanjaro is a dormant volcano in Tanzania. It is the highest mountain in Africa, about 5,895 metres above sea level.",
     "In which country is Mount Kilimanjaro?", "Tanzania"),
    ("The Starry Night",
     "The Starry Night is an oil-on-canvas painting by the Dutch Post-Impressionist painter Vincent van Gogh, painted in June 1889.",
     "Who painted The Starry Night?", "Vincent van Gogh"),
    ("Penicillin",
     "Penicillin was discovered in 1928 by the Scottish scientist Alexander Fleming, who noticed that a mould killed bacteria.",
     "In what year was penicillin discovered?", "1928"),
]
INSTRUCTION = "Answer each question with a short phrase copied from the passage."
CLOSED_INSTRUCTION = "Answer each question with a short phrase."
MAX_PASSAGE_WORDS = 160  # a user passage longer than this is cut in the prompt (ours are 100 words)
MAX_QUESTION_CHARS = 1000


def clean_question(question: str) -> str:
    return re.sub(r"\s+", " ", question).strip()[:MAX_QUESTION_CHARS]


def rag_prompt(question: str, passage: Passage) -> str:
    shots = "".join(f"Passage: {t}: {p}\nQuestion: {q}\nAnswer: {a}\n\n" for t, p, q, a in FEW_SHOT)
    text = " ".join(passage.text.split()[:MAX_PASSAGE_WORDS])
    return f"{INSTRUCTION}\n\n{shots}Passage: {passage.title}: {text}\nQuestion: {clean_question(question)}\nAnswer:"


def closed_book_prompt(question: str) -> str:
    shots = "".join(f"Question: {q}\nAnswer: {a}\n\n" for _, _, q, a in FEW_SHOT)
    return f"{CLOSED_INSTRUCTION}\n\n{shots}Question: {clean_question(question)}\nAnswer:"


def newline_tokens(tokenizer) -> set[int]:
    """Ids of every token whose text contains a line break (byte-level BPE writes it as "Ċ")."""
    vocab = tokenizer.get_vocab()
    found = {i for tok, i in vocab.items() if "Ċ" in tok or "\n" in tok}
    return found or {tokenizer.encode("\n", add_special_tokens=False)[-1]}


class CausalGenerator:
    def __init__(self, model, tokenizer, model_id: str, device: torch.device):
        self.id = model_id
        self.model = model
        self.tokenizer = tokenizer
        self.device = device
        self.vocab_size = int(model.get_output_embeddings().weight.shape[0])
        nl = newline_tokens(tokenizer)
        eos = {tokenizer.eos_token_id} if tokenizer.eos_token_id is not None else set()
        # An answer ends at the end of its line; every token containing a newline ends it.
        self.eos_ids = frozenset(eos | set(nl))
        self.newline_id = tokenizer.encode("\n", add_special_tokens=False)[-1]
        self.pad_id = tokenizer.pad_token_id if tokenizer.pad_token_id is not None else (tokenizer.eos_token_id or 0)

    # -- the forward pass, with our own (immutable) cache: a tuple of (keys, values) per layer
    def _forward(self, input_ids: torch.Tensor, attn: torch.Tensor, positions: torch.Tensor, cache) -> tuple[torch.Tensor, tuple]:
        from transformers import DynamicCache

        ForwardCounter.tick()
        past = DynamicCache(ddp_cache_data=list(cache)) if cache else DynamicCache()
        out = self.model(input_ids=input_ids.to(self.device), attention_mask=attn.to(self.device),
                         position_ids=positions.to(self.device), cache=past, use_cache=True)
        new_cache = tuple((layer.keys, layer.values) for layer in out.cache.layers)
        return torch.log_softmax(out.logits.float(), dim=-1).cpu(), new_cache  # (R, L, V)

    @torch.inference_mode()
    def prepare(self, question: str, passages: Sequence[Passage] | None) -> GenState:
        prompts = [closed_book_prompt(question)] if passages is None else [rag_prompt(question, p) for p in passages]
        with TOKENIZER_LOCK:  # fast tokenizers must not be used from two threads at once
            self.tokenizer.padding_side = "left"
            enc = self.tokenizer(prompts, return_tensors="pt", padding=True, add_special_tokens=False)
        attn = enc["attention_mask"]  # (K, L)
        positions = (attn.cumsum(-1) - 1).clamp(min=0)  # (K, L)
        logp, cache = self._forward(enc["input_ids"], attn, positions, None)  # (K, L, V)
        state_cache = {"kv": cache, "attn": attn, "next_pos": positions[:, -1] + 1}
        return GenState(logp[:, -1], torch.arange(len(prompts)), 0, state_cache, 1)

    def select(self, state: GenState, idx: torch.Tensor) -> GenState:
        dev_idx = idx.to(self.device)
        kv = tuple((k.index_select(0, dev_idx), v.index_select(0, dev_idx)) for k, v in state.cache["kv"])
        cache = {"kv": kv, "attn": state.cache["attn"][idx], "next_pos": state.cache["next_pos"][idx]}
        return GenState(state.logprobs[idx], state.rows[idx], state.steps, cache, state.calls)

    @torch.inference_mode()
    def _extend(self, state: GenState, tokens: torch.Tensor) -> tuple[torch.Tensor, dict]:
        """Feed `tokens` (R, T) after each row's cached context: log-probs (R, T, V), new cache."""
        r, t = tokens.shape
        attn = torch.cat([state.cache["attn"], torch.ones((r, t), dtype=state.cache["attn"].dtype)], dim=1)  # (R, L+T)
        positions = state.cache["next_pos"].unsqueeze(1) + torch.arange(t)  # (R, T)
        logp, kv = self._forward(tokens, attn, positions, state.cache["kv"])  # (R, T, V)
        return logp, {"kv": kv, "attn": attn, "next_pos": positions[:, -1] + 1}

    def advance(self, state: GenState, tokens: torch.Tensor) -> GenState:
        logp, cache = self._extend(state, tokens.view(-1, 1))  # (R, 1, V)
        return GenState(logp[:, -1], state.rows, state.steps + 1, cache, state.calls + 1)

    def teacher_force(self, state: GenState, answers: torch.Tensor) -> torch.Tensor:
        first = state.logprobs.unsqueeze(1)  # (R, 1, V): step 0 comes from the prompt pass
        if answers.shape[1] == 1:
            return first
        rest, _ = self._extend(state, answers[:, :-1])  # (R, T-1, V)
        return torch.cat([first, rest], dim=1)  # (R, T, V)

    def encode_answer(self, text: str) -> list[int]:
        return self.tokenizer.encode(" " + text.strip(), add_special_tokens=False) + [self.newline_id]

    def decode(self, ids: Sequence[int]) -> str:
        ids = [int(i) for i in ids if int(i) not in self.eos_ids]
        return self.tokenizer.decode(ids, skip_special_tokens=True).strip()

    def token_text(self, token_id: int) -> str:
        # a trace shows K x T x A alternative tokens: decode each id once per process
        cache = self.__dict__.setdefault("_token_texts", {})
        tid = int(token_id)
        if tid not in cache:
            cache[tid] = self.tokenizer.decode([tid])
        return cache[tid]
