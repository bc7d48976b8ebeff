"""Watch the query move: the paper's retriever signal applied to one question's query vector.

Training moves the query encoder's weights so that q(x) climbs log p(y|x); this module shows that
climb directly on one q, with the generator and the index fixed. Each step

    q ← q + η · ∂ log p(y|x)/∂q,   ∂ log p(y|x)/∂q = scale · Σ_z bracket(z) d(z)   (`gradient.py`)

then searches the index again (the top K can change), and recomputes the prior, the posterior and
the bracket there. When the encoder L2-normalises its vectors (MiniLM), every q it can produce lies
on the unit sphere, so the moved q is put back on it; DPR's q is left as it is.

Only a passage that enters the top K costs generator work: the answer's conditionals
p(y_i|x,z,y_<i) depend on the question, the passage and the answer alone, so they are remembered
per passage, and a step whose top K holds no new passage makes no generator call.

With K = 1, or when every passage gives the answer the same probability, each bracket is 0: the
gradient is the zero vector and the query stays where it is (the two cases where nothing moves).

Worked example (pure: the posterior demo's numbers; the first passage explains "Hawaii" better, so
one step pulls q toward d1 = (1, 0) and away from d2 = (0, 1)):

>>> import torch
>>> g = step_gradient("sequence", torch.tensor([0.7, 0.3]).log(), torch.tensor([[0.9], [0.2]]).log(),
...                   torch.eye(2, dtype=torch.float64), scale=1.0)
>>> [round(v, 3) for v in g.bracket.tolist()], [round(v, 3) for v in g.gradient.tolist()]
([0.213, -0.213], [0.213, -0.213])
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np
import torch

from rag_core import marginals
from rag_core.corpus import Passage
from rag_core.decoding.decode import score_answers
from rag_core.pipeline import Pipeline, clean_question
from rag_core.trace import Hit
from rag_core.training.gradient import bracket, log_likelihood, query_gradient
from rag_core.training.loop import doc_vectors

DEFAULT_STEP_SIZE = 0.02  # η: with scale 20 and brackets near ±0.3 a step moves a unit q by ~0.1
STILL = 1e-9  # a bracket this small is rounding: every passage explains the answer equally
MAX_STEPS = 50  # the page's and the function's limit: each step is one search, rarely a generator pass


class WalkError(ValueError):
    """A walk that cannot be taken as asked (no answer, a bad step size); the message says why."""


@dataclass
class Gradient:
    """The retriever's signal at one q: bracket (K,) and ∂ log p(y|x)/∂q (D,)."""

    bracket: torch.Tensor  # (K,) p(z|x,y) − p(z|x), or Σ_i (r_i(z) − p(z|x)) for RAG-Token
    gradient: torch.Tensor  # (D,) scale · Σ_z bracket(z) d(z)


def step_gradient(
    marginal: str, log_pz: torch.Tensor, token_logp: torch.Tensor, d: torch.Tensor, scale: float
) -> Gradient:
    """The bracket and the gradient from a prior (K,), the answer's conditionals (K, T) and d(z) (K, D)."""
    b = bracket(marginal, log_pz, token_logp)  # (K,)
    return Gradient(b, query_gradient(b, d, scale))  # (K,), (D,)


@dataclass
class WalkStep:
    """Where the query stands after `step` moves, and everything the page draws about it."""

    step: int
    query: np.ndarray  # (D,) float32 q, as the index is searched with it
    hits: list[Hit]  # the top K for this q, best first
    log_prior: torch.Tensor  # (K,) log p(z|x) = log_softmax(scale · s)
    token_logp: torch.Tensor  # (K, T) log p(y_i|x,z,y_<i) of the answer under each passage
    bracket: torch.Tensor  # (K,)
    gradient: torch.Tensor  # (D,) ∂ log p(y|x)/∂q at this q
    log_likelihood: float  # log p(y|x) under the walk's marginal
    entered: list[str] = field(default_factory=list)  # passage ids new to the top K at this step
    left: list[str] = field(default_factory=list)  # passage ids that dropped out of it
    generator_passes: int = 0  # teacher-forced passes this step cost (0 when no passage entered)

    @property
    def prior(self) -> torch.Tensor:
        return self.log_prior.exp()  # (K,)

    @property
    def posterior(self) -> torch.Tensor:
        """p(z|x,y), RAG-Sequence's citation (for either marginal: it is what the prior moves toward)."""
        return marginals.citation(self.log_prior, self.token_logp)  # (K,)

    @property
    def ids(self) -> list[str]:
        return [h.passage.id for h in self.hits]


@dataclass
class Walk:
    question: str
    answer: str
    answer_tokens: list[str]
    marginal: str  # "sequence" or "token"
    scale: float
    step_size: float
    normalised: bool  # q kept on the unit sphere, as the encoder's own outputs are
    steps: list[WalkStep]

    @property
    def generator_passes(self) -> int:
        return sum(s.generator_passes for s in self.steps)

    @property
    def still(self) -> bool:
        """True in the two cases where nothing moves: K = 1, or every passage explains the answer
        equally (each bracket 0 up to rounding, so the gradient at the start is 0)."""
        return float(self.steps[0].bracket.abs().max()) < STILL


class Conditionals:
    """The answer's (T,) log-probabilities per passage id, for one (question, answer); filled on demand
    with one batched teacher-forced pass over the passages not seen yet."""

    def __init__(self, pipe: Pipeline, question: str, answer_ids: list[int]):
        self.pipe, self.question, self.answer_ids = pipe, question, answer_ids
        self.rows: dict[str, torch.Tensor] = {}

    def __call__(self, passages: list[Passage]) -> tuple[torch.Tensor, int]:
        """(K, T) for `passages`, and how many generator passes it took (0 or 1)."""
        new = list({p.id: p for p in passages if p.id not in self.rows}.values())
        if new:
            gen = self.pipe.models.generator
            with self.pipe.models.lock:
                lp, _, _, _ = score_answers(
                    gen, gen.prepare(self.question, new), [self.answer_ids], 1
                )  # (1, N, T)
            for p, row in zip(new, lp[0].double()):
                self.rows[p.id] = row  # (T,)
        return torch.stack([self.rows[p.id] for p in passages]), int(bool(new))  # (K, T)


def walk(
    pipe: Pipeline,
    question: str,
    answer: str,
    marginal: str = "sequence",
    k: int | None = None,
    scale: float | None = None,
    step_size: float = DEFAULT_STEP_SIZE,
    steps: int = 5,
    start: np.ndarray | None = None,
    conditionals: Conditionals | None = None,
    progress: Callable[[str, float], None] | None = None,
) -> Walk:
    """`steps` moves of q along the gradient of log p(answer|question) over the top K.

    `start`: a query vector to begin from instead of q(question) (e.g. one the user moved on the
    Map); `conditionals`: a `Conditionals` of the same question and answer, to reuse its passes.
    """
    question, _ = clean_question(question)
    answer = " ".join(str(answer or "").split())
    if not answer:
        raise WalkError("type the expected answer: the walk climbs its likelihood")
    if not (np.isfinite(step_size) and step_size > 0):
        raise WalkError(f"the step size must be a positive number, got {step_size!r}")
    if not 0 <= int(steps) <= MAX_STEPS:
        raise WalkError(f"take between 0 and {MAX_STEPS} steps, got {steps!r}")
    k = int(k or pipe.settings.k)
    scale = float(scale if scale is not None else pipe.models.encoder.default_scale)
    gen = pipe.models.generator
    answer_ids = gen.encode_answer(answer)
    if not answer_ids:
        raise WalkError("the expected answer has no token the generator can read")
    cond = conditionals or Conditionals(pipe, question, answer_ids)
    normalised = bool(getattr(pipe.models.encoder, "normalises", False))
    q = (pipe.query_vector(question)[0] if start is None else np.asarray(start)).astype(np.float64)  # (D,)
    out: list[WalkStep] = []
    for t in range(int(steps) + 1):
        with pipe.models.lock:
            hits, rows = pipe.retriever.search_vector(q[None].astype(np.float32), k)  # K hits, (K,) rows
        d = doc_vectors(pipe.index, rows)  # (K, D)
        log_pz = marginals.log_prior(torch.tensor([h.score for h in hits]), scale)  # (K,)
        token_logp, passes = cond([h.passage for h in hits])  # (K, T)
        g = step_gradient(marginal, log_pz, token_logp, d, scale)
        before = set(out[-1].ids) if out else {h.passage.id for h in hits}
        now = [h.passage.id for h in hits]
        out.append(
            WalkStep(
                t,
                q.astype(np.float32),
                hits,
                log_pz,
                token_logp,
                g.bracket,
                g.gradient,
                float(log_likelihood(marginal, log_pz, token_logp)),
                [i for i in now if i not in before],
                [i for i in before if i not in set(now)],
                passes,
            )
        )
        if progress:
            progress(f"step {t} of {steps}", (t + 1) / (int(steps) + 1))
        if t < int(steps):
            q = q + step_size * g.gradient.numpy()  # (D,) ascent: log p(y|x) grows along the gradient
            if normalised:
                q = q / max(float(np.linalg.norm(q)), 1e-12)  # (D,) back on the sphere the encoder maps to
    return Walk(
        question,
        answer,
        [gen.token_text(i) for i in answer_ids],
        marginal,
        scale,
        float(step_size),
        normalised,
        out,
    )
