"""A toy generator: hand-written next-token tables per passage (assets/examples/*.json).

It runs through the same decoding, marginals and trace code as a real model, which is how the worked
examples' numbers (assets/examples) are reproduced exactly. Tokens are words; a table maps a prefix
(the words so far joined by spaces, "" at the start) to next-word probabilities. Mass a table leaves
unassigned goes to a catch-all token "<other>"; after a prefix with no table, the answer ends
("</s>"). Several passages read together (`Stuffed`) read the table written for them under their
joined id ("z1+z2"), else the even mixture of their own tables.

>>> from rag_core.corpus import Passage, Stuffed
>>> g = ToyGenerator({"z1": {"": {"yes": 0.8}}})
>>> s = g.prepare("q?", [Passage("z1", "", "")])
>>> round(s.logprobs[0, g.vocab.index("yes")].exp().item(), 3)
0.8
"""

from __future__ import annotations

from collections.abc import Sequence

import torch

from rag_core.corpus import Passage, Stuffed
from rag_core.generators.base import ForwardCounter, GenState, rows_of

EOS = "</s>"
OTHER = "<other>"


class ToyGenerator:
    def __init__(
        self,
        tables: dict[str, dict[str, dict[str, float]]],
        closed_book: dict[str, dict[str, float]] | None = None,
    ):
        self.id = "toy"
        self.tables = tables
        self.closed_book = closed_book or {}
        words = {w for t in list(tables.values()) + [self.closed_book] for dist in t.values() for w in dist}
        self.vocab = [EOS, OTHER] + sorted(words - {EOS, OTHER})
        self.vocab_size = len(self.vocab)
        self.eos_ids = frozenset({0})
        self.forced_bos_id, self.forced_eos_ids = None, frozenset()  # toy tables force nothing
        self.pad_id = 0
        self._index = {w: i for i, w in enumerate(self.vocab)}

    def _dist(self, table: dict[str, dict[str, float]], prefix: tuple[int, ...]) -> torch.Tensor:
        key = " ".join(self.vocab[t] for t in prefix)
        probs = torch.zeros(self.vocab_size, dtype=torch.float64)  # (V,)
        dist = table.get(key)
        if dist is None:
            probs[0] = 1.0
        else:
            for w, p in dist.items():
                probs[self._index[w]] += p
            probs[1] += max(0.0, 1.0 - float(probs.sum()))
        return torch.log(probs.clamp(min=0))  # (V,) float64: the toy numbers stay exact

    def _logprobs(
        self, tables: list[dict], rows: torch.Tensor, prefixes: list[tuple[int, ...]]
    ) -> torch.Tensor:
        ForwardCounter.tick()
        return torch.stack([self._dist(tables[int(r)], p) for r, p in zip(rows, prefixes)])  # (R, V)

    def prepare(self, question: str, passages: Sequence[Passage] | None) -> GenState:
        return self.prepare_rows(rows_of(question, passages))

    def _table(self, passage: Passage | Stuffed | None) -> dict[str, dict[str, float]]:
        if passage is None:
            return self.closed_book
        if isinstance(passage, Stuffed) and passage.id not in self.tables:
            return mixed_table([self.tables.get(p.id, {}) for p in passage.passages])
        return self.tables.get(passage.id, {})

    def prepare_rows(self, rows: Sequence[tuple[str, Passage | Stuffed | None]]) -> GenState:
        tables = [self._table(p) for _, p in rows]
        rows = torch.arange(len(tables))
        prefixes = [()] * len(tables)
        return GenState(
            self._logprobs(tables, rows, prefixes), rows, 0, {"tables": tables, "prefixes": prefixes}, 1
        )

    def select(self, state: GenState, idx: torch.Tensor) -> GenState:
        prefixes = [state.cache["prefixes"][int(i)] for i in idx]
        cache = {"tables": state.cache["tables"], "prefixes": prefixes}
        return GenState(state.logprobs[idx], state.rows[idx], state.steps, cache, state.calls)

    def advance(self, state: GenState, tokens: torch.Tensor) -> GenState:
        prefixes = [p + (int(t),) for p, t in zip(state.cache["prefixes"], tokens)]
        cache = {"tables": state.cache["tables"], "prefixes": prefixes}
        return GenState(
            self._logprobs(state.cache["tables"], state.rows, prefixes),
            state.rows,
            state.steps + 1,
            cache,
            state.calls + 1,
        )

    def teacher_force(self, state: GenState, answers: torch.Tensor) -> torch.Tensor:
        out = []
        for r, row in enumerate(state.rows):
            steps = [
                self._dist(state.cache["tables"][int(row)], tuple(answers[r, :i].tolist()))
                for i in range(answers.shape[1])
            ]
            out.append(torch.stack(steps))  # (T, V)
        return torch.stack(out)  # (R, T, V)

    def encode_answer(self, text: str) -> list[int]:
        ids = [self._index.get(w, 1) for w in text.split()]
        return ids + [0]

    def decode(self, ids: Sequence[int]) -> str:
        return " ".join(self.vocab[int(i)] for i in ids if int(i) not in self.eos_ids)

    def token_text(self, token_id: int) -> str:
        return self.vocab[int(token_id)]


def mixed_table(tables: list[dict[str, dict[str, float]]]) -> dict[str, dict[str, float]]:
    """The even mixture of next-word tables, prefix by prefix (a table without the prefix ends
    there; mass a table leaves unassigned is its "<other>").

    >>> mixed_table([{"": {"a": 0.5}}, {"": {"b": 1.0}}])
    {'': {'a': 0.25, '<other>': 0.25, 'b': 0.5}}
    """
    out: dict[str, dict[str, float]] = {}
    for key in sorted({k for t in tables for k in t}):
        mix: dict[str, float] = {}
        for t in tables:
            dist = dict(t.get(key, {EOS: 1.0}))
            dist[OTHER] = dist.get(OTHER, 0.0) + max(0.0, 1.0 - sum(dist.values()))
            for w, p in dist.items():
                mix[w] = mix.get(w, 0.0) + p / len(tables)
        out[key] = {w: p for w, p in mix.items() if p > 0}
    return out
