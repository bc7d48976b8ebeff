"""The stuffed reading: the K retrieved passages read together in one prompt, in rank order, as
almost every deployed RAG system reads them, decoded by the same search and settings as the two
marginals; and exactly what each passage is worth to its answer.

There is no mixture here: one prompt row reads every passage (`corpus.Stuffed`, formatted by the
generator as it formats one passage, one after the other), so the answer is the plain search on
that row, what `generate()` gives for the same prompt. Its probability is log p(y | x, z_1..z_K).

**Leave-one-passage-out** is exact, not estimated: for each z the same prompt without z,
teacher-forced on the answer, gives log p(y_i | x, every passage but z, y_<i). The K prompts are
prepared as one batch and the answer is read under all of them in one teacher-forced pass
(`score_answers`), so it costs one prompt pass and one scoring pass over K rows, whatever K is.
A passage's worth is log p(y | x, all) − log p(y | x, all but z): how much the answer loses when z
is taken out (negative: the answer is more likely without it).

>>> from rag_core.corpus import Passage
>>> from rag_core.generators.toy import ToyGenerator
>>> gen = ToyGenerator({"a": {"": {"Lyon": 0.9}}, "b": {"": {"Paris": 0.9}}})
>>> passages = [Passage("a", "A", "Lyon."), Passage("b", "B", "Paris.")]
>>> best = stuffed_decode(gen, "Where?", passages, SearchSettings())[0]
>>> gen.decode(best.tokens), round(float(best.token_logp.sum().exp()), 3)  # the even mixture's 0.45
('Lyon', 0.45)
>>> loo = leave_one_out(gen, "Where?", passages, best.tokens)  # (K, T)
>>> [round(float(row.sum().exp()), 3) for row in loo]  # without a: only b reads; without b: only a
[0.0, 0.9]
"""

from __future__ import annotations

from collections.abc import Sequence

import torch

from rag_core.corpus import Passage, Stuffed
from rag_core.decoding.decode import DecodeJob, decode_jobs, score_answers
from rag_core.decoding.search import Scored, SearchSettings
from rag_core.generators.base import Generator


def stuffed_decode(
    gen: Generator, question: str, passages: Sequence[Passage], settings: SearchSettings
) -> list[Scored]:
    """The answers of the one stuffed row, best first: the search of the marginals on a single row
    of weight one (greedy, or beam search as `generate(num_beams=B)`), tables (1, T)."""
    state = gen.prepare_rows([(question, Stuffed(tuple(passages)))])
    return decode_jobs(gen, state, [DecodeJob([0], torch.zeros(1), settings, "token")])[0][0]


def leave_one_out(
    gen: Generator, question: str, passages: Sequence[Passage], tokens: Sequence[int]
) -> torch.Tensor:
    """(K, T) log p(y_i | x, every passage but z, y_<i) of the answer `tokens`: row z reads the
    stuffed prompt with passage z taken out (the others in their order); one prompt pass and one
    teacher-forced pass over the K rows."""
    context = Stuffed(tuple(passages))
    state = gen.prepare_rows([(question, context.without(z)) for z in range(len(passages))])  # K rows
    token_logp, _, _, _ = score_answers(gen, state, [list(tokens)], top_alternatives=1)  # (1, K, T)
    return token_logp[0]  # (K, T)


def p_without(loo: torch.Tensor) -> list[float]:
    """p(y | x, every passage but z) per z, from the leave-one-out table (K, T).

    >>> [round(p, 6) for p in p_without(torch.log(torch.tensor([[0.5, 1.0], [0.25, 0.5]])))]
    [0.5, 0.125]
    """
    return loo.double().sum(-1).exp().tolist()


def leans_on(answer_logp: torch.Tensor, loo: torch.Tensor) -> int:
    """The position (0-based) of the passage whose removal costs the answer most."""
    return int(worth(answer_logp, loo).argmax())


def worth(answer_logp: torch.Tensor, loo: torch.Tensor) -> torch.Tensor:
    """(K,) log p(y|x, all) − log p(y|x, all but z), nats: what taking z out costs the answer.

    >>> w = worth(torch.tensor([[-0.5, -0.25]]), torch.tensor([[-1.0, -0.25], [-0.25, -0.25]]))
    >>> w.tolist()  # taking z1 out costs 0.5 nats; without z2 the answer is 0.25 nats more likely
    [0.5, -0.25]
    """
    whole = answer_logp.double().sum()  # () log p(y|x, z_1..z_K)
    return whole - loo.double().sum(-1)  # (K,)
