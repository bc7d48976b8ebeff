"""The figures an exercise reveals, each computed live by the engine: the toy examples through the
real marginals, and real questions on the stack and index in use.

A figure is a number (a probability) or a choice (one of its options, which the student sees before
answering). Its options that depend on the answer (the retrieved passages) come from the same trace
the reveal reads, so both always agree. Nothing here is written by hand: an exercise file names a
figure and its parameters, and the figure is what the engine computes for them.

>>> FIGURES["toy_prior"].kind, sorted(FIGURES["toy_prior"].params)
('number', ['passage', 'toy'])
>>> reveal_toy = FIGURES["toy_prior"].compute(None, {"toy": "softmax", "passage": 1})
>>> round(reveal_toy.value, 4)  # e^1 / (e^1 + e^0.2 + e^0)
0.5503
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from functools import lru_cache
from typing import Protocol

import torch

from rag_core import marginals
from rag_core.analysis.attribution import stuffed_worth
from rag_core.analysis.matching import normalize_answer
from rag_core.config import DECODING_LABELS, RAG_SEQUENCE, RAG_TOKEN, READING_LABELS, STUFFED
from rag_core.decoding import stepper
from rag_core.index_swap import judge
from rag_core.index_swap.store import leaders_frame
from rag_core.pipeline import Pipeline
from rag_core.toys import examples
from rag_core.trace import Candidate, Trace, log_p_under
from rag_core.training import query_walk

NUMBER, CHOICE = "number", "choice"
PICKS = ("RAG-Token", "RAG-Sequence", "both", "neither")
SAME = ("the same answer", "a different answer")
FOLLOWS = ("yes: each index's own holder", "no")


class Engine(Protocol):
    """What a live figure reads: the trace of a question on an index (the session's index when
    None), with the stuffed reading's answers when `stuffed` and with what each passage is worth to
    them when `worth` (only the figures that read them pay for them), and the pipeline that
    answered it."""

    def trace(
        self, question: str, index: str | None = None, stuffed: bool = False, worth: bool = False
    ) -> Trace: ...

    def pipeline(self, index: str | None = None) -> Pipeline: ...


@dataclass(frozen=True)
class Reveal:
    """What the engine computed: `value` (a float, or one of the options) and how to show it."""

    value: float | str
    shown: str
    options: tuple[str, ...] = ()
    detail: str = ""  # one line of the numbers behind a choice


@dataclass(frozen=True)
class Figure:
    kind: str  # NUMBER or CHOICE
    compute: Callable[[Engine | None, dict], Reveal]
    params: dict[str, type] = field(default_factory=dict)  # required parameters and their types
    optional: dict[str, type] = field(default_factory=dict)
    live: bool = True  # False: a toy, no model needed
    options: Callable[[Engine | None, dict], tuple[str, ...]] | None = None  # a choice's, before reveal


def _number(p: float) -> Reveal:
    return Reveal(float(p), marginals.p_text(float(p)))


def _choice(value: str, options: tuple[str, ...], detail: str = "") -> Reveal:
    return Reveal(value, value, options, detail)


# --- toys: the hand-made examples of assets/examples, through the real marginals ------------------


@lru_cache(maxsize=16)
def _toy(name: str) -> examples.ToyResult:
    return examples.run_toy(name)


def _toy_candidate(name: str, text: str, decoding: str = RAG_SEQUENCE) -> Candidate:
    found = next((c for c in _toy(name).trace.of(decoding) if c.answer == text), None)
    if found is None:
        raise ValueError(f"the toy {name!r} has no candidate {text!r}")
    return found


def toy_prior(_, p: dict) -> Reveal:
    return _number(_toy(p["toy"]).log_prior[p["passage"] - 1].exp())


def toy_posterior(_, p: dict) -> Reveal:
    toy = _toy(p["toy"])
    post = marginals.citation(toy.log_prior, _toy_candidate(p["toy"], p["candidate"]).token_logp)  # (K,)
    return _number(post[p["passage"] - 1])


def toy_p(_, p: dict) -> Reveal:
    decoding = _decoding(p)
    cand = _toy_candidate(p["toy"], p["candidate"], decoding)
    log_pz = _toy(p["toy"]).log_prior
    return _number(marginals.prob(log_p_under(cand, decoding, log_pz)))


def toy_pick(_, p: dict) -> Reveal:
    """Which marginal ranks the candidate first."""
    trace = _toy(p["toy"]).trace
    firsts = {label: trace.answer(d).answer for d, label in DECODING_LABELS.items()}
    tops = [label for label, answer in firsts.items() if answer == p["candidate"]]
    value = "both" if len(tops) == 2 else tops[0] if tops else "neither"
    detail = ", ".join(f"{label} ranks “{answer}” first" for label, answer in firsts.items())
    return _choice(value, PICKS, detail)


# --- live: a real question on the stack and index in use ------------------------------------------


def _decoding(p: dict) -> str:
    decoding = p.get("decoding", RAG_SEQUENCE)
    if decoding not in DECODING_LABELS:
        raise ValueError(f"decoding must be {RAG_TOKEN} or {RAG_SEQUENCE}, not {decoding!r}")
    return decoding


def _answer(trace: Trace, decoding: str) -> Candidate:
    cand = trace.answer(decoding)
    if cand is None or not cand.token_ids:
        raise ValueError(f"{READING_LABELS[decoding]} gave no answer to this question")
    return cand


def passage_options(trace: Trace) -> tuple[str, ...]:
    """The retrieved passages as a choice's options: rank and title, unique even when two passages
    share an article."""
    return tuple(f"{h.rank}. {h.passage.title}" for h in trace.hits)


def _passages(engine: Engine, p: dict) -> tuple[str, ...]:
    return passage_options(engine.trace(p["question"], p.get("index")))


def _rank(trace: Trace, p: dict) -> int:
    z = p.get("passage", 1) - 1
    if not 0 <= z < trace.k:
        raise ValueError(f"passage {z + 1} is not among the {trace.k} retrieved")
    return z


def prior(engine: Engine, p: dict) -> Reveal:
    trace = engine.trace(p["question"], p.get("index"))
    return _number(trace.log_prior[_rank(trace, p)].exp())


def posterior(engine: Engine, p: dict) -> Reveal:
    """p(z|x,y) of one passage once the chosen answer y is known."""
    trace = engine.trace(p["question"], p.get("index"))
    post = marginals.citation(trace.log_prior, _answer(trace, _decoding(p)).token_logp)  # (K,)
    return _number(post[_rank(trace, p)])


def answer_p(engine: Engine, p: dict) -> Reveal:
    trace = engine.trace(p["question"], p.get("index"))
    decoding = _decoding(p)
    cand = _answer(trace, decoding)
    return _number(marginals.prob(log_p_under(cand, decoding, trace.log_prior)))


def p_without(engine: Engine, p: dict) -> Reveal:
    """The same answer's p under its marginal once one passage is removed (the prior renormalised
    over the rest; the conditionals as decoded: the Citations page's "Remove a passage")."""
    trace = engine.trace(p["question"], p.get("index"))
    decoding, z = _decoding(p), _rank(trace, p)
    keep = [i != z for i in range(trace.k)]
    dropped = stepper.remarginalise(trace.log_prior, _answer(trace, decoding), keep)
    return _number(marginals.prob(dropped.log_p_tok if decoding == RAG_TOKEN else dropped.log_p_seq))


def stuffed_leans(engine: Engine, p: dict) -> Reveal:
    """The passage whose removal costs the stuffed reading's answer most (exact leave-one-out)."""
    trace = engine.trace(p["question"], p.get("index"), worth=True)
    worth = stuffed_worth.of(trace)
    if worth is None:
        raise ValueError("the stuffed reading gave no answer to this question")
    options = passage_options(trace)
    detail = f"removing it leaves p(y | x, the rest) = {marginals.p_text(worth.p_without[worth.leans_on])}"
    return _choice(options[worth.leans_on], options, f"p(y | x, all) = {marginals.p_text(worth.p)}; {detail}")


def _same(a: str, b: str) -> bool:
    return normalize_answer(a) == normalize_answer(b)


def readings_agree(engine: Engine, p: dict) -> Reveal:
    """Whether another reading (`reading`: RAG-Token, or the stuffed reading of all K passages in
    one prompt) gives RAG-Sequence's answer, after SQuAD normalisation."""
    other = p.get("reading", RAG_TOKEN)
    if other not in (RAG_TOKEN, STUFFED):
        raise ValueError(f"reading must be {RAG_TOKEN} or {STUFFED}, not {other!r}")
    trace = engine.trace(p["question"], p.get("index"), stuffed=other == STUFFED)
    theirs, seq = _answer(trace, other).answer, _answer(trace, RAG_SEQUENCE).answer
    detail = f"{READING_LABELS[other]}: “{theirs}”; RAG-Sequence: “{seq}”"
    return _choice(SAME[0] if _same(theirs, seq) else SAME[1], SAME, detail)


def closed_book_agrees(engine: Engine, p: dict) -> Reveal:
    """Whether the generator with no passage at all gives RAG-Sequence's answer."""
    trace = engine.trace(p["question"], p.get("index"))
    seq = _answer(trace, RAG_SEQUENCE).answer
    closed = engine.pipeline(p.get("index")).closed_book(trace.question)
    detail = f"closed-book: “{closed}”; RAG-Sequence: “{seq}”"
    return _choice(SAME[0] if _same(closed, seq) else SAME[1], SAME, detail)


def holders(question: str) -> tuple[str, str]:
    """The 2016 and 2018 holders of the office a question asks about (assets/leaders.csv)."""
    rows = leaders_frame()
    row = rows[rows["question"] == question]
    if row.empty:
        raise ValueError(f"no office of the index swap is asked as {question!r}")
    return str(row.iloc[0]["holder_2016"]), str(row.iloc[0]["holder_2018"])


def swap_follows(engine: Engine, p: dict) -> Reveal:
    """Whether RAG-Sequence names each year's holder on each year's index: the 2016 one on "2016",
    the 2018 one on "2018" (the index swap's judge)."""
    h16, h18 = holders(p["question"])
    a16 = _answer(engine.trace(p["question"], "2016"), RAG_SEQUENCE).answer
    a18 = _answer(engine.trace(p["question"], "2018"), RAG_SEQUENCE).answer
    follows = judge.judge(a16, h16, h18)[0] and judge.judge(a18, h16, h18)[1]
    detail = f"on 2016: “{a16}” (holder {h16}); on 2018: “{a18}” (holder {h18})"
    return _choice(FOLLOWS[0] if follows else FOLLOWS[1], FOLLOWS, detail)


def query_step(engine: Engine, p: dict) -> Reveal:
    """Of the passages retrieved at the start, the one whose prior gains most when the query takes
    one step up the gradient of log p(y|x) (the Map's "Watch the query move"); y is the exercise's
    `answer`, else RAG-Sequence's."""
    trace = engine.trace(p["question"], p.get("index"))
    answer = p.get("answer") or _answer(trace, RAG_SEQUENCE).answer
    pipe = engine.pipeline(p.get("index"))
    walk = query_walk.walk(pipe, trace.question, answer, "sequence", k=trace.k, steps=1)
    start, moved = walk.steps
    after = dict(zip(moved.ids, moved.prior.tolist()))  # a passage pushed out of the top K has 0
    gain = torch.tensor([after.get(i, 0.0) for i in start.ids]) - start.prior  # (K,)
    z = int(gain.argmax())
    options = passage_options(trace)
    before, moved_to = float(start.prior[z]), after.get(start.ids[z], 0.0)
    detail = f"its prior {marginals.p_text(before)} → {marginals.p_text(moved_to)} after one step"
    return _choice(options[z], options, detail)


_Q = {"question": str}
_OPT = {"index": str, "passage": int, "decoding": str}
FIGURES: dict[str, Figure] = {
    "toy_prior": Figure(NUMBER, toy_prior, {"toy": str, "passage": int}, live=False),
    "toy_posterior": Figure(
        NUMBER, toy_posterior, {"toy": str, "candidate": str, "passage": int}, live=False
    ),
    "toy_p": Figure(NUMBER, toy_p, {"toy": str, "candidate": str}, {"decoding": str}, live=False),
    "toy_pick": Figure(
        CHOICE, toy_pick, {"toy": str, "candidate": str}, live=False, options=lambda e, p: PICKS
    ),
    "prior": Figure(NUMBER, prior, _Q, _OPT),
    "posterior": Figure(NUMBER, posterior, _Q, _OPT),
    "answer_p": Figure(NUMBER, answer_p, _Q, _OPT),
    "p_without": Figure(NUMBER, p_without, _Q, _OPT),
    "stuffed_leans": Figure(CHOICE, stuffed_leans, _Q, {"index": str}, options=_passages),
    "readings_agree": Figure(
        CHOICE, readings_agree, _Q, {"index": str, "reading": str}, options=lambda e, p: SAME
    ),
    "closed_book_agrees": Figure(CHOICE, closed_book_agrees, _Q, {"index": str}, options=lambda e, p: SAME),
    "swap_follows": Figure(CHOICE, swap_follows, _Q, options=lambda e, p: FOLLOWS),
    "query_step": Figure(CHOICE, query_step, _Q, {"index": str, "answer": str}, options=_passages),
}
