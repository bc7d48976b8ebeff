"""The search itself: greedy and transformers' beam search over a mixture of generator rows.

`Search` is one search (RAG-Token's over all K passages under the prior, or one passage's beam
for RAG-Sequence and closed-book); `run_lockstep` advances any number of them together over one
`RowPool` of generator rows keyed by (passage, prefix), one `advance` call a step. The rule they
follow is written at the top of `decoding`, which builds the searches the two models need.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import torch

from rag_core.generators.base import Generator, GenState

NAN = float("nan")
NEG_INF = float("-inf")


TOP_ALTERNATIVES = 5  # alternative tokens a trace keeps per step and passage, for the UI and the bounds


@dataclass(frozen=True)
class SearchSettings:
    """How to search; `of` reads them off a question's AnswerSettings."""

    beams: int = 1  # 1 = argmax greedy; >1 = transformers' beam search
    max_new_tokens: int = 16  # answer tokens at most, end token included
    length_penalty: float = (
        1.0  # finished beams rank by Σ log p / T ** length_penalty (transformers' default)
    )
    early_stopping: bool = False  # transformers' default; True stops once B hypotheses are finished
    top_alternatives: int = TOP_ALTERNATIVES  # alternative tokens kept per step and passage for the UI

    @classmethod
    def of(cls, settings, top_alternatives: int = TOP_ALTERNATIVES) -> SearchSettings:
        """The search of an AnswerSettings; `top_alternatives` per step for the UI (1: none shown)."""
        return cls(
            settings.beams,
            settings.max_new_tokens,
            settings.length_penalty,
            settings.early_stopping,
            top_alternatives,
        )


@dataclass
class Scored:
    """One answer with everything the marginals and the trace need."""

    tokens: list[int]  # answer token ids, end token included when the answer ended with one
    token_logp: torch.Tensor  # (K, T) log p(y_i | x, z, y_<i); NaN where the pair was not scored
    alt_ids: torch.Tensor  # (K, T, A) the A most likely tokens at each step under each passage
    alt_logp: torch.Tensor  # (K, T, A) their log-probabilities
    sources: set[int] = field(default_factory=set)  # RAG-Sequence: the passages whose beam produced it
    finished: bool = True  # False when the length limit cut it (or forced its end token)
    forced: list[bool] = field(default_factory=list)  # (T,) steps whose token the generation config forced
    search_score: float = NAN  # the search's ranking score: Σ processed log p / T ** length_penalty

    @property
    def length(self) -> int:
        return len(self.tokens)


def topk(logp: torch.Tensor, a: int) -> tuple[torch.Tensor, torch.Tensor]:
    vals, ids = logp.topk(min(a, logp.shape[-1]), dim=-1)  # (..., A)
    return ids, vals


def forced_tokens(gen: Generator, step: int, max_new_tokens: int) -> list[int] | None:
    """The tokens the generation config forces at `step` (0-based), as transformers' processors do.

    ForcedEOS acts at the last allowed step and runs after ForcedBOS, so it wins when both apply.
    """
    eos = getattr(gen, "forced_eos_ids", None)
    if eos and step == max_new_tokens - 1:
        return sorted(eos)
    bos = getattr(gen, "forced_bos_id", None)
    if bos is not None and step == 0:
        return [bos]
    return None


def _process(logp: torch.Tensor, forced: list[int] | None) -> torch.Tensor:
    """The distribution the search ranks by: forced tokens get log 1 = 0, every other token -inf."""
    if forced is None:
        return logp
    out = torch.full_like(logp, NEG_INF)  # (B, V)
    out[:, forced] = 0.0
    return out


@dataclass
class _Hyp:
    tokens: tuple[int, ...]
    score: float  # Σ of the processed log-probs the search ranks by
    logp: list[torch.Tensor] = field(default_factory=list)  # per step (R,) the real log p under each row
    alts: list[tuple[torch.Tensor, torch.Tensor]] = field(default_factory=list)  # per step (R, A) ids, log p
    forced: list[bool] = field(default_factory=list)
    ended: bool = False  # its last token is an end token the model chose

    def child(self, tok: int, score: float, logp: torch.Tensor, forced: bool, ended: bool, a: int) -> _Hyp:
        ids, vals = topk(logp, a)  # (R, A)
        return _Hyp(
            self.tokens + (tok,),
            score,
            self.logp + [logp[:, tok]],
            self.alts + [(ids, vals)],
            self.forced + [forced],
            ended,
        )

    def scored(self, search_score: float) -> Scored:
        r = self.logp[0].shape[0] if self.logp else 0
        if self.logp:
            lp = torch.stack(self.logp, dim=-1)  # (R, T)
            ids = torch.stack([s[0] for s in self.alts], dim=1)  # (R, T, A)
            vals = torch.stack([s[1] for s in self.alts], dim=1)  # (R, T, A)
        else:
            lp, ids, vals = (
                torch.zeros((r, 0)),
                torch.zeros((r, 0, 0), dtype=torch.long),
                torch.zeros((r, 0, 0)),
            )
        return Scored(list(self.tokens), lp, ids, vals, set(), self.ended, list(self.forced), search_score)


class Search:
    """One search over the mixture of `passages` with log weights `log_w` (one passage of weight 1
    for a RAG-Sequence beam or closed-book; all K with the prior for RAG-Token)."""

    def __init__(
        self, passages: list[int], log_w: torch.Tensor, settings: SearchSettings, eos_ids: frozenset[int]
    ):
        self.passages = passages
        self.log_w = log_w.view(1, -1, 1)  # (1, R, 1)
        self.s = settings
        self.eos = eos_ids
        self.alive = [_Hyp((), 0.0)]
        self.done: list[tuple[float, _Hyp]] = []  # (normalised score, hypothesis), best first
        self.improvable = True  # transformers' early-stop heuristic, carried across steps

    def _norm(self, score: float, length: int) -> float:
        return score / (length**self.s.length_penalty)

    def step(self, logp: torch.Tensor, step: int, forced: list[int] | None) -> None:
        """Advance by one token given the live hypotheses' rows `logp` (B, R, V)."""
        mix = torch.logsumexp(
            self.log_w.to(logp.dtype) + logp, dim=1
        )  # (B, V) the search's next-token log-probs
        proc = _process(mix, forced)  # (B, V)
        last = step + 1 == self.s.max_new_tokens
        a = self.s.top_alternatives
        if self.s.beams == 1:
            tok = int(proc[0].argmax())
            ended = tok in self.eos and forced is None
            child = self.alive[0].child(
                tok, self.alive[0].score + float(proc[0, tok]), logp[0], forced is not None, ended, a
            )
            if tok in self.eos or last:
                self.done, self.alive = [(self._norm(child.score, step + 1), child)], []
            else:
                self.alive = [child]
            return
        b, v = proc.shape
        total = torch.tensor([h.score for h in self.alive]).view(b, 1) + proc  # (B, V)
        keep = min(max(2, 1 + len(self.eos)) * self.s.beams, total.numel())
        vals, flat = total.view(-1).topk(keep)  # (keep,)
        running, new_done, all_end = [], [], True
        for rank, (score, f) in enumerate(zip(vals.tolist(), flat.tolist())):
            if score == NEG_INF:
                break
            src, tok = divmod(f, v)
            ends = tok in self.eos or last
            all_end &= ends
            if ends and rank < self.s.beams:
                parent = self.alive[src]
                child = parent.child(
                    tok, score, logp[src], forced is not None, tok in self.eos and forced is None, a
                )
                new_done.append((self._norm(score, step + 1), child))
            elif not ends and len(running) < self.s.beams:
                running.append(self.alive[src].child(tok, score, logp[src], forced is not None, False, a))
            if len(running) == self.s.beams and rank + 1 >= self.s.beams:
                break  # later candidates can neither finish (rank >= B) nor run (B are running): exact
        full = len(self.done) >= self.s.beams
        if self.improvable and not (self.s.early_stopping and full):
            merged = self.done + new_done  # stable sort: on a tie the earlier finished stays first
            self.done = sorted(merged, key=lambda d: d[0], reverse=True)[: self.s.beams]
        full = len(self.done) >= self.s.beams
        if running and full:
            best_possible = self._norm(running[0].score, step + 1)
            self.improvable = self.improvable and best_possible > self.done[-1][0]
        stop = not running or all_end or last or not self.improvable or (self.s.early_stopping and full)
        self.alive = [] if stop else running

    def results(self) -> list[Scored]:
        return [h.scored(score) for score, h in self.done]


class RowPool:
    """The generator rows of all searches of one query, one row per distinct (passage, prefix)."""

    def __init__(self, gen: Generator, state0: GenState):
        self.gen = gen
        self.state = state0
        self.where = {(z, ()): z for z in range(state0.logprobs.shape[0])}

    def logprobs(self, keys: list[tuple[int, tuple[int, ...]]]) -> torch.Tensor:
        return self.state.logprobs[torch.tensor([self.where[key] for key in keys])]  # (N, V)

    def grow(self, keys: list[tuple[int, tuple[int, ...]]]) -> None:
        """One `advance` call: each new key's row is its parent prefix's row plus its last token."""
        keys = list(dict.fromkeys(keys))
        parents = torch.tensor([self.where[(z, p[:-1])] for z, p in keys])  # (N,)
        tokens = torch.tensor([p[-1] for _, p in keys])  # (N,)
        self.state = self.gen.advance(self.gen.select(self.state, parents), tokens)
        self.where = {key: i for i, key in enumerate(keys)}


def run_lockstep(gen: Generator, state0: GenState, searches: list[Search]) -> None:
    """Run every search to its end in lockstep, one `advance` call per step for all of them.

    The searches may read rows of different questions (a batch, see `decoding.decode_jobs`) and
    differ in their settings: each ranks by its own forced tokens and length limit."""
    rows = RowPool(gen, state0)
    for step in range(max((s.s.max_new_tokens for s in searches), default=0)):
        for s in searches:
            if s.alive:
                keys = [(z, h.tokens) for h in s.alive for z in s.passages]
                forced = forced_tokens(gen, step, s.s.max_new_tokens)
                s.step(rows.logprobs(keys).view(len(s.alive), len(s.passages), -1), step, forced)  # (B, R, V)
        wanted = [(z, h.tokens) for s in searches for h in s.alive for z in s.passages]
        if not wanted:
            break
        rows.grow(wanted)
