"""Rows that begin as one prepared row does, read from its keys/values: the causal generator's
exact leave-one-passage-out in one packed forward (`CausalGenerator.score_after`), and the shared
token prefix of prompts (`shared_prefix_length`).

Prompt z of leave-one-out begins as the stuffed prompt does, up to passage z. Each row reads those
tokens from the stuffed prompt's keys/values (the rows' shared prefix, one row, never copied:
`shared_prefix.py`) and computes only the rest; the rows' remainders and the answer after each sit
side by side in one sequence, unpadded, behind a block-diagonal mask, each token at the position it
has in its row read alone.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import torch

from rag_core.generators.base import GenState

# Rows packed side by side in one forward, at most this many tokens: its attention scores are
# H × L × (p + L), so a long pack (its length grows with K²) is split into several forwards.
PACK_TOKENS = 2048


def shared_prefix_length(prefix: Sequence[int], rows: Sequence[Sequence[int]]) -> int:
    """How many leading tokens of `prefix` every row starts with, leaving each row >= 1 token of its own.

    Tokenising the prefix alone may split its last characters differently from the full prompt, so
    the shared part is measured on the tokens, never assumed from the text.

    >>> shared_prefix_length([1, 2, 3], [[1, 2, 3, 4], [1, 2, 9, 9]])
    2
    >>> shared_prefix_length([1, 2, 3], [[1, 2, 3]])
    2
    """
    n = min(len(prefix), *(len(r) - 1 for r in rows))
    for row in rows:
        i = 0
        while i < n and row[i] == prefix[i]:
            i += 1
        n = i
    return max(n, 0)


def score_rows_after(
    forward: Callable,
    base_state: GenState,
    base_ids: list[int],
    row_ids: list[list[int]],
    answer: Sequence[int],
) -> torch.Tensor | None:
    """Teacher-forced log p(y_i | row, y_<i) of `answer` under each row, (R, T): `forward` the
    generator's forward (its `_forward`), `base_state` the one prepared row of `base_ids`, `row_ids`
    the rows' prompt tokens. None when no row shares more than the few-shot part with the base."""
    kv = base_state.cache["kv"]  # per layer (1, H, L - n, D): the base's own tokens, no padding
    if kv[0][0].shape[0] != 1 or int(base_state.cache["next_pos"][0]) != len(base_ids):
        raise ValueError("the base state is not the prepared prompt of `base` (one row)")
    n = len(base_ids) - kv[0][0].shape[2]  # the few-shot part the base read from the shared cache
    shared = [shared_prefix_length(base_ids, [r]) for r in row_ids]  # each row keeps >= 1 own token
    p = max(shared)
    if p <= n or not answer:
        return None
    head = base_state.cache["prefix"] or [None] * len(kv)
    prefix = tuple(  # per layer (1, H, p, D): the few-shot part, then the base's own tokens up to p
        (k[:, :, : p - n], v[:, :, : p - n])
        if h is None
        else (torch.cat([h[0], k[:, :, : p - n]], 2), torch.cat([h[1], v[:, :, : p - n]], 2))
        for (k, v), h in zip(kv, head)
    )
    segments = [ids[m:] + list(answer[:-1]) for ids, m in zip(row_ids, shared)]  # rest, then y_<T
    groups: list[list[int]] = [[]]  # rows packed together, at most PACK_TOKENS a forward
    for i, seg in enumerate(segments):
        if groups[-1] and sum(len(segments[j]) for j in groups[-1]) + len(seg) > PACK_TOKENS:
            groups.append([])
        groups[-1].append(i)
    return torch.cat(
        [
            score_packed(
                forward,
                prefix,
                [segments[i] for i in g],
                [len(row_ids[i]) - shared[i] for i in g],
                [shared[i] for i in g],
                answer,
            )
            for g in groups
        ]
    )  # (R, T)


def score_packed(
    forward: Callable,
    prefix: tuple,
    segments: list[list[int]],
    rests: list[int],
    shared: list[int],
    answer: Sequence[int],
) -> torch.Tensor:
    """`score_after`'s one forward: rows' segments (their own prompt tokens, `rests` of them,
    then the answer but its last token) side by side after the shared prefix (p columns, row i
    reading its first `shared[i]`): (R, T) log p of the answer's tokens."""
    p, t = prefix[0][0].shape[2], len(answer)
    total = sum(map(len, segments))
    mask = torch.zeros((total, p + total), dtype=torch.bool)  # (L, p + L)
    positions, keep, start = [], [], 0
    for seg, rest, m in zip(segments, rests, shared):
        end = start + len(seg)
        mask[start:end, :m] = True  # (len, m): the shared columns this row reads
        causal = torch.ones(len(seg), len(seg), dtype=torch.bool).tril()  # (len, len)
        mask[start:end, p + start : p + end] = causal  # the row's own earlier tokens
        positions += range(m, m + len(seg))  # where each token sits in the row read alone
        first = start + rest - 1  # the row's last prompt token predicts y_0
        keep += range(first, first + t)
        start = end
    packed = torch.tensor([sum(segments, [])])  # (1, L)
    logp, _ = forward(
        packed, mask[None, None], torch.tensor([positions]), None, prefix=prefix, keep=torch.tensor(keep)
    )  # (1, R·T, V)
    picked = logp[0].gather(-1, torch.tensor(list(answer) * len(segments)).unsqueeze(-1))  # (R·T, 1)
    return picked.view(len(segments), t)  # (R, T)
