"""What each passage is worth to the stuffed reading's answer, set beside what the mixture says of
the same answer: the numbers the Ask, Token vs Sequence and Citations pages draw.

The stuffed reading (`decoding/stuffed.py`) reads the K passages in one prompt; its exact
leave-one-out gives log p(y_i | x, every passage but z, y_<i) for each z. Taking z out costs the
answer `worth` nats, per token `token_worth`. The mixture reads the same answer under each passage
alone, log p(y_i | x, z, y_<i), and its posterior p(z|x,y) ∝ p(z|x) Π_i p(y_i|x,z,y_<i) is the
passage it cites. Whether the stuffed reading leans on the passage the mixture cites is a finding
of each question (`leans_on == cites`), computed here, never written by hand.

>>> import torch
>>> lp = torch.log(torch.tensor([[0.5, 1.0]]))  # (1, T) p(y|x, all) = 0.5
>>> loo = torch.log(torch.tensor([[0.1, 1.0], [0.5, 0.9]]))  # (K, T) without z1: 0.1; without z2: 0.45
>>> w = token_worth(lp, loo)  # (K, T) nats per token
>>> [round(v, 3) for v in w[0].tolist()], [round(v, 3) for v in w[1].tolist()]
([1.609, 0.0], [0.0, 0.105])
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch

from rag_core import marginals
from rag_core.analysis.matching import normalize_answer
from rag_core.config import STUFFED
from rag_core.decoding.stuffed import OrderReading, leans_on, p_without, worth
from rag_core.trace import Candidate, Trace


@dataclass
class StuffedWorth:
    """The stuffed reading's chosen answer and what each of the K passages is worth to it."""

    answer: Candidate
    p: float  # p(y | x, all K passages)
    p_without: list[float]  # (K,) p(y | x, every passage but z)
    worth: np.ndarray  # (K,) nats: log p(y|x, all) − log p(y|x, all but z)
    token_worth: np.ndarray  # (K, T) nats per token
    p_token: np.ndarray  # (T,) p(y_i | x, all, y_<i)
    p_token_without: np.ndarray  # (K, T) p(y_i | x, all but z, y_<i)
    mixture: np.ndarray | None  # (K,) the mixture's posterior p(z|x,y) of the same answer
    leans_on: int  # 0-based: the passage whose removal costs the answer most
    cites: int | None  # 0-based: the passage the mixture's posterior puts first (None: not read)

    @property
    def agree(self) -> bool | None:
        return None if self.cites is None else self.leans_on == self.cites


def token_worth(answer_logp: torch.Tensor, loo: torch.Tensor) -> torch.Tensor:
    """(K, T) log p(y_i|x, all, y_<i) − log p(y_i|x, all but z, y_<i): answer_logp (1, T), loo (K, T)."""
    return answer_logp.double() - loo.double()  # (K, T), the one row broadcast over the K


def of(trace: Trace) -> StuffedWorth | None:
    """The stuffed reading's worth table for `trace`; None when it has no stuffed answer with a
    leave-one-out (not read, or an empty answer)."""
    best = trace.answer(STUFFED)
    loo = trace.stuffed.leave_one_out if trace.stuffed is not None else None
    if best is None or loo is None or not best.token_ids:
        return None
    whole = worth(best.token_logp[0], loo)  # (K,)
    alone = trace.stuffed.alone  # (K, T) or None
    mixture = None if alone is None else marginals.citation(trace.log_prior, alone).numpy()  # (K,)
    return StuffedWorth(
        answer=best,
        p=float(best.token_logp[0].double().sum().exp()),  # () p(y | x, all)
        p_without=p_without(loo),
        worth=whole.numpy(),
        token_worth=token_worth(best.token_logp, loo).numpy(),  # (K, T)
        p_token=best.token_logp[0].double().exp().numpy(),  # (T,)
        p_token_without=loo.double().exp().numpy(),  # (K, T)
        mixture=mixture,
        leans_on=leans_on(best.token_logp[0], loo),
        cites=None if mixture is None else int(mixture.argmax()),
    )


def changes_answer(reading: OrderReading, answer: str) -> bool:
    """Whether an order's answer is another one than `answer` (SQuAD normalisation: "Paris." is
    "Paris").

    >>> r = OrderReading("reversed", None, (1, 0), "Paris.", [], torch.zeros(0), 0.0)
    >>> changes_answer(r, "paris"), changes_answer(r, "Lyon")
    (False, True)
    """
    return normalize_answer(reading.answer) != normalize_answer(answer)
