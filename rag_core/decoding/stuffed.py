"""The stuffed reading: the K retrieved passages read together in one prompt, in rank order, as
almost every deployed RAG system reads them, decoded by the same search and settings as the two
marginals; and exactly what each passage is worth to its answer.

There is no mixture here: one prompt row reads every passage (`corpus.Stuffed`, formatted by the
generator as it formats one passage, one after the other), so the answer is the plain search on
that row, what `generate()` gives for the same prompt. Its probability is log p(y | x, z_1..z_K).

**Leave-one-passage-out** is exact, not estimated: for each z the same prompt without z,
teacher-forced on the answer, gives log p(y_i | x, every passage but z, y_<i). Prompt z begins as
the stuffed prompt does, up to passage z: the causal generator (`score_after`) reads those tokens
from the stuffed prompt's own cache, and computes the rest of the K prompts and the answer after
each in one forward, side by side (about half the tokens of the K prompts). A generator without it
prepares the K prompts as one batch and teacher-forces the answer in one more pass (`score_answers`).
A passage's worth is log p(y | x, all) − log p(y | x, all but z): how much the answer loses when z
is taken out (negative: the answer is more likely without it).

**Order sensitivity**: the same K passages in other orders (reversed, each moved first, each moved
last), each decoded afresh and each scoring the answer of the retrieved order: a reader that
weighs a passage by where it stands, not by what it says, shows here.

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
from dataclasses import dataclass

import torch

from rag_core.corpus import Passage, Reading, Stuffed
from rag_core.decoding.decode import DecodeJob, decode_jobs, score_answers
from rag_core.decoding.search import Scored, SearchSettings
from rag_core.generators.base import Generator, GenState

Passages = Sequence[Passage] | Reading  # the passages in rank order, or a prompt that holds them


def reading_of(passages: Passages) -> Reading:
    """The one prompt row that reads the passages together: the stuffed reading's own template for
    passages in rank order, or a logged prompt (`corpus.Prompted`) as it is."""
    return passages if isinstance(passages, Reading) else Stuffed(tuple(passages))


def stuffed_state(gen: Generator, question: str, passages: Passages) -> GenState:
    """The one stuffed prompt row, prepared: what the answer is decoded from, and what
    leave-one-out reads its shared tokens from."""
    return gen.prepare_rows([(question, reading_of(passages))])


def stuffed_decode(
    gen: Generator,
    question: str,
    passages: Passages,
    settings: SearchSettings,
    state: GenState | None = None,
) -> list[Scored]:
    """The answers of the one stuffed row, best first: the search of the marginals on a single row
    of weight one (greedy, or beam search as `generate(num_beams=B)`), tables (1, T). `state`: the
    row already prepared (`stuffed_state`)."""
    state = state if state is not None else stuffed_state(gen, question, passages)
    return decode_jobs(gen, state, [DecodeJob([0], torch.zeros(1), settings, "token")])[0][0]


def leave_one_out(
    gen: Generator,
    question: str,
    passages: Passages,
    tokens: Sequence[int],
    state: GenState | None = None,
) -> torch.Tensor:
    """(K, T) log p(y_i | x, every passage but z, y_<i) of the answer `tokens`: row z reads the
    stuffed prompt with passage z taken out (the others in their order); one prompt pass and one
    teacher-forced pass over the K rows. `state`: the stuffed row prepared (`stuffed_state`); a
    generator that can (`score_after`, the causal LM) then reads each row's tokens before passage z
    from it and computes the rest and the answer in one forward (exact all the same)."""
    context = reading_of(passages)
    rows = [(question, context.without(z)) for z in range(len(context.passages))]
    after = getattr(gen, "score_after", None)
    if state is not None and after is not None:
        shared = after(state, (question, context), rows, list(tokens))  # (K, T), one forward
        if shared is not None:
            return shared
    prepared = gen.prepare_rows(rows)  # K rows
    token_logp, _, _, _ = score_answers(gen, prepared, [list(tokens)], top_alternatives=1)  # (1, K, T)
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


@dataclass
class OrderReading:
    """The stuffed reading with the passages in another order: `order` holds the retrieved
    positions (0-based) in prompt order; `kind` is "reversed", "first" or "last" (`moved`: the
    position moved there); its own answer (token ids, log-probs (T',)) and log p(y|x, this order)
    of the retrieved order's answer y."""

    kind: str
    moved: int | None
    order: tuple[int, ...]
    answer: str  # the answer this order decodes, as text
    tokens: list[int]
    token_logp: torch.Tensor  # (T',) the answer this order decodes
    logp_answer: float  # log p(y | x, passages in this order) of the retrieved order's answer

    @property
    def p(self) -> float:
        """p of this order's own answer."""
        return float(self.token_logp.double().sum().exp())


def orders(k: int) -> list[tuple[str, int | None, tuple[int, ...]]]:
    """The other orders of k passages: reversed, then each moved first and last, every order once
    and never the retrieved one.

    >>> [(kind, z, o) for kind, z, o in orders(3)]  # doctest: +NORMALIZE_WHITESPACE
    [('reversed', None, (2, 1, 0)), ('last', 0, (1, 2, 0)), ('first', 1, (1, 0, 2)),
     ('last', 1, (0, 2, 1)), ('first', 2, (2, 0, 1))]
    """
    base = tuple(range(k))
    named = [("reversed", None, base[::-1])]
    for z in base:
        rest = base[:z] + base[z + 1 :]
        named += [("first", z, (z, *rest)), ("last", z, (*rest, z))]
    seen, out = {base}, []
    for kind, z, order in named:
        if order not in seen:
            seen.add(order)
            out.append((kind, z, order))
    return out


# Passages one batch of the other orders may read (rows × K): the K = 5 orders (9 rows) are one
# batch; at K = 20 the 39 orders of ~3,000 tokens each, read at once, took over 15 GB.
ORDER_READINGS = 100


def order_sensitivity(
    gen: Generator,
    question: str,
    passages: Passages,
    tokens: Sequence[int],
    settings: SearchSettings,
) -> list[OrderReading]:
    """Every order of `orders(K)` read in batches of at most ORDER_READINGS passages: a batch is
    one prompt pass over its rows, one decode loop (each row its own search, as `stuffed_decode`
    alone) and one teacher-forced pass of the retrieved order's answer `tokens` under all of them."""
    context = reading_of(passages)
    named = orders(len(context.passages))
    if not named:
        return []
    rows = [(question, context.reordered(order)) for _, _, order in named]
    decoded, forced = [], []
    per_pass = max(1, ORDER_READINGS // len(context.passages))
    for start in range(0, len(rows), per_pass):
        state = gen.prepare_rows(rows[start : start + per_pass])  # R' rows
        jobs = [DecodeJob([r], torch.zeros(1), settings, "token") for r in range(state.logprobs.shape[0])]
        decoded += decode_jobs(gen, state, jobs)
        forced += list(score_answers(gen, state, [list(tokens)], top_alternatives=1)[0][0])  # R' × (T,)
    out = []
    for (kind, z, order), (best, _), row in zip(named, decoded, forced):
        top = best[0]  # this order's answer, its table (1, T')
        out.append(
            OrderReading(
                kind,
                z,
                order,
                gen.decode(top.tokens),
                list(top.tokens),
                top.token_logp[0],  # (T',)
                float(row.double().sum()),  # () log p(y | x, this order)
            )
        )
    return out
