"""The one protocol every generator speaks, so decoding never knows which model it drives.

A generator reads K (x, z) pairs as K *rows*. `prepare` runs the one batched forward pass over the K
prompts and returns a state holding, per row, the next-token log-probabilities after the prompt.
Decoding then only `select`s rows (beam reordering, copying a prompt for another hypothesis) and
`advance`s every row by one token; the prompts' key/value caches are reused throughout.
`teacher_force` scores given answers in one pass from a prepared state.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

import torch

from rag_core.config import MAX_QUESTION_CHARS
from rag_core.corpus import Passage


class ForwardCounter:
    """Process-wide count of generator forward passes, so a test can prove that a view-only rerun
    of the app (switching pages, moving a slider over known numbers) makes no model call."""

    count = 0

    @classmethod
    def tick(cls) -> None:
        cls.count += 1


@dataclass
class GenState:
    logprobs: torch.Tensor  # (R, V) log p(next token | x, z_row, prefix_row), float32
    rows: torch.Tensor  # (R,) long: which prepared row (passage) each row reads
    steps: int = 0  # tokens appended since the prompt (the same for every row)
    cache: Any = None  # backend-specific: key/value caches, encoder states, prefixes
    calls: int = field(default=0, compare=False)  # model forward passes made through this state


class Generator(Protocol):
    id: str
    vocab_size: int
    eos_ids: frozenset[int]  # a token in here ends an answer (it is part of the answer)
    forced_bos_id: int | None  # generation config: the first answer token, forced (encoder-decoder only)
    forced_eos_ids: frozenset[int]  # generation config: forced at the length limit (empty: none)

    def prepare(self, question: str, passages: Sequence[Passage] | None) -> GenState:
        """One batched forward of the K prompts; `passages=None` is closed-book (one row)."""

    def prepare_rows(self, rows: Sequence[tuple[str, Passage | None]]) -> GenState:
        """The same forward over rows that may belong to different questions: row r reads
        `rows[r]` = (question, passage), or (question, None) for closed-book. Several questions
        batched this way decode in one loop (`decoding.decode_jobs`)."""

    def select(self, state: GenState, idx: torch.Tensor) -> GenState:
        """A state whose row r is a copy of `state`'s row `idx[r]`."""

    def advance(self, state: GenState, tokens: torch.Tensor) -> GenState:
        """Append `tokens[r]` (R,) to row r; the new state holds the next distributions."""

    def teacher_force(self, state: GenState, answers: torch.Tensor) -> torch.Tensor:
        """Log-probs (R, T, V) of each step of `answers` (R, T), read from a state with no steps yet."""

    def encode_answer(self, text: str) -> list[int]:
        """Token ids of an answer as the generator would produce it, end token included."""

    def decode(self, ids: Sequence[int]) -> str:
        """Answer text of token ids (special and end tokens dropped)."""

    def token_text(self, token_id: int) -> str:
        """One token as a person reads it (leading spaces kept)."""


def forced_ids(generation_config, encoder_decoder: bool) -> tuple[int | None, frozenset[int]]:
    """The forced first and last tokens of a generation config, where transformers applies them:
    `forced_bos_token_id` only after an encoder-decoder's start token, `forced_eos_token_id` at the
    length limit of any model."""
    bos = getattr(generation_config, "forced_bos_token_id", None) if encoder_decoder else None
    eos = getattr(generation_config, "forced_eos_token_id", None)
    eos_set = (
        frozenset()
        if eos is None
        else frozenset([int(eos)] if isinstance(eos, int) else [int(e) for e in eos])
    )
    return (None if bos is None else int(bos)), eos_set


def question_end(text: str, limit: int = MAX_QUESTION_CHARS) -> str:
    """The last `limit` characters of `text`, from the start of a word: a long paste is context
    first and the question last, so the end is what the model must read.

    >>> question_end("Some context. Who wrote it?", 15)
    'Who wrote it?'
    """
    tail = text[-limit:]
    if len(text) > limit and not text[-limit - 1].isspace() and not tail[0].isspace():
        tail = tail[tail.find(" ") + 1 :] if " " in tail else tail  # a partial first word goes
    return tail.lstrip()


def too_long(tokens: int, limit: int, stuffed: int) -> None:
    """Stop a prompt of several passages read together that the generator cannot read whole (a cut
    would drop the question at its end, and leave-one-out would compare different prompts): a
    user error, raised before any forward pass. One passage per prompt never comes near the limit.

    >>> too_long(900, 1024, 1)
    >>> try:
    ...     too_long(1100, 1024, 1)
    ... except ValueError as e:
    ...     str(e).split(":")[0]
    "the passages read together make a prompt of 1100 tokens, more than the generator's 1024"
    """
    if stuffed and tokens > limit:
        raise ValueError(
            f"the passages read together make a prompt of {tokens} tokens, more than the generator's "
            f"{limit}: use a smaller K for the stuffed reading"
        )


def rows_of(question: str, passages: Sequence[Passage] | None) -> list[tuple[str, Passage | None]]:
    """The prompt rows of one question: one per passage, or one closed-book row (`passages=None`)."""
    return [(question, None)] if passages is None else [(question, p) for p in passages]


@dataclass(frozen=True)
class PackedAnswers:
    """N answers laid end to end as the input of one teacher-forced pass: each answer's tokens but
    its last (reading token i predicts token i + 1; the first token's distribution comes from the
    prompt pass), with which answer each input token belongs to and its step in that answer.

    >>> p = PackedAnswers.of([[5, 6, 7], [8], [9, 4]])
    >>> p.tokens.tolist(), p.owner.tolist(), p.steps.tolist()
    ([5, 6, 9], [0, 0, 2], [0, 1, 0])
    >>> p.mask().int().tolist()  # token l may read token m: same answer, m not after l
    [[1, 0, 0], [1, 1, 0], [0, 0, 1]]
    """

    tokens: torch.Tensor  # (L,) long: the input tokens
    owner: torch.Tensor  # (L,) long: the answer each belongs to
    steps: torch.Tensor  # (L,) long: its step within that answer (0 = the answer's first token)

    @classmethod
    def of(cls, answers: Sequence[Sequence[int]]) -> PackedAnswers:
        tokens = [int(t) for a in answers for t in list(a)[:-1]]
        owner = [n for n, a in enumerate(answers) for _ in range(max(len(a) - 1, 0))]
        steps = [i for a in answers for i in range(max(len(a) - 1, 0))]
        return cls(
            torch.tensor(tokens, dtype=torch.long),
            torch.tensor(owner, dtype=torch.long),
            torch.tensor(steps, dtype=torch.long),
        )

    def mask(self) -> torch.Tensor:
        """(L, L) bool: the block-diagonal causal mask (one block per answer)."""
        order = torch.arange(len(self.tokens))  # (L,)
        return (self.owner[:, None] == self.owner[None, :]) & (order[:, None] >= order[None, :])  # (L, L)


def pad_answers(answers: Sequence[Sequence[int]], pad: int) -> tuple[torch.Tensor, torch.Tensor]:
    """Right-pad answers to one length: ids (N, T) and mask (N, T) of real steps."""
    width = max(1, max(len(a) for a in answers))
    ids = torch.full((len(answers), width), pad, dtype=torch.long)  # (N, T)
    mask = torch.zeros((len(answers), width), dtype=torch.bool)  # (N, T)
    for n, a in enumerate(answers):
        ids[n, : len(a)] = torch.tensor(list(a), dtype=torch.long)
        mask[n, : len(a)] = True
    return ids, mask
