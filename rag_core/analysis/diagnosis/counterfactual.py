"""What-if from a stored trace: other passages, a smaller K or another scale, decided from the stored
numbers where they suffice, and by one model call (`rerun`) where they do not.

Removing passages, a smaller K or another retriever scale only changes the prior p(z|x); every
conditional p(y_i|x,z,y_<i) stays as stored.
- Nothing changed (every passage kept, the same scale): the answers are the trace's own, token for
  token and with its probabilities. The stored-token bounds below may fail to certify even the
  trace's own greedy path, which the search on this very prior chose.
- RAG-Sequence is exact: each passage's beam search never looks at the prior or at the other
  passages, so the hypotheses of a rerun are those of the kept passages, rescored under the new prior.
- RAG-Token (greedy) is exact when it can be certified: at each step the answer's token must still
  win the mixture. The trace keeps the top-A tokens per passage and step; a token outside a
  passage's top A has probability at most the A-th value there, which bounds every competitor.
  Where another token would win, or the bounds cannot tell, the answer is not known: it "needs a
  model call", never another answer put in its place. So does RAG-Token beam search under a
  changed prior (which hypotheses the beams keep depends on every step's mixture).
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from dataclasses import dataclass, replace

import torch

from rag_core import marginals
from rag_core.analysis.scoring import AnswerScores, ForcedAnswers
from rag_core.config import RAG_SEQUENCE, RAG_TOKEN
from rag_core.decoding.answering import analyse
from rag_core.marginals import prob
from rag_core.pipeline import trace_settings
from rag_core.trace import Candidate, Trace, log_p_under

NEEDS_CALL = "needs a model call"
# A stored-token certificate must beat its rival by this relative margin: the search compared
# float32 mixtures, so a closer race may have gone either way.
MARGIN = 1e-5


@dataclass
class CfAnswer:
    decoding: str
    answer: str | None  # None: the stored numbers cannot decide it; `rerun` makes the model call
    log_p: float | None  # under this decoding's marginal and the new prior; None with no answer
    exact: bool  # True: a full rerun would give this answer and this probability
    note: str = ""
    token_ids: tuple[int, ...] = ()
    computed: bool = False  # True: the answer of a model call (`rerun`), not read off the trace

    @property
    def needs_model_call(self) -> bool:
        return self.answer is None


@dataclass
class Counterfactual:
    keep: list[bool]  # which of the K passages stay
    scale: float
    log_prior: torch.Tensor  # (K,) the new log p(z|x); -inf where removed
    answers: dict[str, CfAnswer]
    table: list[dict]  # every known answer under the old and the new prior
    unchanged: bool = False  # every passage kept at the trace's scale: the trace itself

    @property
    def prior(self) -> list[float]:
        return self.log_prior.exp().tolist()

    @property
    def needs_model_call(self) -> bool:
        return any(a.needs_model_call for a in self.answers.values())


def counterfactual_prior(
    trace: Trace, drop_ranks: Iterable[int] = (), k: int | None = None, scale: float | None = None
) -> tuple[torch.Tensor, list[bool], float]:
    """The prior after removing passages (1-based ranks), keeping the top `k`, or rescaling scores.
    With nothing changed it is the stored prior itself, not a renormalised copy."""
    drop = set(int(r) for r in drop_ranks)
    keep = [h.rank not in drop and (k is None or h.rank <= k) for h in trace.hits]
    if not any(keep):
        raise ValueError("keep at least one passage")
    same_scale = scale is None or math.isclose(float(scale), float(trace.scale))
    new_scale = float(trace.scale) if same_scale else float(scale)
    if same_scale:
        base = trace.log_prior.double()  # (K,) exactly the stored prior
        if all(keep):
            return base, keep, new_scale
    else:
        base = marginals.log_prior(
            torch.tensor([h.score for h in trace.hits]), new_scale
        )  # (K,) as the pipeline computes it
    return marginals.drop_passages(base, torch.tensor(keep)), keep, new_scale


def _greedy_check(c: Candidate, lpz: torch.Tensor) -> tuple[str, int, int | None]:
    """Does greedy RAG-Token decoding under prior `lpz` still follow `c`'s path?

    Returns ("same", T, None), ("diverges", step, winning token) or ("uncertain", step, None).
    At step i a token's mixture Σ_z p(z|x) p(v|x,z,y_<i) is known exactly where v is in passage z's
    stored top-A, and bounded by the A-th value of z where it is not. A step whose token the
    generation config forced (a first token, an end token at the limit) is taken whatever the prior.
    """
    pz = lpz.double().exp()  # (K,)
    for i, chosen in enumerate(c.token_ids):
        if i < len(c.forced) and c.forced[i]:
            continue
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
        if lo[chosen] > best_other * (1 + MARGIN):
            continue
        winner = max(tokens, key=lambda v: lo[v])
        rivals = max([hi[v] for v in tokens if v != winner] + [hi_unseen])
        if winner != chosen and lo[winner] > rivals * (1 + MARGIN):
            return "diverges", i, winner
        return "uncertain", i, None
    return "same", len(c.token_ids), None


def _log_p(c: Candidate, decoding: str, lpz: torch.Tensor) -> float:
    return log_p_under(c, decoding, lpz)


def _own(trace: Trace, decoding: str, note: str, computed: bool = False) -> CfAnswer | None:
    """The trace's own answer of `decoding`, with its probability under the trace's prior."""
    c = trace.answer(decoding)
    if c is None:
        return None
    log_p = _log_p(c, decoding, trace.log_prior)
    return CfAnswer(decoding, c.answer, log_p, True, note, tuple(c.token_ids), computed)


def _token_answer(trace: Trace, tok: Candidate, lpz: torch.Tensor) -> CfAnswer:
    """RAG-Token under a changed prior: the stored path where it is certified, else no answer."""
    if (trace.settings.beams or 1) != 1:
        return CfAnswer(
            RAG_TOKEN,
            None,
            None,
            False,
            "beam search: which hypotheses the beams keep under "
            f"the new prior cannot be read from the stored numbers; the answer {NEEDS_CALL}",
        )
    status, step, winner = _greedy_check(tok, lpz)
    if status == "same":
        return CfAnswer(
            RAG_TOKEN,
            tok.answer,
            tok.log_p_tok(lpz),
            True,
            "exact: every token of the greedy path still wins its step",
            tuple(tok.token_ids),
        )
    what = (
        f"token {trace_token(tok, winner)!r} now wins step {step}"
        if status == "diverges"
        else f"step {step} cannot be decided from the stored top tokens"
    )
    return CfAnswer(RAG_TOKEN, None, None, False, f"the greedy path changes: {what}; the answer {NEEDS_CALL}")


def counterfactual(
    trace: Trace,
    drop_ranks: Iterable[int] = (),
    k: int | None = None,
    scale: float | None = None,
    forced: ForcedAnswers | None = None,
) -> Counterfactual:
    """Both answers after removing passages / keeping the top k / rescaling, from the stored numbers;
    an answer they cannot decide comes back with `needs_model_call` (see `rerun`)."""
    lpz, keep, new_scale = counterfactual_prior(trace, drop_ranks, k, scale)
    unchanged = all(keep) and new_scale == float(trace.scale)
    kept = {z for z, on in enumerate(keep) if on}
    answers: dict[str, CfAnswer] = {}
    if unchanged:
        for d in (RAG_TOKEN, RAG_SEQUENCE):
            own = _own(trace, d, "unchanged: every passage kept at the same scale, so the trace's own answer")
            if own is not None:
                answers[d] = own
    seq = trace.of(RAG_SEQUENCE)
    if seq and not unchanged:
        # A passage's beams never depend on the prior or on other passages: a rerun's hypotheses
        # are those some kept passage produced (all of them, for scored toys with no sources).
        eligible = [c for c in seq if not c.sources or c.sources & kept] or seq
        best = max(eligible, key=lambda c: c.log_p_seq(lpz))
        answers[RAG_SEQUENCE] = CfAnswer(
            RAG_SEQUENCE,
            best.answer,
            best.log_p_seq(lpz),
            all(c.sources for c in seq),
            "exact: the kept passages' hypotheses rescored under the new prior",
            tuple(best.token_ids),
        )
    tok = trace.answer(RAG_TOKEN)
    if tok is not None and not unchanged:
        answers[RAG_TOKEN] = _token_answer(trace, tok, lpz)
    table = []
    rows = [AnswerScores.of(c) for c in trace.candidates] + (forced.items if forced else [])
    seen = set()
    for a in rows:
        key = (a.label if a.label == "expected" else "answer", a.text)
        if key in seen:
            continue
        seen.add(key)
        post = a.posterior(lpz)
        table.append(
            {
                "answer": a.text,
                "kind": "expected" if a.label == "expected" else a.label,
                "p_seq": prob(a.log_p_seq(lpz)),
                "p_tok": prob(a.log_p_tok(lpz)),
                "p_seq_before": prob(a.log_p_seq(trace.log_prior)),
                "p_tok_before": prob(a.log_p_tok(trace.log_prior)),
                "top_passage": int(post.argmax()) + 1,
                "top_posterior": float(post.max()),
            }
        )
    table.sort(key=lambda r: r["p_seq"], reverse=True)
    return Counterfactual(keep, new_scale, lpz, answers, table, unchanged)


def rerun(
    pipe, trace: Trace, drop_ranks: Iterable[int] = (), k: int | None = None, scale: float | None = None
) -> Trace:
    """The model call an undecided counterfactual needs: the kept passages decoded again under the
    new prior, with the trace's own settings (decoding, beams, length limit and penalty,
    rescoring), by the engine's one decoding path. `pipe`: the pipeline of the trace's stack."""
    lpz, keep, new_scale = counterfactual_prior(trace, drop_ranks, k, scale)
    hits = [h for h, on in zip(trace.hits, keep) if on]
    log_pz = lpz[torch.tensor(keep)]  # (K',) the new prior over the kept passages, summing to 1
    settings = trace_settings(pipe.settings, trace).with_(k=len(hits), scale=new_scale)
    with pipe.models.lock:  # the shared generator serves one query at a time
        return analyse(pipe.models.generator, trace.question, hits, log_pz, settings, trace.index, new_scale)


def with_computed(cf: Counterfactual, full: Trace) -> Counterfactual:
    """`cf` with every answer it could not decide taken from `full`, the `rerun` of its settings."""
    answers = dict(cf.answers)
    for d, a in cf.answers.items():
        if a.needs_model_call:
            note = f"computed: the generator decoded the {full.k} kept passages again under the new prior"
            answers[d] = _own(full, d, note + ", with the trace's settings", computed=True) or a
    return replace(cf, answers=answers)


def answer_candidate(
    trace: Trace, cf: Counterfactual, decoding: str, full: Trace | None = None
) -> tuple[Trace, Candidate, torch.Tensor | None] | None:
    """Where a counterfactual answer lives, to judge it as any answer is judged: (the trace that holds
    it, its candidate, the prior to score it under: None for that trace's own). A computed answer is
    `full`'s (the `rerun`); one read off the stored numbers is the trace's candidate under the new
    prior, or under the trace's own prior when nothing changed (so an unchanged counterfactual is
    judged exactly as the answer card). None: no answer yet."""
    a = cf.answers.get(decoding)
    if a is None or a.needs_model_call:
        return None
    if a.computed:
        return None if full is None or full.answer(decoding) is None else (full, full.answer(decoding), None)
    cand = next((c for c in trace.of(decoding) if tuple(c.token_ids) == a.token_ids), None)
    return None if cand is None else (trace, cand, None if cf.unchanged else cf.log_prior)


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
