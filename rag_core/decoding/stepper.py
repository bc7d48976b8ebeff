"""One answer, step by step, and the counterfactuals read off a finished trace (no model call).

The app's Token-vs-Sequence and Citations pages show these numbers; they come from the (K, T)
table of conditionals `log p(y_i|x,z,y_<i)` a candidate already holds, through `marginals`.

Worked example (two passages, as in `toy obama`): RAG-Token scoring "Chicago Hawaii" takes its first
word mostly from z2 (r = 0.68) and its second from z1 (r = 0.85), a "Frankenstein" answer.

>>> import torch
>>> lpz = torch.tensor([0.7, 0.3]).log()
>>> tok = torch.tensor([[0.1, 0.5], [0.5, 0.2]]).log()   # (K=2, T=2): "Chicago", "Hawaii"
>>> top_sources(lpz, tok)
[1, 0]
>>> switch_steps(top_sources(lpz, tok))
[1]

This module imports only `marginals` and `trace` (for types); it never imports Streamlit.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch

from rag_core import marginals
from rag_core.config import MIN_SHIFT, RAG_SEQUENCE, RAG_TOKEN
from rag_core.trace import Candidate, Trace


@dataclass
class Walk:
    """Every per-step number of one answer; passages on axis 0, steps on axis 1."""

    tokens: list[str]
    p_doc: np.ndarray  # (K, T) p(y_i|x,z,y_<i); NaN = never scored (fast rescoring)
    p_mix: np.ndarray  # (T,) RAG-Token mixture Σ_z p(z|x) p(y_i|x,z,y_<i)
    resp: np.ndarray  # (K, T) responsibility r_i(z)
    logp_prefix: np.ndarray  # (K, T) Σ_{j≤i} log p(y_j|x,z,y_<j); NaN where a step was never scored
    posterior: np.ndarray  # (K, T) p(z|x,y_≤i)
    log_p_tok: np.ndarray  # (T,) log p_tok(y_≤i), the RAG-Token probability of each prefix
    log_p_seq: np.ndarray  # (T,) log p_seq(y_≤i), the RAG-Sequence probability of each prefix

    @property
    def length(self) -> int:
        return len(self.tokens)


def walk(log_pz: torch.Tensor, cand: Candidate) -> Walk:
    """All steps of `cand` at once. Prefix marginals use a (T, T) lower-triangular mask, so prefix i
    is the answer cut after step i, scored by the same `marginals` functions as whole answers."""
    lpz = log_pz.double()  # (K,)
    lp = cand.token_logp.double()  # (K, T)
    t = lp.shape[-1]
    prefixes = torch.tril(torch.ones(t, t, dtype=torch.bool))  # (T prefixes, T steps)
    lp_n = lp.unsqueeze(0).expand(t, -1, -1)  # (T, K, T)
    return Walk(
        tokens=list(cand.tokens),
        p_doc=lp.exp().numpy(),
        p_mix=marginals.token_mixture(lpz, lp).exp().numpy(),
        resp=marginals.responsibilities(lpz, lp).numpy(),
        logp_prefix=torch.cumsum(lp, dim=-1).numpy(),
        posterior=marginals.prefix_posteriors(lpz, lp).numpy(),
        log_p_tok=marginals.rag_token(lpz, lp_n, prefixes).numpy(),  # (T,)
        log_p_seq=marginals.rag_sequence(lpz, lp_n, prefixes).numpy(),  # (T,)
    )


def top_sources(
    log_pz: torch.Tensor, token_logp: torch.Tensor, min_shift: float = MIN_SHIFT
) -> list[int | None]:
    """Per step, the passage with the highest responsibility r_i(z), or None when the token says
    little about its source: r_i is within `min_shift` (total variation) of the prior p(z|x), as for
    an end token or a word every passage predicts alike."""
    lpz = log_pz.double()  # (K,)
    resp = marginals.responsibilities(lpz, token_logp)  # (K, T)
    shift = 0.5 * (resp - lpz.exp().unsqueeze(-1)).abs().sum(dim=0)  # (T,) total variation from the prior
    top = resp.argmax(dim=0)  # (T,)
    return [int(z) if float(s) >= min_shift else None for z, s in zip(top, shift)]


def switch_steps(sources: list[int | None]) -> list[int]:
    """Steps whose source differs from the previous informative step's source.

    >>> switch_steps([1, None, 1, 0, 0, 2])
    [3, 5]
    """
    out, last = [], None
    for i, z in enumerate(sources):
        if z is None:
            continue
        if last is not None and z != last:
            out.append(i)
        last = z
    return out


def frankenstein_steps(trace: Trace, cand: Candidate, min_shift: float = MIN_SHIFT) -> list[int]:
    """Steps where a RAG-Token answer switches the passage it draws from (top responsibility).

    Empty: one passage explains every informative token. Non-empty: the answer is stitched from
    several passages, a "Frankenstein" that no single passage supports as a whole.
    """
    if not cand.tokens:
        return []
    return switch_steps(top_sources(trace.log_prior, cand.token_logp, min_shift))


@dataclass
class SequenceTable:
    """RAG-Sequence candidates × passages: log p(y|x,z) under thorough and fast rescoring."""

    answers: list[str]
    thorough: np.ndarray  # (N, K) log p(y|x,z); NaN where the trace never scored the pair
    fast: np.ndarray  # (N, K) the same where z produced y (z in sources), -inf elsewhere
    p_seq_thorough: np.ndarray  # (N,) NaN for a candidate with an unscored pair
    p_seq_fast: np.ndarray  # (N,)
    complete: bool  # every (candidate, passage) pair was scored (the trace used thorough rescoring)


def sequence_table(trace: Trace) -> SequenceTable:
    """Fast scores derived from the thorough ones: zero out (log -inf) every passage whose own beam
    did not produce the hypothesis. No model call; a fast-rescored trace yields NaN thorough cells."""
    cands = trace.of(RAG_SEQUENCE)
    k = trace.k
    lpz = trace.log_prior.double()  # (K,)
    thorough = np.full((len(cands), k), np.nan)  # (N, K)
    fast = np.full((len(cands), k), -np.inf)  # (N, K)
    p_th = np.full(len(cands), np.nan)  # (N,)
    p_fast = np.zeros(len(cands))  # (N,)
    for n, c in enumerate(cands):
        lp = c.token_logp.double()  # (K, T)
        scored = ~torch.isnan(lp).any(dim=-1)  # (K,)
        seq = lp.sum(dim=-1)  # (K,) NaN stays NaN
        thorough[n] = seq.numpy()
        src = torch.zeros(k, dtype=torch.bool)
        src[list(c.sources)] = True
        fast_lp = torch.where(
            src, marginals.doc_sequence_logp(lp), torch.tensor(float("-inf"), dtype=torch.float64)
        )  # (K,)
        fast[n] = fast_lp.numpy()
        p_fast[n] = float(torch.logsumexp(lpz + fast_lp, dim=-1).exp())
        if bool(scored.all()):
            p_th[n] = float(marginals.rag_sequence(lpz, lp).exp())
    return SequenceTable(
        [c.answer for c in cands], thorough, fast, p_th, p_fast, bool(~np.isnan(thorough).any())
    )


@dataclass
class Agreement:
    """Whether RAG-Token and RAG-Sequence agree on a trace (not a diagnosis verdict)."""

    kind: str  # "different answers", "same answer, different p" or "agree"
    token_answer: str
    sequence_answer: str
    log_ratio: float  # log p_seq - log p_tok of the RAG-Sequence answer (same answer) or NaN


def compare(trace: Trace, factor: float = 2.0) -> Agreement | None:
    """Do the two models disagree? Different answers, or the same answer with p_seq and p_tok more
    than `factor` apart. None when one of the two decodings is missing."""
    tok, seq = trace.answer(RAG_TOKEN), trace.answer(RAG_SEQUENCE)
    if tok is None or seq is None:
        return None
    if tok.token_ids != seq.token_ids:
        return Agreement("different answers", tok.answer, seq.answer, float("nan"))
    ratio = seq.log_p_seq(trace.log_prior) - seq.log_p_tok(trace.log_prior)
    kind = "same answer, different p" if abs(ratio) > np.log(factor) else "agree"
    return Agreement(kind, tok.answer, seq.answer, ratio)


@dataclass
class Dropped:
    """One answer re-marginalised after removing passages; the conditionals stay as decoded."""

    log_p_seq: float
    log_p_tok: float
    citation: np.ndarray  # (K,) p(z|x,y) under the renormalised prior; 0 for dropped passages
    prior: np.ndarray  # (K,) the renormalised prior


def remarginalise(log_pz: torch.Tensor, cand: Candidate, keep: list[bool]) -> Dropped:
    """Both marginals and the citation of `cand` with only the passages in `keep` (at least one)."""
    mask = torch.tensor(keep, dtype=torch.bool)  # (K,)
    if not bool(mask.any()):
        raise ValueError("keep at least one passage")
    lpz = marginals.drop_passages(log_pz, mask)  # (K,) -inf where dropped
    post = marginals.citation(lpz, cand.token_logp).masked_fill(~mask, 0.0)  # (K,)
    return Dropped(
        float(marginals.rag_sequence(lpz, cand.token_logp)),
        float(marginals.rag_token(lpz, cand.token_logp)),
        post.numpy(),
        lpz.exp().numpy(),
    )
