"""Where each answer token came from: one passage, several passages, or the generator's own weights.

For answer token y_i, the RAG-Token mixture p_rag(y_i) = Σ_z p(z|x) p(y_i|x,z,y_<i) (for a
RAG-Sequence answer the same sum weighted by p(z|x,y_<i), see `step_predictive`) is set beside
the closed-book p_closed(y_i|x,y_<i): the same generator, the same prefix, no passage (one more
teacher-forced row, `Pipeline.closed_book_scores`). Two exact numbers then decide the label:

- the retrieval gain g_i = log p_rag(y_i) − log p_closed(y_i): how much reading passages raised
  the token;
- the responsibilities r_i(z) = p(z|x) p(y_i|x,z,y_<i) / p_rag(y_i) (`marginals.responsibilities`):
  which passage raised it.

A token is "weights" when g_i < log 2 (with no passage the generator already gives it at least half
the probability the passages do), else "passage" when one passage holds at least two thirds of
r_i(z), else "several". Forced tokens (the generation config chose them) and the end token are
labelled as such and left out of the shares.

>>> import torch
>>> lp = torch.tensor([0.5, 0.5]).log()                                # p(z|x), K = 2
>>> tok = torch.tensor([[0.9, 0.6, 0.5], [0.1, 0.6, 0.5]]).log()      # (K, T) p(y_i|x,z,y_<i)
>>> closed = torch.tensor([0.05, 0.05, 0.4]).log()                    # (T,) p_closed(y_i|x,y_<i)
>>> [s.label for s in token_sources(lp, tok, closed)]
['passage', 'several', 'weights']
>>> round(token_sources(lp, tok, closed)[0].gain, 3)                  # log(0.5 / 0.05)
2.303
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Sequence

import torch

from .. import marginals
from ..config import RAG_SEQUENCE
from ..trace import Candidate

PASSAGE, SEVERAL, WEIGHTS, FORCED, END = "passage", "several", "weights", "forced", "end"
LABELS = {PASSAGE: "from one passage", SEVERAL: "from several passages", WEIGHTS: "from the model's weights",
          FORCED: "forced by the generation config", END: "end of the answer"}
GAIN_MIN = math.log(2.0)  # retrieval must at least double a token's probability to be credited with it
SHARE_MIN = 2.0 / 3.0  # one passage holding this much of a token's responsibility "carried" it


@dataclass
class TokenSource:
    step: int
    label: str  # one of PASSAGE, SEVERAL, WEIGHTS, FORCED, END
    top: int  # 0-based passage with the largest responsibility
    top_share: float  # its responsibility r_i(top)
    logp_closed: float  # log p_closed(y_i|x,y_<i)
    logp_rag: float  # log Σ_z p(z|x) p(y_i|x,z,y_<i)
    gain: float  # logp_rag − logp_closed (nats)
    responsibility: list[float]  # r_i(z) for every passage


def label_for(gain: float, top_share: float) -> str:
    """The label of a content token from its gain and its top passage's share.

    >>> label_for(0.1, 0.99), label_for(2.0, 0.9), label_for(2.0, 0.5)
    ('weights', 'passage', 'several')
    """
    if not gain >= GAIN_MIN:  # NaN (an unscored token) counts as no gain
        return WEIGHTS
    return PASSAGE if top_share >= SHARE_MIN else SEVERAL


def step_predictive(log_pz: torch.Tensor, token_logp: torch.Tensor, marginal: str = "token"
                    ) -> tuple[torch.Tensor, torch.Tensor]:
    """log p_rag(y_i|x,y_<i) (T,) and the responsibilities (K, T) under one marginal.

    RAG-Token weighs the passages by the prior at every step. RAG-Sequence weighs them by the
    posterior before the step, p(z|x,y_<i), so the steps' log-probabilities add up to log p_seq(y)
    and the responsibility at step i is the prefix posterior p(z|x,y_≤i)."""
    if marginal == "token":
        return marginals.token_mixture(log_pz, token_logp), marginals.responsibilities(log_pz, token_logp)
    before = marginals.prefix_weights(log_pz, token_logp)  # (K, T) log p(z|x,y_<i)
    joint = before + torch.nan_to_num(token_logp.double(), nan=marginals.NEG_INF)  # (K, T)
    return torch.logsumexp(joint, dim=-2), marginals.prefix_posteriors(log_pz, token_logp)  # (T,), (K, T)


def token_sources(log_pz: torch.Tensor, token_logp: torch.Tensor, closed_logp: torch.Tensor,
                  forced: Sequence[bool] | None = None, ends_with_eos: bool = False, marginal: str = "token"
                  ) -> list[TokenSource]:
    """One `TokenSource` per answer step. log_pz (K,), token_logp (K, T), closed_logp (T,);
    `marginal`: "token" (RAG-Token's answer) or "sequence" (RAG-Sequence's)."""
    t = token_logp.shape[-1]
    mix, resp = step_predictive(log_pz, token_logp, marginal)  # (T,), (K, T)
    closed = closed_logp.double()  # (T,)
    gain = mix - closed  # (T,)
    share, top = resp.max(dim=0)  # (T,), (T,)
    forced = list(forced or [False] * t)
    out = []
    for i in range(t):
        if forced[i]:
            label = FORCED
        elif ends_with_eos and i == t - 1:
            label = END
        else:
            label = label_for(float(gain[i]), float(share[i]))
        out.append(TokenSource(i, label, int(top[i]), float(share[i]), float(closed[i]), float(mix[i]), float(gain[i]),
                               resp[:, i].tolist()))
    return out


def shares(sources: Sequence[TokenSource]) -> dict[str, float]:
    """The fraction of content tokens (forced and end tokens left out) under each label; all zero
    for an answer with no content token.

    >>> s = [TokenSource(0, "passage", 0, 1.0, 0.0, 0.0, 0.0, [1.0]), TokenSource(1, "weights", 0, 1.0, 0.0, 0.0, 0.0, [1.0])]
    >>> shares(s)
    {'passage': 0.5, 'several': 0.0, 'weights': 0.5}
    """
    content = [s.label for s in sources if s.label in (PASSAGE, SEVERAL, WEIGHTS)]
    n = len(content)
    return {lab: (content.count(lab) / n if n else 0.0) for lab in (PASSAGE, SEVERAL, WEIGHTS)}


def candidate_sources(log_pz: torch.Tensor, cand: Candidate, closed_logp: torch.Tensor) -> list[TokenSource]:
    """The token sources of one trace candidate, under its own decoding's marginal; `closed_logp`
    (T',) T' ≥ T: its closed-book row (a batched row may run past the answer's end)."""
    t = len(cand.token_ids)
    marginal = "sequence" if cand.decoding == RAG_SEQUENCE else "token"
    return token_sources(log_pz, cand.token_logp, closed_logp[:t], cand.forced, cand.finished, marginal)
