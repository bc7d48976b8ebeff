"""Decoding under both RAG models, on top of the generator protocol.

- RAG-Token: one beam search whose next-token distribution is the mixture
  Σ_z p(z|x) p(y_i|x,z,y_<i); beam 1 is greedy. Every hypothesis keeps K rows (one per passage)
  so the per-passage conditionals of every token come for free.
- RAG-Sequence: a beam search per passage under p(y|x,z) alone, the union of the hypotheses, then
  rescoring: *thorough* scores every hypothesis under every passage (one batched teacher-forced
  pass); *fast* takes p(y|x,z) = 0 wherever z did not produce the hypothesis.

Each hypothesis comes back as a `Scored` answer: its tokens and a (K, T) table of
log p(y_i|x,z,y_<i) (NaN where never scored), plus the top alternative tokens at each step.
"""
from __future__ import annotations

from dataclasses import dataclass, field

import torch

from . import marginals
from .generators.base import GenState, Generator, pad_answers

NAN = float("nan")


@dataclass
class Scored:
    """One answer with everything the marginals and the trace need."""

    tokens: list[int]  # answer token ids, end token included when the answer finished
    token_logp: torch.Tensor  # (K, T) log p(y_i | x, z, y_<i); NaN where the pair was not scored
    alt_ids: torch.Tensor  # (K, T, A) the A most likely tokens at each step under each passage
    alt_logp: torch.Tensor  # (K, T, A) their log-probabilities
    sources: set[int] = field(default_factory=set)  # RAG-Sequence: the passages whose beam produced it
    finished: bool = True  # False when max_new_tokens cut the answer

    @property
    def length(self) -> int:
        return len(self.tokens)


def _topk(logp: torch.Tensor, a: int) -> tuple[torch.Tensor, torch.Tensor]:
    vals, ids = logp.topk(min(a, logp.shape[-1]), dim=-1)  # (..., A)
    return ids, vals


@dataclass
class _Beam:
    tokens: list[int]
    score: float
    steps_logp: list[torch.Tensor]  # each (K,) or (1,)
    steps_alt: list[tuple[torch.Tensor, torch.Tensor]]


def _stack(beam: _Beam, k: int, a: int) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    if not beam.steps_logp:
        return torch.zeros((k, 0)), torch.zeros((k, 0, a), dtype=torch.long), torch.zeros((k, 0, a))
    lp = torch.stack(beam.steps_logp, dim=-1)  # (K, T)
    ids = torch.stack([s[0] for s in beam.steps_alt], dim=1)  # (K, T, A)
    vals = torch.stack([s[1] for s in beam.steps_alt], dim=1)  # (K, T, A)
    return lp, ids, vals


def rag_token_decode(gen: Generator, state0: GenState, log_pz: torch.Tensor, beams: int = 1,
                     max_new_tokens: int = 16, top_alternatives: int = 5) -> list[Scored]:
    """Beam search on the RAG-Token mixture; best hypothesis first.

    `state0` holds K prepared rows; hypothesis b lives in rows b*K .. b*K+K-1.
    """
    k = state0.logprobs.shape[0]
    lpz = log_pz.float().view(1, k, 1)  # (1, K, 1)
    alive = [_Beam([], 0.0, [], [])]
    done: list[tuple[_Beam, bool]] = []
    state = state0
    for _ in range(max_new_tokens):
        b = len(alive)
        logp = state.logprobs.view(b, k, -1)  # (B, K, V)
        mix = torch.logsumexp(lpz + logp, dim=1)  # (B, V)
        total = torch.tensor([h.score for h in alive]).unsqueeze(1) + mix  # (B, V)
        vals, flat = total.view(-1).topk(min(2 * beams, total.numel()))  # (2B,)
        v = mix.shape[1]
        keep_rows, keep_tokens, nxt = [], [], []
        for score, f in zip(vals.tolist(), flat.tolist()):
            src, tok = divmod(f, v)
            parent = alive[src]
            ids, alt = _topk(logp[src], top_alternatives)  # (K, A), (K, A)
            child = _Beam(parent.tokens + [tok], score, parent.steps_logp + [logp[src, :, tok]], parent.steps_alt + [(ids, alt)])
            if tok in gen.eos_ids:
                done.append((child, True))
            elif len(nxt) < beams:
                nxt.append(child)
                keep_rows.append(src)
                keep_tokens.append(tok)
            if len(nxt) >= beams and len(done) >= beams:
                break
        best_done = max((d.score for d, _ in done), default=float("-inf"))
        # Scores only fall as tokens are added, so no live beam can overtake a finished one above it.
        if not nxt or (len(done) >= beams and best_done >= max(h.score for h in nxt)):
            break
        rows = torch.tensor([r * k + j for r in keep_rows for j in range(k)])  # (B'*K,)
        state = gen.advance(gen.select(state, rows), torch.tensor(keep_tokens).repeat_interleave(k))
        alive = nxt
    else:
        done.extend((h, False) for h in alive)
    done.sort(key=lambda d: d[0].score, reverse=True)
    out = []
    for beam, finished in done[:beams]:
        lp, ids, vals = _stack(beam, k, top_alternatives)
        out.append(Scored(beam.tokens, lp, ids, vals, set(), finished))
    return out


def rag_sequence_beams(gen: Generator, state0: GenState, beams: int = 1, max_new_tokens: int = 16,
                       top_alternatives: int = 5) -> list[list[tuple[_Beam, bool]]]:
    """A beam search per passage under p(y|x,z); returns, per passage, its finished beams."""
    k = state0.logprobs.shape[0]
    alive: dict[int, list[_Beam]] = {z: [_Beam([], 0.0, [], [])] for z in range(k)}
    done: dict[int, list[tuple[_Beam, bool]]] = {z: [] for z in range(k)}
    state = state0
    order = [(z, 0) for z in range(k)]  # which (passage, beam) each state row holds
    for _ in range(max_new_tokens):
        keep_rows, keep_tokens, new_order = [], [], []
        new_alive: dict[int, list[_Beam]] = {}
        for z in alive:
            rows = [i for i, (zz, _) in enumerate(order) if zz == z]
            logp = state.logprobs[rows]  # (B, V)
            total = torch.tensor([h.score for h in alive[z]]).unsqueeze(1) + logp  # (B, V)
            vals, flat = total.view(-1).topk(min(2 * beams, total.numel()))  # (2B,)
            v = logp.shape[1]
            nxt = []
            for score, f in zip(vals.tolist(), flat.tolist()):
                src, tok = divmod(f, v)
                parent = alive[z][src]
                ids, alt = _topk(logp[src : src + 1], top_alternatives)  # (1, A)
                child = _Beam(parent.tokens + [tok], score, parent.steps_logp + [logp[src, tok].view(1)], parent.steps_alt + [(ids, alt)])
                if tok in gen.eos_ids:
                    done[z].append((child, True))
                elif len(nxt) < beams:
                    nxt.append(child)
                    keep_rows.append(rows[src])
                    keep_tokens.append(tok)
                    new_order.append((z, len(nxt) - 1))
                if len(nxt) >= beams and len(done[z]) >= beams:
                    break
            best_done = max((d.score for d, _ in done[z]), default=float("-inf"))
            if nxt and not (len(done[z]) >= beams and best_done >= max(h.score for h in nxt)):
                new_alive[z] = nxt
            else:  # this passage is finished: drop its rows from the batch
                drop = len(nxt)
                if drop:
                    del keep_rows[-drop:], keep_tokens[-drop:], new_order[-drop:]
        alive = new_alive
        if not alive:
            break
        state = gen.advance(gen.select(state, torch.tensor(keep_rows)), torch.tensor(keep_tokens))
        order = new_order
    for z, hs in alive.items():
        done[z].extend((h, False) for h in hs)
    return [sorted(done[z], key=lambda d: d[0].score, reverse=True)[:beams] for z in range(k)]


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


def rag_sequence_decode(gen: Generator, state0: GenState, log_pz: torch.Tensor, beams: int = 1,
                        max_new_tokens: int = 16, rescore: str = "thorough", top_alternatives: int = 5,
                        known: list[Scored] | None = None) -> list[Scored]:
    """Per-passage beams, union, rescoring; sorted by the RAG-Sequence marginal, best first.

    `known`: answers already scored under every passage (e.g. the RAG-Token answer); a hypothesis
    equal to one of them is not teacher-forced again.
    """
    per_passage = rag_sequence_beams(gen, state0, beams, max_new_tokens, top_alternatives)
    return rescore_hypotheses(gen, state0, log_pz, per_passage, rescore, top_alternatives, known)


def rescore_hypotheses(gen: Generator, state0: GenState, log_pz: torch.Tensor,
                       per_passage: list[list[tuple[_Beam, bool]]], rescore: str = "thorough",
                       top_alternatives: int = 5, known: list[Scored] | None = None) -> list[Scored]:
    """The union of the per-passage hypotheses, rescored thoroughly or fast, best first."""
    k = state0.logprobs.shape[0]
    union: dict[tuple[int, ...], Scored] = {}
    for z, beams_z in enumerate(per_passage):
        for beam, finished in beams_z:
            key = tuple(beam.tokens)
            if key not in union:
                t = len(beam.tokens)
                union[key] = Scored(beam.tokens, torch.full((k, t), NAN), torch.zeros((k, t, top_alternatives), dtype=torch.long),
                                    torch.full((k, t, top_alternatives), NAN), set(), finished)
            s = union[key]
            s.sources.add(z)
            lp, ids, vals = _stack(beam, 1, top_alternatives)  # (1, T), (1, T, A)
            s.token_logp[z] = lp[0]
            s.alt_ids[z, :, : ids.shape[-1]] = ids[0]
            s.alt_logp[z, :, : vals.shape[-1]] = vals[0]
    hyps = list(union.values())
    if rescore == "thorough":
        known_by_tokens = {tuple(s.tokens): s for s in (known or [])}
        todo = []
        for i, h in enumerate(hyps):
            if tuple(h.tokens) in known_by_tokens:
                src = known_by_tokens[tuple(h.tokens)]
                hyps[i] = Scored(h.tokens, src.token_logp, src.alt_ids, src.alt_logp, h.sources, h.finished)
            else:
                todo.append(i)
        if todo:
            lp, mask, ids, vals = score_answers(gen, state0, [hyps[i].tokens for i in todo], top_alternatives)
            for j, i in enumerate(todo):
                t = hyps[i].length
                hyps[i] = Scored(hyps[i].tokens, lp[j, :, :t], ids[j, :, :t], vals[j, :, :t], hyps[i].sources, hyps[i].finished)
    lpz = log_pz.double()
    hyps.sort(key=lambda h: float(marginals.rag_sequence(lpz, h.token_logp)), reverse=True)
    return hyps


def joint_greedy_decode(gen: Generator, state0: GenState, log_pz: torch.Tensor, max_new_tokens: int = 16,
                        top_alternatives: int = 5) -> tuple[list[Scored], list[list[tuple[_Beam, bool]]]]:
    """Greedy RAG-Token decoding and the K greedy RAG-Sequence beams in one pass of forward calls.

    A passage's own greedy beam coincides with the RAG-Token rows as long as its argmax equals the
    mixture's choice, and the token rows already compute that row's distribution. So a passage
    *rides* the token rows for free and gets a row of its own only from the step where it first
    disagrees (a copy of its token row, advanced with its own token). Every step is one `advance`
    call over the token rows plus the forked rows. The results equal `rag_token_decode(beams=1)`
    and `rag_sequence_beams(beams=1)` run separately.
    """
    k = state0.logprobs.shape[0]
    lpz = log_pz.float().view(k, 1)  # (K, 1)
    token = _Beam([], 0.0, [], [])
    token_done: bool | None = None  # None while running; True/False = finished / cut
    riding = set(range(k))  # passages whose greedy beam still equals the token answer
    forked: dict[int, _Beam] = {}  # passage -> its own beam, which has a row in the state
    results: dict[int, tuple[_Beam, bool]] = {}
    state = state0
    order: list[int] = []  # passage of each forked row, after the K token rows (when present)
    for _ in range(max_new_tokens):
        n_tok = k if token_done is None else 0
        select_rows, tokens, new_order = [], [], []
        if n_tok:
            logp = state.logprobs[:k]  # (K, V)
            mix = torch.logsumexp(lpz + logp, dim=0)  # (V,)
            c = int(mix.argmax())
            ids, alt = _topk(logp, top_alternatives)  # (K, A)
            token = _Beam(token.tokens + [c], token.score + float(mix[c]), token.steps_logp + [logp[:, c]],
                          token.steps_alt + [(ids, alt)])
            own = logp.argmax(dim=-1).tolist()  # (K,) each passage's own greedy choice
            for z in sorted(riding):
                step = (ids[z : z + 1], alt[z : z + 1])
                if own[z] == c:
                    continue  # still riding: its beam is the token answer so far
                riding.discard(z)
                beam = _Beam(token.tokens[:-1] + [own[z]], 0.0, [], [])
                # its history so far is the token rows' row z
                beam.steps_logp = [s[z].view(1) for s in token.steps_logp[:-1]] + [logp[z, own[z]].view(1)]
                beam.steps_alt = [(a[z : z + 1], v[z : z + 1]) for a, v in token.steps_alt[:-1]] + [step]
                beam.score = float(sum(s.item() for s in beam.steps_logp))
                if own[z] in gen.eos_ids:
                    results[z] = (beam, True)
                else:
                    forked[z] = beam
                    select_rows.append(z)
                    tokens.append(own[z])
                    new_order.append(z)
            if c in gen.eos_ids:
                token_done = True
        for r, z in enumerate(order):
            row = n_tok + r
            logp_row = state.logprobs[row]  # (V,)
            t = int(logp_row.argmax())
            ids, alt = _topk(logp_row.view(1, -1), top_alternatives)  # (1, A)
            beam = forked[z]
            forked[z] = beam = _Beam(beam.tokens + [t], beam.score + float(logp_row[t]), beam.steps_logp + [logp_row[t].view(1)],
                                     beam.steps_alt + [(ids, alt)])
            if t in gen.eos_ids:
                results[z] = (beam, True)
                del forked[z]
            else:
                select_rows.append(row)
                tokens.append(t)
                new_order.append(z)
        if token_done is None:  # the token rows go on: they come first in the next state
            select_rows = list(range(k)) + select_rows
            tokens = [token.tokens[-1]] * k + tokens
        if not select_rows:
            break
        state = gen.advance(gen.select(state, torch.tensor(select_rows)), torch.tensor(tokens))
        order = new_order
    else:
        if token_done is None:
            token_done = False
        for z, beam in forked.items():
            results[z] = (beam, False)
    token_finished = bool(token_done)
    for z in riding:  # never disagreed: the token answer is also this passage's greedy answer
        results[z] = (_Beam(list(token.tokens), 0.0, [s[z].view(1) for s in token.steps_logp],
                            [(a[z : z + 1], v[z : z + 1]) for a, v in token.steps_alt]), token_finished)
    lp, ids, vals = _stack(token, k, top_alternatives)
    token_scored = [Scored(token.tokens, lp, ids, vals, set(), token_finished)]
    return token_scored, [[results[z]] for z in range(k)]
