"""An answer's conditionals p(y_i|x,z,y_<i) under the K passages, produced or teacher-forced.

`AnswerScores` holds one answer's (K, T) log-probabilities, however they were obtained (decoded,
or forced in one batched pass by `score_texts`); the marginals and the posterior follow from them.

>>> import torch
>>> from rag_core import marginals
>>> lpz = torch.tensor([0.7, 0.3]).log()
>>> round(total_variation(marginals.citation(lpz, torch.tensor([[0.9], [0.2]]).log()), lpz.exp()), 3)
0.213
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import torch

from rag_core import marginals
from rag_core.config import RAG_SEQUENCE, RAG_TOKEN
from rag_core.decoding.decode import score_answers
from rag_core.generators.base import GenState
from rag_core.trace import Candidate, Trace


def total_variation(p: torch.Tensor, q: torch.Tensor) -> float:
    return float(0.5 * (p.double() - q.double()).abs().sum())


@dataclass
class AnswerScores:
    """One answer's conditionals under the K passages, whichever way they were obtained."""

    label: str  # "rag-token", "rag-sequence" (produced answers) or "expected"
    text: str
    token_ids: list[int]
    token_logp: torch.Tensor  # (K, T) log p(y_i|x,z,y_<i); NaN = never scored (fast rescoring)

    def doc_logp(self) -> torch.Tensor:
        return marginals.doc_sequence_logp(self.token_logp)  # (K,)

    def log_p_seq(self, log_pz: torch.Tensor) -> float:
        return float(marginals.rag_sequence(log_pz, self.token_logp))

    def log_p_tok(self, log_pz: torch.Tensor) -> float:
        return float(marginals.rag_token(log_pz, self.token_logp))

    def posterior(self, log_pz: torch.Tensor) -> torch.Tensor:
        return marginals.citation(log_pz, self.token_logp)  # (K,)

    @property
    def complete(self) -> bool:
        return not bool(torch.isnan(self.token_logp).any())

    @classmethod
    def of(cls, c: Candidate) -> AnswerScores:
        return cls(c.decoding, c.answer, list(c.token_ids), c.token_logp.double())


@dataclass
class ForcedAnswers:
    """Answers teacher-forced under the K passages of a trace in one batched pass."""

    items: list[AnswerScores]
    calls: int = 0  # generator forward passes it took (prompt pass included when one was needed)

    def by_label(self, label: str) -> list[AnswerScores]:
        return [a for a in self.items if a.label == label]

    @property
    def expected(self) -> list[AnswerScores]:
        return self.by_label("expected")


def score_texts(gen, trace: Trace, expected: Sequence[str], state0: GenState | None = None) -> ForcedAnswers:
    """Teacher-force the expected answer(s) under the trace's K passages, plus any produced answer
    the trace could not score under every passage (fast rescoring), in one batch.

    `state0`: the prepared prompts of this trace when the caller still holds them; otherwise the K
    prompts are prepared again (one prompt pass) before the teacher-forced pass.
    """
    entries: list[tuple[str, str, list[int]]] = []
    seen: set[tuple[int, ...]] = set()
    for text in expected:
        ids = gen.encode_answer(text)
        if text.strip() and tuple(ids) not in seen:
            seen.add(tuple(ids))
            entries.append(("expected", text.strip(), ids))
    for d in (RAG_TOKEN, RAG_SEQUENCE):
        c = trace.answer(d)
        if c is not None and c.token_ids and torch.isnan(c.token_logp).any():
            entries.append((d, c.answer, list(c.token_ids)))
    if not entries:
        return ForcedAnswers([], 0)
    calls = 0
    if state0 is None:
        state0 = gen.prepare(trace.question, [h.passage for h in trace.hits])
        calls += 1
    lp, mask, _, _ = score_answers(
        gen, state0, [ids for _, _, ids in entries], top_alternatives=1
    )  # (N, K, T)
    items = [
        AnswerScores(label, text, ids, lp[n, :, : len(ids)].double())
        for n, (label, text, ids) in enumerate(entries)
    ]
    return ForcedAnswers(items, calls + 1)


def force_answers(pipe, trace: Trace, expected: Sequence[str]) -> ForcedAnswers:
    """The pipeline-level teacher-forced pass: the trace's K prompts, then the expected answers
    (under the models' lock, like every other use of the shared generator by app sessions)."""
    with pipe.models.lock:
        return score_texts(pipe.models.generator, trace, expected)
