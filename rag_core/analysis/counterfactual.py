"""What-if from a stored trace: other passages, a smaller K or another scale, with no model call.

Counterfactuals need no model call: removing passages, a smaller K or another retriever scale only
changes the prior p(z|x); every conditional p(y_i|x,z,y_<i) stays as stored.
- RAG-Sequence is exact: each passage's beam search never looks at the prior or at the other
  passages, so the hypotheses of a rerun are those of the kept passages, rescored under the new prior.
- RAG-Token (greedy) is exact when it can be certified: at each step the answer's token must still
  win the mixture. The trace keeps the top-A tokens per passage and step; a token outside a
  passage's top A has probability at most the A-th value there, which bounds every competitor.
  When another token would win, the note says where the path leaves and a rerun is needed.
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Iterable

import torch

from ..config import RAG_SEQUENCE, RAG_TOKEN
from .. import marginals
from ..marginals import prob
from ..trace import Candidate, Trace
from .scoring import AnswerScores, ForcedAnswers


@dataclass
class CfAnswer:
    decoding: str
    answer: str | None
    log_p: float  # under this decoding's marginal and the new prior
    exact: bool  # True: a full rerun would give this answer and this probability
    note: str = ""


@dataclass
class Counterfactual:
    keep: list[bool]  # which of the K passages stay
    scale: float
    log_prior: torch.Tensor  # (K,) the new log p(z|x); -inf where removed
    answers: dict[str, CfAnswer]
    table: list[dict]  # every known answer under the old and the new prior

    @property
    def prior(self) -> list[float]:
        return self.log_prior.exp().tolist()


def counterfactual_prior(trace: Trace, drop_ranks: Iterable[int] = (), k: int | None = None,
                         scale: float | None = None) -> tuple[torch.Tensor, list[bool], float]:
    """The prior after removing passages (1-based ranks), keeping the top `k`, or rescaling scores."""
    drop = set(int(r) for r in drop_ranks)
    keep = [h.rank not in drop and (k is None or h.rank <= k) for h in trace.hits]
    if not any(keep):
        raise ValueError("keep at least one passage")
    new_scale = float(scale) if scale is not None else float(trace.scale)
    if scale is None or math.isclose(new_scale, float(trace.scale)):
        base = trace.log_prior.double()  # (K,) exactly the stored prior
    else:
        base = marginals.log_prior(torch.tensor([h.score for h in trace.hits]), new_scale)  # (K,) as the pipeline computes it
    return marginals.drop_passages(base, torch.tensor(keep)), keep, new_scale


def _greedy_check(c: Candidate, lpz: torch.Tensor) -> tuple[str, int, int | None]:
    """Does greedy RAG-Token decoding under prior `lpz` still follow `c`'s path?

    Returns ("same", T, None), ("diverges", step, winning token) or ("uncertain", step, None).
    At step i a token's mixture Σ_z p(z|x) p(v|x,z,y_<i) is known exactly where v is in passage z's
    stored top-A, and bounded by the A-th value of z where it is not.
    """
    pz = lpz.double().exp()  # (K,)
    for i, chosen in enumerate(c.token_ids):
        ids = c.alt_ids[:, i, :]  # (K, A)
        vals = c.alt_logp[:, i, :].double().exp()  # (K, A)
        floor = vals.min(dim=-1).values  # (K,) any token outside z's top-A has p <= this
        tokens = set(int(t) for t in ids.flatten().tolist()) | {int(chosen)}
        lo, hi = {}, {}
        for v in tokens:
            known = torch.full_like(floor, float("nan"))  # (K,)
            hit = ids == v  # (K, A)
            rows = hit.any(dim=-1)  # (K,)
            known[rows] = (vals * hit).sum(dim=-1)[rows]
            if v == chosen:
                known = c.token_logp[:, i].double().exp()  # (K,) exact under every passage
            lo[v] = float((pz * torch.nan_to_num(known, nan=0.0)).sum())
            hi[v] = float((pz * torch.where(torch.isnan(known), floor, known)).sum())
        hi_unseen = float((pz * floor).sum())  # any token in no passage's top-A
        best_other = max([hi[v] for v in tokens if v != chosen] + [hi_unseen])
        if lo[chosen] > best_other:
            continue
        winner = max(tokens, key=lambda v: lo[v])
        rivals = max([hi[v] for v in tokens if v != winner] + [hi_unseen])
        if winner != chosen and lo[winner] > rivals:
            return "diverges", i, winner
        return "uncertain", i, None
    return "same", len(c.token_ids), None


def counterfactual(trace: Trace, drop_ranks: Iterable[int] = (), k: int | None = None, scale: float | None = None,
                   forced: ForcedAnswers | None = None) -> Counterfactual:
    """Both answers after removing passages / keeping the top k / rescaling — no model call."""
    lpz, keep, new_scale = counterfactual_prior(trace, drop_ranks, k, scale)
    kept = {z for z, on in enumerate(keep) if on}
    answers: dict[str, CfAnswer] = {}
    seq = trace.of(RAG_SEQUENCE)
    if seq:
        # A passage's beams never depend on the prior or on other passages: a rerun's hypotheses
        # are those some kept passage produced (all of them, for scored toys with no sources).
        eligible = [c for c in seq if not c.sources or c.sources & kept] or seq
        best = max(eligible, key=lambda c: c.log_p_seq(lpz))
        answers[RAG_SEQUENCE] = CfAnswer(RAG_SEQUENCE, best.answer, best.log_p_seq(lpz), all(c.sources for c in seq),
                                           "exact: the kept passages' hypotheses rescored under the new prior")
    tok = trace.answer(RAG_TOKEN)
    if tok is not None:
        beams = int(trace.settings.get("beams", 1))
        known = {c.answer: c for c in trace.candidates}
        fallback = max(known.values(), key=lambda c: c.log_p_tok(lpz))
        if beams != 1:
            answers[RAG_TOKEN] = CfAnswer(RAG_TOKEN, fallback.answer, fallback.log_p_tok(lpz), False,
                                            "beam search: the best of the known answers; a rerun may find another")
        else:
            status, step, winner = _greedy_check(tok, lpz)
            if status == "same":
                answers[RAG_TOKEN] = CfAnswer(RAG_TOKEN, tok.answer, tok.log_p_tok(lpz), True,
                                                "exact: every token of the greedy path still wins its step")
            else:
                what = (f"token {trace_token(tok, winner)!r} now wins step {step}" if status == "diverges"
                        else f"step {step} cannot be decided from the stored top tokens")
                answers[RAG_TOKEN] = CfAnswer(RAG_TOKEN, fallback.answer, fallback.log_p_tok(lpz), False,
                                                f"the greedy path changes: {what}; finishing it needs a model call "
                                                "(shown: the best of the known answers)")
    table = []
    rows = [AnswerScores.of(c) for c in trace.candidates] + (forced.items if forced else [])
    seen = set()
    for a in rows:
        key = (a.label if a.label == "expected" else "answer", a.text)
        if key in seen:
            continue
        seen.add(key)
        post = a.posterior(lpz)
        table.append({"answer": a.text, "kind": "expected" if a.label == "expected" else a.label,
                      "p_seq": prob(a.log_p_seq(lpz)), "p_tok": prob(a.log_p_tok(lpz)),
                      "p_seq_before": prob(a.log_p_seq(trace.log_prior)), "p_tok_before": prob(a.log_p_tok(trace.log_prior)),
                      "top_passage": int(post.argmax()) + 1, "top_posterior": float(post.max())})
    table.sort(key=lambda r: r["p_seq"], reverse=True)
    return Counterfactual(keep, new_scale, lpz, answers, table)


def trace_token(c: Candidate, token_id: int | None) -> str:
    """The text of a token seen among a candidate's stored alternatives."""
    if token_id is None:
        return "?"
    for z, steps in enumerate(c.alt_tokens):
        for i, alts in enumerate(steps):
            ids = c.alt_ids[z, i].tolist()
            if token_id in ids:
                return alts[ids.index(token_id)]
    if token_id in c.token_ids:
        return c.tokens[c.token_ids.index(token_id)]
    return str(token_id)
