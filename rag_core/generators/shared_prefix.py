"""Attention over a few-shot prefix that every row shares and no row copies.

Every RAG prompt of the causal generator starts with the same few-shot part (~80% of its tokens).
A plain key/value cache holds it once per row, and each forward appends to that cache by
concatenation: every decoding step copied each row's ~30 MB of keys and values (a third of a
question's time on a CPU). Here a layer's keys/values come in two parts:

- the prefix, (1, H_kv, n, D), computed once per process and only ever read;
- each row's own tokens after it, (R, H_kv, m, D), the only part a step appends to or a beam
  reorders.

Attention reads both without joining them: one matrix product per key/value head against the
prefix (every row, head group and query position stacked as its rows) and one batched product per
row against its own part; the scores meet in one softmax, so each query sees exactly the keys a
joined cache would give it.

The attention is installed as a named implementation; a call without a prefix (`shared_prefix`
not passed) is transformers' own SDPA attention, so plain forwards stay the reference.
"""

from __future__ import annotations

import torch

NAME = "rag_loupe_shared_prefix"


def shared_prefix_attention(
    module, query, key, value, attention_mask, scaling=None, dropout=0.0, shared_prefix=None, **kwargs
):
    """query (R, H, T, D); key/value (R, H_kv, m, D), the rows' own tokens (this step's included);
    `shared_prefix`: per layer (keys, values), each (1, H_kv, n, D); attention_mask: a 4-D boolean
    mask (R, 1, T, n + m), True where a query may look. Returns (R, T, H, D), as SDPA does."""
    if shared_prefix is None:
        from transformers.integrations.sdpa_attention import sdpa_attention_forward

        return sdpa_attention_forward(
            module, query, key, value, attention_mask, dropout=dropout, scaling=scaling, **kwargs
        )
    pk, pv = shared_prefix[module.layer_idx]  # (1, Hkv, n, D) each
    r, h, t, d = query.shape
    hkv, n = pk.shape[1], pk.shape[2]
    g = h // hkv  # query heads per key/value head (transformers repeats each kv head g times in a row)
    q = (query * (scaling if scaling is not None else d**-0.5)).reshape(r, hkv, g * t, d)  # (R, Hkv, gT, D)
    # against the prefix: every row's queries of one kv head are the rows of one matrix product
    q_stack = q.transpose(0, 1).reshape(hkv, r * g * t, d)  # (Hkv, R·gT, D)
    s_prefix = torch.bmm(q_stack, pk[0].transpose(1, 2))  # (Hkv, R·gT, n)
    s_prefix = s_prefix.view(hkv, r, g * t, n).transpose(0, 1)  # (R, Hkv, gT, n)
    s_own = torch.matmul(q, key.transpose(2, 3))  # (R, Hkv, gT, m)
    scores = torch.cat([s_prefix, s_own], dim=-1).view(r, hkv, g, t, -1)  # (R, Hkv, g, T, n+m)
    visible = attention_mask.view(r, 1, 1, t, -1)  # (R, 1, 1, T, n+m)
    # a fully hidden query row (a left-padding position) gets finite weights, never NaN
    scores = scores.masked_fill(~visible, torch.finfo(scores.dtype).min)
    w = torch.softmax(scores, dim=-1).view(r, hkv, g * t, -1)  # (R, Hkv, gT, n+m)
    w_prefix = w[..., :n].transpose(0, 1).reshape(hkv, r * g * t, n)  # (Hkv, R·gT, n)
    out = torch.bmm(w_prefix, pv[0]).view(hkv, r, g * t, d).transpose(0, 1)  # (R, Hkv, gT, D)
    out = out + torch.matmul(w[..., n:], value)  # (R, Hkv, gT, D)
    return out.reshape(r, h, t, d).transpose(1, 2).contiguous(), None  # (R, T, H, D)


def install(model) -> None:
    """Register the attention (once per process) and make `model` use it."""
    from transformers import AttentionInterface
    from transformers.masking_utils import AttentionMaskInterface, sdpa_mask

    AttentionInterface.register(NAME, shared_prefix_attention)
    AttentionMaskInterface.register(NAME, sdpa_mask)  # plain calls build SDPA's masks
    model.set_attn_implementation(NAME)


def causal_mask(visible: torch.Tensor, new: int) -> torch.Tensor:
    """The 4-D mask of a forward of `new` tokens after a cache: visible (R, L) says which of the L
    key columns (cache, then the new tokens) are real; a new token also sees none after itself.

    >>> causal_mask(torch.tensor([[1, 0, 1, 1]]), 2)[0, 0].int().tolist()
    [[1, 0, 1, 0], [1, 0, 1, 1]]
    """
    r, l = visible.shape
    past = l - new
    cols = torch.arange(l)  # (L,)
    rows = past + torch.arange(new)  # (T,)
    causal = cols[None, :] <= rows[:, None]  # (T, L)
    return visible.bool()[:, None, None, :] & causal[None, None]  # (R, 1, T, L)


def as_cache(own: tuple | None):
    """A transformers DynamicCache holding `own` (per layer (keys, values)) as they are: building one
    from data concatenates each tensor onto an empty one, a full copy."""
    from transformers import DynamicCache
    from transformers.cache_utils import DynamicLayer

    cache = DynamicCache()
    if own:
        cache.layers = []
        for k, v in own:
            layer = DynamicLayer()
            layer.lazy_initialization(k, v)
            layer.keys, layer.values = k, v
            cache.layers.append(layer)
    return cache
