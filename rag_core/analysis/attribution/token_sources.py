"""Where each answer token came from: one passage, several passages, or the generator alone.

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
labelled as such and left out of the shares. These machine labels are what the eval rows'
`weights_share` counts; they never change.

"weights" says what the passages did not do (raise the token), not that they played no part: a
passage may well hold the token the model already knew ("1989" for the Berlin Wall, from a top
passage that says 1989). So the screen splits it by one more exact check (`in_passages`): KNOWN,
"in a passage, already known", when some retrieved passage (title or text) contains the word the
token is part of (whole word, case-folded); UNSEEN, "not in any passage", when none does. `kind`
gives the shown category, `LABELS` its words.

>>> import torch
>>> lp = torch.tensor([0.5, 0.5]).log()                                # p(z|x), K = 2
>>> tok = torch.tensor([[0.9, 0.6, 0.5], [0.1, 0.6, 0.5]]).log()      # (K, T) p(y_i|x,z,y_<i)
>>> closed = torch.tensor([0.05, 0.05, 0.4]).log()                    # (T,) p_closed(y_i|x,y_<i)
>>> [s.label for s in token_sources(lp, tok, closed)]
['passage', 'several', 'weights']
>>> round(token_sources(lp, tok, closed)[0].gain, 3)                  # log(0.5 / 0.05)
2.303
>>> found = token_sources(lp, tok, closed, passages=["Paris", "in 1989"], tokens=[" Paris", " in", " 1989"])
>>> [kind(s) for s in found]
['passage', 'several', 'known']
"""

from __future__ import annotations

import math
import re
from collections.abc import Sequence
from dataclasses import dataclass

import torch

from rag_core import marginals
from rag_core.config import RAG_SEQUENCE
from rag_core.trace import Candidate, Trace

PASSAGE, SEVERAL, WEIGHTS, FORCED, END = "passage", "several", "weights", "forced", "end"
KNOWN, UNSEEN = "known", "unseen"  # WEIGHTS as shown: a retrieved passage holds the token's word, or none
LABELS = {
    PASSAGE: "from one passage",
    SEVERAL: "from several passages",
    WEIGHTS: "already known to the model",
    KNOWN: "in a passage, already known",
    UNSEEN: "not in any passage",
    FORCED: "forced by the generation config",
    END: "end of the answer",
}
# What each shown category measures, in one line (the app writes it under each strip).
MEANINGS = {
    PASSAGE: "the passages make it at least twice as likely as the model alone, one passage carrying "
    "two thirds of that",
    SEVERAL: "the passages make it at least twice as likely, no one passage carrying two thirds",
    WEIGHTS: "the model alone already gives it at least half the probability the passages do",
    KNOWN: "the model alone already gives it at least half the probability the passages do, and a "
    "retrieved passage contains its word",
    UNSEEN: "the model alone already gives it, and no retrieved passage contains its word",
}
# The content categories of the strip, in the order of its key (WEIGHTS only for tokens whose
# passages were not checked for their word).
SHOWN = (PASSAGE, SEVERAL, KNOWN, UNSEEN, WEIGHTS)
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
    in_passage: bool | None = None  # a retrieved passage contains the token's word (None: not checked)


def kind(s: TokenSource) -> str:
    """The category shown for a token: its label, with WEIGHTS split into KNOWN and UNSEEN once the
    passages were checked for its word."""
    if s.label != WEIGHTS or s.in_passage is None:
        return s.label
    return KNOWN if s.in_passage else UNSEEN


def in_passages(tokens: Sequence[str], passages: Sequence[str]) -> list[bool]:
    """Per token, whether one retrieved passage contains the word(s) the token is part of: the
    tokens are joined into the answer's text, each token's words are the runs of word characters
    its span overlaps (" Mel" and "ville" both belong to "Melville"), and every one of them must
    occur in the same passage as a whole word, case-folded. A blank token (a lone space before
    "1989") belongs to the word right after it; a token with no word character (".") is looked up
    as its own text, spaces stripped; a blank token with no word after it is in no passage.

    >>> in_passages([" ", "198", "9", " Berlin", "."], ["The Wall fell in 1989."])
    [True, True, True, False, True]
    >>> in_passages([" Mel", "ville"], ["Melbourne is a city"]), in_passages([" Mel", "ville"], ["MELVILLE"])
    ([False, False], [True, True])
    """
    text = "".join(tokens)
    words = [(m.start(), m.end(), m.group()) for m in re.finditer(r"\w+", text)]
    folded = [p.casefold() for p in passages]
    out, start = [], 0
    for tok in tokens:
        end = start + len(tok)
        mine = [w for a, b, w in words if a < end and b > start]
        if not tok.strip():  # a blank token: the word it is the space before
            mine = [w for a, _, w in words if a == end]
        needles = [re.compile(rf"(?<!\w){re.escape(w.casefold())}(?!\w)") for w in mine]
        bare = tok.strip().casefold()
        out.append(
            any(all(n.search(p) for n in needles) for p in folded)
            if needles
            else bool(bare) and any(bare in p for p in folded)
        )
        start = end
    return out


def label_for(gain: float, top_share: float) -> str:
    """The label of a content token from its gain and its top passage's share.

    >>> label_for(0.1, 0.99), label_for(2.0, 0.9), label_for(2.0, 0.5)
    ('weights', 'passage', 'several')
    """
    if not gain >= GAIN_MIN:  # NaN (an unscored token) counts as no gain
        return WEIGHTS
    return PASSAGE if top_share >= SHARE_MIN else SEVERAL


def step_predictive(
    log_pz: torch.Tensor, token_logp: torch.Tensor, marginal: str = "token"
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


def token_sources(
    log_pz: torch.Tensor,
    token_logp: torch.Tensor,
    closed_logp: torch.Tensor,
    forced: Sequence[bool] | None = None,
    ends_with_eos: bool = False,
    marginal: str = "token",
    passages: Sequence[str] | None = None,
    tokens: Sequence[str] | None = None,
) -> list[TokenSource]:
    """One `TokenSource` per answer step. log_pz (K,), token_logp (K, T), closed_logp (T,);
    `marginal`: "token" (RAG-Token's answer) or "sequence" (RAG-Sequence's). With the K passages'
    texts and the T tokens' texts, each source also says whether a passage holds its word."""
    t = token_logp.shape[-1]
    mix, resp = step_predictive(log_pz, token_logp, marginal)  # (T,), (K, T)
    closed = closed_logp.double()  # (T,)
    gain = mix - closed  # (T,)
    share, top = resp.max(dim=0)  # (T,), (T,)
    forced = list(forced or [False] * t)
    held = in_passages(tokens, passages) if passages is not None and tokens is not None else [None] * t
    out = []
    for i in range(t):
        if forced[i]:
            label = FORCED
        elif ends_with_eos and i == t - 1:
            label = END
        else:
            label = label_for(float(gain[i]), float(share[i]))
        out.append(
            TokenSource(
                i,
                label,
                int(top[i]),
                float(share[i]),
                float(closed[i]),
                float(mix[i]),
                float(gain[i]),
                resp[:, i].tolist(),
                held[i],
            )
        )
    return out


def shares(sources: Sequence[TokenSource], shown: bool = False) -> dict[str, float]:
    """The fraction of content tokens (forced and end tokens left out) under each label; all zero
    for an answer with no content token. `shown`: under each shown category (`kind`) instead, WEIGHTS
    split into KNOWN and UNSEEN (what stays WEIGHTS was not checked against the passages).

    >>> s = [TokenSource(0, "passage", 0, 1.0, 0.0, 0.0, 0.0, [1.0]),
    ...      TokenSource(1, "weights", 0, 1.0, 0.0, 0.0, 0.0, [1.0], True)]
    >>> shares(s)
    {'passage': 0.5, 'several': 0.0, 'weights': 0.5}
    >>> shares(s, shown=True)
    {'passage': 0.5, 'several': 0.0, 'known': 0.5, 'unseen': 0.0, 'weights': 0.0}
    """
    names = SHOWN if shown else (PASSAGE, SEVERAL, WEIGHTS)
    content = [kind(s) if shown else s.label for s in sources if s.label in (PASSAGE, SEVERAL, WEIGHTS)]
    n = len(content)
    return {lab: (content.count(lab) / n if n else 0.0) for lab in names}


def candidate_sources(
    log_pz: torch.Tensor, cand: Candidate, closed_logp: torch.Tensor, passages: Sequence[str] | None = None
) -> list[TokenSource]:
    """The token sources of one trace candidate, under its own decoding's marginal; `closed_logp`
    (T',) T' ≥ T: its closed-book row (a batched row may run past the answer's end); `passages`:
    the K passages' texts (`passage_texts`), to split WEIGHTS into KNOWN and UNSEEN."""
    t = len(cand.token_ids)
    marginal = "sequence" if cand.decoding == RAG_SEQUENCE else "token"
    return token_sources(
        log_pz, cand.token_logp, closed_logp[:t], cand.forced, cand.finished, marginal, passages, cand.tokens
    )


def passage_texts(trace: Trace) -> list[str]:
    """What the generator reads of each retrieved passage, for `in_passages`: title and text."""
    return [f"{h.passage.title}\n{h.passage.text}" for h in trace.hits]


def credit_differences(
    sources: Sequence[TokenSource], log_pz: torch.Tensor, token_logp: torch.Tensor
) -> list[int]:
    """Steps credited to one passage (PASSAGE) other than the passage with the largest RAG-Token
    responsibility r_i(z): where a strip of these sources and a strip coloured by r_i(z) (Token vs
    Sequence's) show a token in different passages' colours. None for a RAG-Token answer's sources,
    which take their top passage from r_i(z) too; a RAG-Sequence answer's take it from the prefix
    posterior p(z|x,y_≤i), and the two can differ."""
    top = marginals.responsibilities(log_pz, token_logp).argmax(dim=0)  # (T,)
    return [s.step for s in sources if s.label == PASSAGE and s.top != int(top[s.step])]


def differing_steps(a: Sequence[TokenSource], b: Sequence[TokenSource]) -> list[int]:
    """Steps at which two source lists of the same tokens (an answer under RAG-Token's and under
    RAG-Sequence's weighting) show a token differently: another category, or another passage."""
    return [x.step for x, y in zip(a, b) if kind(x) != kind(y) or (x.label == PASSAGE and x.top != y.top)]
