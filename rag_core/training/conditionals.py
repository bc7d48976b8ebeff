"""log p(y_i | x, z, y_<i) of a gold answer under K passages, with gradients: the generator's
teacher-forced pass, written again without `torch.inference_mode` so LoRA adapters can learn.

The prompts and the layout are the generators' own (`rag_prompt`, `rag_input`, the shared few-shot
prefix, left padding whose positions are skipped), so the numbers equal `decoding.score_answers`
on a prepared state; the tests check it for a causal LM and for BART.

>>> import torch
>>> gather_answer(torch.tensor([[[0.1, 0.9], [0.8, 0.2]]], dtype=torch.float64).log(),
...               [1, 0]).exp().tolist()   # (K=1, T=2)
[[0.9, 0.8]]
"""

from __future__ import annotations

from collections.abc import Sequence

import torch

from rag_core.corpus import Passage
from rag_core.generators.causal import CausalGenerator, rag_prefix, rag_prompt
from rag_core.generators.seq2seq import MAX_COMBINED_LENGTH, Seq2SeqGenerator, rag_input
from rag_core.generators.shared_rows import shared_prefix_length
from rag_core.models.sources import TOKENIZER_LOCK


def gather_answer(logp: torch.Tensor, answer: Sequence[int]) -> torch.Tensor:
    """Each step's log-prob of the answer's own token: (K, T, V) -> (K, T)."""
    ids = (
        torch.tensor(list(answer), device=logp.device).view(1, -1, 1).expand(logp.shape[0], -1, 1)
    )  # (K, T, 1)
    return logp.gather(-1, ids).squeeze(-1)  # (K, T)


def answer_token_logp(gen, question: str, passages: Sequence[Passage], answer: Sequence[int]) -> torch.Tensor:
    """(K, T) float32 on the CPU; differentiable w.r.t. the generator's weights when grad is on."""
    if isinstance(gen, CausalGenerator):
        return _causal(gen, question, passages, list(answer)).cpu()
    if isinstance(gen, Seq2SeqGenerator):
        return _seq2seq(gen, question, passages, list(answer)).cpu()
    raise ValueError(f"cannot train the generator {gen.id!r}: not a causal or seq2seq transformers model")


def _seq2seq(
    gen: Seq2SeqGenerator, question: str, passages: Sequence[Passage], answer: list[int]
) -> torch.Tensor:
    with TOKENIZER_LOCK:
        enc = gen.tokenizer(
            [rag_input(question, p) for p in passages],
            return_tensors="pt",
            padding=True,
            truncation=True,
            max_length=MAX_COMBINED_LENGTH,
        ).to(gen.device)
    k = enc["input_ids"].shape[0]
    # decoder input = start token + answer shifted right, as transformers' shift_tokens_right does
    dec = torch.tensor([[gen.start_id] + answer[:-1]], device=gen.device).expand(k, -1)  # (K, T)
    out = gen.model(
        input_ids=enc["input_ids"],
        attention_mask=enc["attention_mask"],
        decoder_input_ids=dec,
        use_cache=False,
    )
    return gather_answer(torch.log_softmax(out.logits.float(), dim=-1), answer)  # (K, T)


def _prefix_kv(gen: CausalGenerator, ids: list[int]) -> tuple:
    """Keys/values of the shared few-shot prefix, one row (with a graph: LoRA changes them too)."""
    from transformers import DynamicCache

    t = torch.tensor([ids], device=gen.device)  # (1, n)
    out = gen.model(
        input_ids=t,
        attention_mask=torch.ones_like(t),
        position_ids=torch.arange(len(ids), device=gen.device).unsqueeze(0),
        cache=DynamicCache(),
        use_cache=True,
        logits_to_keep=1,
    )
    return tuple((layer.keys, layer.values) for layer in out.cache.layers)  # (1, H, n, D) each


def _causal(
    gen: CausalGenerator, question: str, passages: Sequence[Passage], answer: list[int]
) -> torch.Tensor:
    from transformers import DynamicCache

    with TOKENIZER_LOCK:
        prefix = gen.tokenizer.encode(rag_prefix(gen.prompt_style), add_special_tokens=False)
        rows = [
            gen.tokenizer.encode(rag_prompt(question, p, gen.prompt_style), add_special_tokens=False)
            for p in passages
        ]
    n = shared_prefix_length(prefix, rows)
    k, s, t = len(rows), max(len(r) - n for r in rows), len(answer)
    # The inference layout: [shared prefix][left padding][own tokens], then the answer but its last
    # token; positions skip the padding, so every row reads what it would read alone, and the last
    # t columns predict the t answer tokens of every row.
    own = torch.full((k, s), gen.pad_id, dtype=torch.long)  # (K, S)
    own_mask = torch.zeros((k, s), dtype=torch.long)  # (K, S)
    for i, r in enumerate(rows):
        own[i, s - (len(r) - n) :] = torch.tensor(r[n:])
        own_mask[i, s - (len(r) - n) :] = 1
    tail = torch.tensor([answer[:-1]], dtype=torch.long).expand(k, -1)  # (K, T-1)
    own_pos = n + (own_mask.cumsum(-1) - 1).clamp(min=0)  # (K, S)
    positions = torch.cat([own_pos, own_pos[:, -1:] + 1 + torch.arange(t - 1)], dim=1)  # (K, S+T-1)
    attn = torch.cat(
        [torch.ones((k, n), dtype=torch.long), own_mask, torch.ones_like(tail)], dim=1
    )  # (K, n+S+T-1)
    kv = (
        [(key.expand(k, -1, -1, -1), val.expand(k, -1, -1, -1)) for key, val in _prefix_kv(gen, prefix[:n])]
        if n
        else []
    )
    out = gen.model(
        input_ids=torch.cat([own, tail], dim=1).to(gen.device),
        attention_mask=attn.to(gen.device),
        position_ids=positions.to(gen.device),
        cache=DynamicCache(ddp_cache_data=kv) if kv else DynamicCache(),
        use_cache=True,
        logits_to_keep=t,
    )
    return gather_answer(torch.log_softmax(out.logits.float(), dim=-1), answer)  # (K, T)
