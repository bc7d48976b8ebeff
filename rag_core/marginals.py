"""The RAG latent-variable math, in log space, vectorised over passages.

Every function takes the log prior `log p(z|x)` with passages on the last axis, shape (..., K), and
the per-token conditionals `log p(y_i | x, z, y_<i)` with shape (..., K, T): passages, then answer
steps. Leading axes (candidates, batches) broadcast. Steps past the end of a shorter answer are
marked by `mask` (..., T) and count as log 1 = 0. A conditional of -inf means probability 0 (fast
rescoring uses it for a pair it never scored); NaN is read the same way.

Worked example (two passages, the answer "born Hawaii"; `toy obama` has the same numbers):

>>> import torch
>>> lp = torch.tensor([0.7, 0.3]).log()
>>> tok = torch.tensor([[0.8, 0.9], [0.4, 0.1]]).log()   # (K=2, T=2)
>>> round(rag_sequence(lp, tok).exp().item(), 3), round(rag_token(lp, tok).exp().item(), 3)
(0.516, 0.449)

This module imports nothing of the project's.
"""

from __future__ import annotations

import math

import torch

NEG_INF = float("-inf")


def prob(logp: float) -> float:
    """A probability for display and tables: exp(log p), with -inf and NaN (never scored) as 0.

    >>> prob(0.0), prob(NEG_INF), prob(float("nan"))
    (1.0, 0.0, 0.0)
    """
    return math.exp(logp) if logp > NEG_INF else 0.0


def p_text(p: float) -> str:
    """A probability as every page, verdict and CLI line prints it: three significant digits, and
    scientific notation below 1e-4, so a small but real chance never reads as 0.000.

    >>> p_text(0.23812), p_text(0.0012), p_text(3.14159e-08), p_text(0.0)
    ('0.238', '0.0012', '3.14e-08', '0')
    """
    return f"{p:.3g}"


def log_prior(scores: torch.Tensor, scale: float = 1.0) -> torch.Tensor:
    """log p(z|x) = log_softmax(scale * s(z)) over the K retrieved passages.

    >>> [round(p, 3) for p in log_prior(torch.tensor([1.0, 0.2, 0.0])).exp().tolist()]
    [0.55, 0.247, 0.202]
    """
    return torch.log_softmax(scale * scores.double(), dim=-1)  # (..., K)


def _clean(token_logp: torch.Tensor, mask: torch.Tensor | None) -> torch.Tensor:
    """NaN -> -inf (never scored = probability 0); padded steps -> 0 (log 1)."""
    out = torch.nan_to_num(token_logp.double(), nan=NEG_INF, posinf=0.0, neginf=NEG_INF)  # (..., K, T)
    if mask is not None:
        out = out.masked_fill(~mask.bool().unsqueeze(-2), 0.0)  # (..., K, T)
    return out


def _normalise(logits: torch.Tensor, dim: int) -> torch.Tensor:
    """Probabilities from unnormalised log weights along `dim`.

    Where every weight is -inf (no passage gives the answer any probability) the posterior is
    undefined; we return a uniform distribution there instead of NaN, so sums stay 1.
    """
    lse = torch.logsumexp(logits, dim=dim, keepdim=True)  # (..., 1, ...)
    probs = torch.exp(logits - lse)  # (...)
    dead = torch.isinf(lse) & (lse < 0)  # (..., 1, ...)
    if dead.any():
        uniform = torch.full_like(probs, 1.0 / logits.shape[dim])
        probs = torch.where(dead.expand_as(probs), uniform, probs)
    return probs


def doc_sequence_logp(token_logp: torch.Tensor, mask: torch.Tensor | None = None) -> torch.Tensor:
    """log p(y|x,z) = Σ_i log p(y_i|x,z,y_<i) for each passage: (..., K, T) -> (..., K)."""
    return _clean(token_logp, mask).sum(dim=-1)  # (..., K)


def rag_sequence(
    log_pz: torch.Tensor, token_logp: torch.Tensor, mask: torch.Tensor | None = None
) -> torch.Tensor:
    """RAG-Sequence: log Σ_z p(z|x) Π_i p(y_i|x,z,y_<i) -> (...)."""
    return torch.logsumexp(log_pz.double() + doc_sequence_logp(token_logp, mask), dim=-1)  # (...)


def token_mixture(
    log_pz: torch.Tensor, token_logp: torch.Tensor, mask: torch.Tensor | None = None
) -> torch.Tensor:
    """Per-step RAG-Token mixture log Σ_z p(z|x) p(y_i|x,z,y_<i): (..., K, T) -> (..., T).

    Padded steps come out as 0 (log 1).
    """
    joint = log_pz.double().unsqueeze(-1) + _clean(token_logp, mask)  # (..., K, T)
    return torch.logsumexp(joint, dim=-2)  # (..., T)


def rag_token(
    log_pz: torch.Tensor, token_logp: torch.Tensor, mask: torch.Tensor | None = None
) -> torch.Tensor:
    """RAG-Token: log Π_i Σ_z p(z|x) p(y_i|x,z,y_<i) -> (...)."""
    return token_mixture(log_pz, token_logp, mask).sum(dim=-1)  # (...)


def responsibilities(
    log_pz: torch.Tensor, token_logp: torch.Tensor, mask: torch.Tensor | None = None
) -> torch.Tensor:
    """r_i(z) = p(z|x) p(y_i|x,z,y_<i) / Σ_z' (...), per step: (..., K, T), sums to 1 over K."""
    joint = log_pz.double().unsqueeze(-1) + _clean(token_logp, mask)  # (..., K, T)
    return _normalise(joint, dim=-2)  # (..., K, T)


def prefix_posteriors(
    log_pz: torch.Tensor, token_logp: torch.Tensor, mask: torch.Tensor | None = None
) -> torch.Tensor:
    """p(z | x, y_≤i) ∝ p(z|x) Π_{j≤i} p(y_j|x,z,y_<j): (..., K, T), sums to 1 over K.

    The last real step is the citation p(z|x,y).
    """
    running = torch.cumsum(_clean(token_logp, mask), dim=-1)  # (..., K, T)
    return _normalise(log_pz.double().unsqueeze(-1) + running, dim=-2)  # (..., K, T)


def prefix_weights(
    log_pz: torch.Tensor, token_logp: torch.Tensor, mask: torch.Tensor | None = None
) -> torch.Tensor:
    """log p(z | x, y_<i), the RAG-Sequence weight of each passage *before* step i (the prior at
    i = 0): (..., K, T). Σ_z p(z|x,y_<i) p(y_i|x,z,y_<i) is then p_seq(y_i | x, y_<i), and these
    per-step predictives multiply to p_seq(y).

    >>> lp = torch.tensor([0.5, 0.5]).log()
    >>> [[round(p, 3) for p in row]
    ...  for row in prefix_weights(lp, torch.tensor([[0.9, 0.5], [0.1, 0.5]]).log()).exp().tolist()]
    [[0.5, 0.9], [0.5, 0.1]]
    """
    running = torch.cumsum(_clean(token_logp, mask), dim=-1)  # (..., K, T) log p(y_≤i|x,z)
    before = torch.cat(
        [torch.zeros_like(running[..., :1]), running[..., :-1]], dim=-1
    )  # (..., K, T) log p(y_<i|x,z)
    weights = log_pz.double().unsqueeze(-1) + before  # (..., K, T)
    return weights - torch.logsumexp(weights, dim=-2, keepdim=True)  # (..., K, T)


def citation(
    log_pz: torch.Tensor, token_logp: torch.Tensor, mask: torch.Tensor | None = None
) -> torch.Tensor:
    """The posterior over passages after the whole answer, p(z|x,y): (..., K).

    >>> lp = torch.tensor([0.7, 0.3]).log()
    >>> [round(p, 3) for p in citation(lp, torch.tensor([[0.9], [0.2]]).log()).tolist()]
    [0.913, 0.087]
    """
    return _normalise(log_pz.double() + doc_sequence_logp(token_logp, mask), dim=-1)  # (..., K)


def drop_passages(log_pz: torch.Tensor, keep: torch.Tensor) -> torch.Tensor:
    """Renormalise the prior over the passages in `keep` (bool, (..., K)); dropped ones get -inf.

    This is the "remove a passage" counterfactual: the conditionals do not change, so both
    marginals can be recomputed from the same numbers with no new model call.
    """
    masked = log_pz.double().masked_fill(~keep.bool(), NEG_INF)  # (..., K)
    return masked - torch.logsumexp(masked, dim=-1, keepdim=True)  # (..., K)
