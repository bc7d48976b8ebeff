"""Which sentence of a passage carried the answer: leave one sentence out, exactly.

For an answer y and a passage z split into sentences s_1 … s_S, the generator reads z with each
sentence removed in turn (the title kept), and the answer is teacher-forced under all of them in
one batched pass of S + 1 rows (the whole passage is the first row):

    Δ_j = log p(y | x, z) − log p(y | x, z without s_j)

A large Δ_j: without sentence j the answer becomes much less likely, so s_j supports it. Nothing
is fitted or sampled (ContextCite fits a surrogate to random ablations; here every single
ablation is computed).

Its quality, as ContextCite measures it (`top_k_drop`): remove the k sentences an attribution
ranks highest, together, and see how far log p(y|x,z) falls; a better ranking makes it fall
further. The baseline ranks sentences by the retriever's embedding similarity to the answer.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass, replace

import numpy as np
import torch

from rag_core.corpus import Passage, Stuffed
from rag_core.decoding.decode import score_answers

_BOUNDARY = re.compile(r"(?<=[.!?])[\"')\]]*\s+(?=[\"'(\[]?[A-Z0-9])")


def split_sentences(text: str) -> list[str]:
    """Sentences: a full stop, question or exclamation mark followed by space and a capital or digit.

    >>> split_sentences("Paris is the capital. It lies on the Seine! Is it big? Yes, 2.1 million.")
    ['Paris is the capital.', 'It lies on the Seine!', 'Is it big?', 'Yes, 2.1 million.']
    """
    return [s.strip() for s in _BOUNDARY.split(text.strip()) if s.strip()]


def without(passage: Passage, sentences: Sequence[str], drop: set[int]) -> Passage:
    """The passage with the sentences at positions `drop` removed (its title kept)."""
    return replace(passage, text=" ".join(s for j, s in enumerate(sentences) if j not in drop))


def answer_logp(gen, question: str, passages: list[Passage], answer_ids: list[int]) -> np.ndarray:
    """log p(y | x, z) of one answer under each passage, in one batched pass: (R,)."""
    return rows_logp(gen, [(question, p) for p in passages], answer_ids)


def rows_logp(gen, rows: list[tuple[str, Passage | Stuffed]], answer_ids: list[int]) -> np.ndarray:
    """log p(y | x, context) of one answer under each (question, context) row, one batched pass: (R,)."""
    state = gen.prepare_rows(rows)
    lp, mask, _, _ = score_answers(gen, state, [answer_ids], top_alternatives=1)  # (1, R, T)
    return torch.nan_to_num(lp[0].double(), nan=0.0).sum(-1).numpy()  # (R,)


@dataclass
class SentenceAttribution:
    passage: Passage
    sentences: list[str]
    logp_full: float  # log p(y | x, z)
    delta: list[float]  # Δ_j per sentence

    def ranking(self) -> list[int]:
        """Sentence positions, most supporting first (ties: earlier first)."""
        return sorted(range(len(self.sentences)), key=lambda j: (-self.delta[j], j))

    def rows(self) -> list[dict]:
        order = {j: r + 1 for r, j in enumerate(self.ranking())}
        return [
            {"sentence": j + 1, "text": s, "delta_logp": d, "rank": order[j]}
            for j, (s, d) in enumerate(zip(self.sentences, self.delta))
        ]


def attribute(pipe, question: str, passage: Passage, answer_ids: list[int]) -> SentenceAttribution:
    """Leave-one-sentence-out for one answer and one passage (one batched pass, under the lock)."""
    sentences = split_sentences(passage.text)
    variants = [passage] + [without(passage, sentences, {j}) for j in range(len(sentences))]
    with pipe.models.lock:
        lp = answer_logp(pipe.models.generator, question, variants, answer_ids)  # (S + 1,)
    return SentenceAttribution(passage, sentences, float(lp[0]), [float(lp[0] - x) for x in lp[1:]])


def attribute_stuffed(
    pipe, question: str, passages: Sequence[Passage], z: int, answer_ids: list[int]
) -> SentenceAttribution:
    """Leave-one-sentence-out inside passage `z` of the stuffed reading: the K passages read in one
    prompt, in their order, with one sentence of z removed per row (the whole prompt is the first
    row); Δ_j = log p(y | x, all) − log p(y | x, all with s_j of z removed). One batched pass."""
    passage = passages[z]
    sentences = split_sentences(passage.text)
    variants = [passage] + [without(passage, sentences, {j}) for j in range(len(sentences))]
    rows = [(question, Stuffed((*passages[:z], v, *passages[z + 1 :]))) for v in variants]
    with pipe.models.lock:
        lp = rows_logp(pipe.models.generator, rows, answer_ids)  # (S + 1,)
    return SentenceAttribution(passage, sentences, float(lp[0]), [float(lp[0] - x) for x in lp[1:]])


def similarity_ranking(encoder, sentences: Sequence[str], answer: str) -> list[int]:
    """The baseline: sentences by the retriever's similarity to the answer text, highest first."""
    vecs = encoder.encode_passages([Passage(str(j), "", s) for j, s in enumerate(sentences)])  # (S, D)
    q = encoder.encode_queries([answer])[0]  # (D,)
    sims = vecs @ q  # (S,)
    return sorted(range(len(sentences)), key=lambda j: (-float(sims[j]), j))


def top_k_drop(
    pipe,
    question: str,
    att: SentenceAttribution,
    answer_ids: list[int],
    rankings: dict[str, list[int]],
    ks: Sequence[int] = (1, 3),
) -> dict[str, dict[int, float]]:
    """log p(y|x,z) − log p(y|x, z without its top-k sentences under each ranking), per k; one
    batched pass for every (ranking, k)."""
    keys, variants = [], []
    for name, order in rankings.items():
        for k in ks:
            keys.append((name, k))
            variants.append(without(att.passage, att.sentences, set(order[:k])))
    with pipe.models.lock:
        lp = answer_logp(pipe.models.generator, question, variants, answer_ids)  # (len(keys),)
    out: dict[str, dict[int, float]] = {name: {} for name in rankings}
    for (name, k), x in zip(keys, lp):
        out[name][k] = att.logp_full - float(x)
    return out
