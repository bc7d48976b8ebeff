"""Decoding under both RAG models, on top of the generator protocol: one search semantics for all.

**The rule every path follows** (token, sequence, both, closed-book, eval, leaders, diagnosis):

- `beams = 1` is argmax greedy: at each step the most likely next token of the (processed)
  distribution; the answer ends at the first end token or at `max_new_tokens`. Greedy RAG-Token,
  each passage's greedy RAG-Sequence beam and the closed-book answer are all this one loop, so
  `--decode token`, `--decode sequence` and `--decode both` agree token for token.
- `beams > 1` is transformers' beam search (`generate(num_beams=B)`): each step takes the top
  `max(2, 1 + #end tokens) · B` continuations of the live beams; a continuation that ends (end
  token, or the length limit) joins the finished set only if it ranks in the top B of that step;
  the next live beams are the best B continuations that did not end. Finished hypotheses are
  ranked by `Σ log p / T ** length_penalty` (T = answer tokens, end token included; transformers'
  default penalty 1.0), at most B of them are kept, and the search stops as transformers' default
  `early_stopping=False` does: when the best live beam, scored at its current length, can no longer
  beat the worst of B finished ones (or at the length limit). Continuations of probability zero
  are never kept (transformers carries them as -inf beams that cannot win).
- The generator's generation config is honoured as transformers' logits processors do: a forced
  first token (`forced_bos_token_id`, encoder-decoder models) and a forced end token at the length
  limit (`forced_eos_token_id`) get all the probability *for the search*; the trace keeps the
  model's real probability of that token and marks the step as forced. The decoder start token
  (`decoder_start_token_id`) is the generator's business (`generators/seq2seq.py`).

RAG-Token is one search on the mixture `Σ_z p(z|x) p(y_i|x,z,y_<i)`. RAG-Sequence is one search per
passage under `p(y|x,z)` (the same code with one passage of weight 1), the union of their finished
hypotheses, then *thorough* rescoring (every hypothesis teacher-forced under every passage) or
*fast* rescoring (`p(y|x,z) = 0` where z did not produce it); the answer is the hypothesis with
the highest exact marginal `p(y|x)` (no length penalty there, as transformers' RagSequence picks by
its loss).

All searches of one query run in lockstep over one pool of generator rows keyed by
(passage, prefix): rows two searches share (a passage's own beam that still equals the RAG-Token
path) are computed once, and every step is one `advance` call.

Each hypothesis comes back as a `Scored` answer: its tokens, a (K, T) table of log p(y_i|x,z,y_<i)
(NaN where never scored), the top alternative tokens at each step, whether the model itself ended
it (`finished`), which steps were forced, and the search's own score.
"""
from __future__ import annotations

from dataclasses import dataclass, field

import torch

from . import marginals
from .generators.base import GenState, Generator, pad_answers

NAN = float("nan")
NEG_INF = float("-inf")
DECODER_VERSION = 2  # bump when decoding results change: cached runs (leaders, eval traces) are keyed by it


@dataclass(frozen=True)
class SearchSettings:
    """How to search; `from_config` reads them off the engine's one config."""

    beams: int = 1  # 1 = argmax greedy; >1 = transformers' beam search
    max_new_tokens: int = 16  # answer tokens at most, end token included
    length_penalty: float = 1.0  # finished beams rank by Σ log p / T ** length_penalty (transformers' default)
    early_stopping: bool = False  # transformers' default; True stops once B hypotheses are finished
    top_alternatives: int = 5  # alternative tokens kept per step and passage for the UI

    @classmethod
    def from_config(cls, cfg) -> "SearchSettings":
        return cls(cfg.beams, cfg.max_new_tokens, cfg.length_penalty, cfg.early_stopping, cfg.top_alternatives)


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


def _topk(logp: torch.Tensor, a: int) -> tuple[torch.Tensor, torch.Tensor]:
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

    def child(self, tok: int, score: float, logp: torch.Tensor, forced: bool, ended: bool, a: int) -> "_Hyp":
        ids, vals = _topk(logp, a)  # (R, A)
        return _Hyp(self.tokens + (tok,), score, self.logp + [logp[:, tok]], self.alts + [(ids, vals)],
                    self.forced + [forced], ended)

    def scored(self, search_score: float) -> Scored:
        r = self.logp[0].shape[0] if self.logp else 0
        if self.logp:
            lp = torch.stack(self.logp, dim=-1)  # (R, T)
            ids = torch.stack([s[0] for s in self.alts], dim=1)  # (R, T, A)
            vals = torch.stack([s[1] for s in self.alts], dim=1)  # (R, T, A)
        else:
            lp, ids, vals = torch.zeros((r, 0)), torch.zeros((r, 0, 0), dtype=torch.long), torch.zeros((r, 0, 0))
        return Scored(list(self.tokens), lp, ids, vals, set(), self.ended, list(self.forced), search_score)


class _Search:
    """One search over the mixture of `passages` with log weights `log_w` (one passage of weight 1
    for a RAG-Sequence beam or closed-book; all K with the prior for RAG-Token)."""

    def __init__(self, passages: list[int], log_w: torch.Tensor, settings: SearchSettings, eos_ids: frozenset[int]):
        self.passages = passages
        self.log_w = log_w.view(1, -1, 1)  # (1, R, 1)
        self.s = settings
        self.eos = eos_ids
        self.alive = [_Hyp((), 0.0)]
        self.done: list[tuple[float, _Hyp]] = []  # (normalised score, hypothesis), best first
        self.improvable = True  # transformers' early-stop heuristic, carried across steps

    def _norm(self, score: float, length: int) -> float:
        return score / (length ** self.s.length_penalty)

    def step(self, logp: torch.Tensor, step: int, forced: list[int] | None) -> None:
        """Advance by one token given the live hypotheses' rows `logp` (B, R, V)."""
        mix = torch.logsumexp(self.log_w.to(logp.dtype) + logp, dim=1)  # (B, V) the search's next-token log-probs
        proc = _process(mix, forced)  # (B, V)
        last = step + 1 == self.s.max_new_tokens
        a = self.s.top_alternatives
        if self.s.beams == 1:
            tok = int(proc[0].argmax())
            ended = tok in self.eos and forced is None
            child = self.alive[0].child(tok, self.alive[0].score + float(proc[0, tok]), logp[0], forced is not None, ended, a)
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
                child = parent.child(tok, score, logp[src], forced is not None, tok in self.eos and forced is None, a)
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


class _Rows:
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


def _run(gen: Generator, state0: GenState, searches: list[_Search], settings: SearchSettings) -> None:
    """Run every search to its end in lockstep, one `advance` call per step for all of them."""
    rows = _Rows(gen, state0)
    for step in range(settings.max_new_tokens):
        forced = forced_tokens(gen, step, settings.max_new_tokens)
        for s in searches:
            if s.alive:
                keys = [(z, h.tokens) for h in s.alive for z in s.passages]
                s.step(rows.logprobs(keys).view(len(s.alive), len(s.passages), -1), step, forced)  # (B, R, V)
        wanted = [(z, h.tokens) for s in searches for h in s.alive for z in s.passages]
        if not wanted:
            break
        rows.grow(wanted)


def _token_search(state0: GenState, log_pz: torch.Tensor, settings: SearchSettings, gen: Generator) -> _Search:
    return _Search(list(range(state0.logprobs.shape[0])), log_pz, settings, gen.eos_ids)


def _passage_searches(state0: GenState, settings: SearchSettings, gen: Generator) -> list[_Search]:
    return [_Search([z], torch.zeros(1), settings, gen.eos_ids) for z in range(state0.logprobs.shape[0])]


def rag_token_decode(gen: Generator, state0: GenState, log_pz: torch.Tensor,
                     settings: SearchSettings = SearchSettings()) -> list[Scored]:
    """The RAG-Token search on the mixture; best hypothesis first (at most `beams`)."""
    search = _token_search(state0, log_pz, settings, gen)
    _run(gen, state0, [search], settings)
    return search.results()


def closed_book_decode(gen: Generator, state0: GenState, settings: SearchSettings = SearchSettings()) -> Scored:
    """The generator alone on one prepared row (no passage): the best hypothesis of the same search."""
    return rag_token_decode(gen, state0, torch.zeros(1), settings)[0]


def rag_sequence_beams(gen: Generator, state0: GenState, settings: SearchSettings = SearchSettings()) -> list[list[Scored]]:
    """A search per passage under p(y|x,z); per passage its finished hypotheses, best first, each
    with a (1, T) table of its own passage's log-probs."""
    searches = _passage_searches(state0, settings, gen)
    _run(gen, state0, searches, settings)
    return [s.results() for s in searches]


def decode_both(gen: Generator, state0: GenState, log_pz: torch.Tensor, settings: SearchSettings = SearchSettings(),
                rescore: str = "thorough") -> tuple[list[Scored], list[Scored]]:
    """RAG-Token and RAG-Sequence from the same forward calls: the K + 1 searches run in lockstep,
    and a passage's beam that still equals a RAG-Token hypothesis shares its rows. The results are
    exactly those of `rag_token_decode` and `rag_sequence_decode` run alone."""
    token = _token_search(state0, log_pz, settings, gen)
    per_passage = _passage_searches(state0, settings, gen)
    _run(gen, state0, [token] + per_passage, settings)
    token_scored = token.results()
    seq = rescore_hypotheses(gen, state0, log_pz, [s.results() for s in per_passage], rescore,
                             settings.top_alternatives, token_scored)
    return token_scored, seq


def score_answers(gen: Generator, state0: GenState, answers: list[list[int]], top_alternatives: int = 5
                  ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]:
    """Teacher-force N answers under all K passages in one batched pass.

    Returns token log-probs (N, K, T), mask (N, T), alternative ids and log-probs (N, K, T, A).
    """
    k = state0.logprobs.shape[0]
    n = len(answers)
    pad = getattr(gen, "pad_id", 0)
    ids, mask = pad_answers(answers, pad)  # (N, T), (N, T)
    t = ids.shape[1]
    state = gen.select(state0, torch.arange(k).repeat(n))  # (N*K rows): row n*K + z
    logp = gen.teacher_force(state, ids.repeat_interleave(k, dim=0))  # (N*K, T, V)
    tok = logp.gather(-1, ids.repeat_interleave(k, dim=0).unsqueeze(-1)).squeeze(-1)  # (N*K, T)
    alt_ids, alt_lp = _topk(logp, top_alternatives)  # (N*K, T, A)
    a = alt_ids.shape[-1]
    tok = tok.view(n, k, t).masked_fill(~mask.unsqueeze(1), NAN)  # (N, K, T)
    return tok, mask, alt_ids.view(n, k, t, a), alt_lp.view(n, k, t, a)


def rag_sequence_decode(gen: Generator, state0: GenState, log_pz: torch.Tensor,
                        settings: SearchSettings = SearchSettings(), rescore: str = "thorough",
                        known: list[Scored] | None = None) -> list[Scored]:
    """Per-passage searches, union, rescoring; sorted by the RAG-Sequence marginal, best first.

    `known`: answers already scored under every passage (e.g. the RAG-Token answer); a hypothesis
    equal to one of them is not teacher-forced again.
    """
    per_passage = rag_sequence_beams(gen, state0, settings)
    return rescore_hypotheses(gen, state0, log_pz, per_passage, rescore, settings.top_alternatives, known)


def _union(per_passage: list[list[Scored]], k: int, a: int) -> list[Scored]:
    """The distinct hypotheses of all passages, each with its producers' own rows filled in."""
    union: dict[tuple[int, ...], Scored] = {}
    for z, hyps_z in enumerate(per_passage):
        for h in hyps_z:
            key = tuple(h.tokens)
            if key not in union:
                t = h.length
                union[key] = Scored(list(h.tokens), torch.full((k, t), NAN), torch.zeros((k, t, a), dtype=torch.long),
                                    torch.full((k, t, a), NAN), set(), h.finished, list(h.forced), h.search_score)
            s = union[key]
            s.sources.add(z)
            s.token_logp[z] = h.token_logp[0]
            s.alt_ids[z, :, : h.alt_ids.shape[-1]] = h.alt_ids[0]
            s.alt_logp[z, :, : h.alt_logp.shape[-1]] = h.alt_logp[0]
    return list(union.values())


def rescore_hypotheses(gen: Generator, state0: GenState, log_pz: torch.Tensor, per_passage: list[list[Scored]],
                       rescore: str = "thorough", top_alternatives: int = 5, known: list[Scored] | None = None
                       ) -> list[Scored]:
    """The union of the per-passage hypotheses, rescored thoroughly or fast, best marginal first."""
    hyps = _union(per_passage, state0.logprobs.shape[0], top_alternatives)
    if rescore == "thorough":
        known_by_tokens = {tuple(s.tokens): s for s in (known or [])}
        todo = []
        for i, h in enumerate(hyps):
            src = known_by_tokens.get(tuple(h.tokens))
            if src is not None:
                hyps[i] = Scored(h.tokens, src.token_logp, src.alt_ids, src.alt_logp, h.sources, h.finished, h.forced,
                                 h.search_score)
            else:
                todo.append(i)
        if todo:
            lp, _, ids, vals = score_answers(gen, state0, [hyps[i].tokens for i in todo], top_alternatives)
            for j, i in enumerate(todo):
                h = hyps[i]
                t = h.length
                hyps[i] = Scored(h.tokens, lp[j, :, :t], ids[j, :, :t], vals[j, :, :t], h.sources, h.finished, h.forced,
                                 h.search_score)
    lpz = log_pz.double()
    # Python's sort is stable: hypotheses with equal marginals keep the order the passages gave them.
    hyps.sort(key=lambda h: float(marginals.rag_sequence(lpz, h.token_logp)), reverse=True)
    return hyps
