"""The paper's end-to-end signal for the retriever: the analytic gradient of log p(y|x) w.r.t. q(x).

The prior is p(z|x) = softmax_z(scale · d(z)·q) over the K retrieved passages, so differentiating
either marginal through it leaves one bracket per passage, weighted by its vector:

    RAG-Sequence: ∂ log p(y|x) / ∂q = scale · Σ_z (p(z|x,y) − p(z|x)) d(z)
    RAG-Token:    ∂ log p(y|x) / ∂q = scale · Σ_i Σ_z (r_i(z) − p(z|x)) d(z)

The query moves toward passages that explain the answer better than the retriever expected
(posterior share above prior share) and away from the rest. With K = 1, or when every passage gives
the answer the same probability, every bracket is 0 and the retriever learns nothing. The posterior
and the responsibilities are `marginals.citation` and `marginals.responsibilities`: one definition.

Worked example (the posterior demo: prior 0.7 / 0.3, p(y|x,z) = 0.9 / 0.2, d1 = (1, 0), d2 = (0, 1)):

>>> import torch
>>> lp, tok = torch.tensor([0.7, 0.3]).log(), torch.tensor([[0.9], [0.2]]).log()   # (K=2,), (K=2, T=1)
>>> [round(b, 3) for b in bracket("sequence", lp, tok).tolist()]
[0.213, -0.213]
>>> [round(g, 3) for g in query_gradient(bracket("sequence", lp, tok), torch.eye(2), scale=1.0).tolist()]
[0.213, -0.213]
>>> round(nll("sequence", lp, tok).item(), 3)   # -log(0.7·0.9 + 0.3·0.2) = -log 0.69
0.371

The same numbers read as a distractor's (a wrong candidate the passages name) give the unlikelihood
term that pushes it down, −log(1 − p(d|x)), and the weight p/(1 − p) its retriever gradient takes:

>>> round(unlikelihood("sequence", lp, tok).item(), 3)   # -log(1 - 0.69)
1.171
>>> round(unlikelihood_weight("sequence", lp, tok).item(), 3)   # 0.69 / 0.31
2.226
"""

from __future__ import annotations

import torch

from rag_core import marginals

MARGINALS = ("sequence", "token")  # RAG-Sequence, RAG-Token (the CLI's --marginal values)


def _check(marginal: str) -> None:
    if marginal not in MARGINALS:
        raise ValueError(f"marginal must be sequence or token, got {marginal!r}")


def bracket(
    marginal: str, log_pz: torch.Tensor, token_logp: torch.Tensor, mask: torch.Tensor | None = None
) -> torch.Tensor:
    """Per passage, how much the answer pulls the prior toward it: (..., K).

    RAG-Sequence: p(z|x,y) − p(z|x). RAG-Token: Σ_i (r_i(z) − p(z|x)) over the answer's real steps.
    Each sums to 0 over the passages (both distributions sum to 1).
    """
    _check(marginal)
    prior = log_pz.double().exp()  # (..., K)
    if marginal == "sequence":
        return marginals.citation(log_pz, token_logp, mask) - prior  # (..., K)
    # a padded step reads as log 1 under every passage, so its r_i is the prior: it adds nothing
    diff = marginals.responsibilities(log_pz, token_logp, mask) - prior.unsqueeze(-1)  # (..., K, T)
    return diff.sum(dim=-1)  # (..., K)


def query_gradient(bracket_: torch.Tensor, doc_vectors: torch.Tensor, scale: float) -> torch.Tensor:
    """∂ log p(y|x) / ∂q = scale · Σ_z bracket(z) d(z): (..., K) and (..., K, D) -> (..., D)."""
    weights = bracket_.double().unsqueeze(-1)  # (..., K, 1)
    return scale * (weights * doc_vectors.double()).sum(dim=-2)  # (..., D)


def log_likelihood(
    marginal: str, log_pz: torch.Tensor, token_logp: torch.Tensor, mask: torch.Tensor | None = None
) -> torch.Tensor:
    """log p(y|x) under RAG-Sequence or RAG-Token over the K passages: (...)."""
    _check(marginal)
    fn = marginals.rag_sequence if marginal == "sequence" else marginals.rag_token
    return fn(log_pz, token_logp, mask)  # (...)


def nll(
    marginal: str, log_pz: torch.Tensor, token_logp: torch.Tensor, mask: torch.Tensor | None = None
) -> torch.Tensor:
    """The training loss, as the paper trains: −log p(y|x), marginalised over the top K: (...)."""
    return -log_likelihood(marginal, log_pz, token_logp, mask)  # (...)


# p(d|x) is a probability of a whole answer; 1 − p is kept above 1e-6 so the term stays finite (its
# gradient weight is then at most 1e6, which the loop's gradient clipping bounds).
_MAX_LOG_P = float(torch.log1p(torch.tensor(-1e-6, dtype=torch.float64)))


def _log_p(marginal, log_pz, token_logp, mask) -> torch.Tensor:
    return log_likelihood(marginal, log_pz, token_logp, mask).clamp(max=_MAX_LOG_P)  # (...)


def unlikelihood(
    marginal: str, log_pz: torch.Tensor, token_logp: torch.Tensor, mask: torch.Tensor | None = None
) -> torch.Tensor:
    """−log(1 − p(d|x)) of a distractor d (its token log-probs under the K passages): (...).

    Near 0 while the mixture gives d little probability, large as d becomes the likely answer, so
    it only pushes down a wrong candidate the model actually prefers (Welleck et al.'s unlikelihood
    at the level of the whole answer)."""
    return -torch.log(-torch.expm1(_log_p(marginal, log_pz, token_logp, mask)))  # (...)


def unlikelihood_weight(
    marginal: str, log_pz: torch.Tensor, token_logp: torch.Tensor, mask: torch.Tensor | None = None
) -> torch.Tensor:
    """p/(1 − p) of a distractor: ∂ unlikelihood / ∂q = p/(1 − p) · ∂ log p(d|x) / ∂q, so its
    retriever gradient is `query_gradient` of the distractor's bracket times this: (...)."""
    lp = _log_p(marginal, log_pz, token_logp, mask)  # (...)
    return torch.exp(lp - torch.log(-torch.expm1(lp)))  # (...)
