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

import torch

from . import marginals
from .generators.base import GenState, Generator, pad_answers
from .search import NAN, Scored, Search, SearchSettings, run_lockstep, topk

DECODER_VERSION = 2  # bump when decoding results change: cached runs (leaders, eval traces) are keyed by it


def _token_search(state0: GenState, log_pz: torch.Tensor, settings: SearchSettings, gen: Generator) -> Search:
    return Search(list(range(state0.logprobs.shape[0])), log_pz, settings, gen.eos_ids)


def _passage_searches(state0: GenState, settings: SearchSettings, gen: Generator) -> list[Search]:
    return [Search([z], torch.zeros(1), settings, gen.eos_ids) for z in range(state0.logprobs.shape[0])]


def rag_token_decode(gen: Generator, state0: GenState, log_pz: torch.Tensor,
                     settings: SearchSettings = SearchSettings()) -> list[Scored]:
    """The RAG-Token search on the mixture; best hypothesis first (at most `beams`)."""
    search = _token_search(state0, log_pz, settings, gen)
    run_lockstep(gen, state0, [search], settings)
    return search.results()


def closed_book_decode(gen: Generator, state0: GenState, settings: SearchSettings = SearchSettings()) -> Scored:
    """The generator alone on one prepared row (no passage): the best hypothesis of the same search."""
    return rag_token_decode(gen, state0, torch.zeros(1), settings)[0]


def rag_sequence_beams(gen: Generator, state0: GenState, settings: SearchSettings = SearchSettings()) -> list[list[Scored]]:
    """A search per passage under p(y|x,z); per passage its finished hypotheses, best first, each
    with a (1, T) table of its own passage's log-probs."""
    searches = _passage_searches(state0, settings, gen)
    run_lockstep(gen, state0, searches, settings)
    return [s.results() for s in searches]


def decode_both(gen: Generator, state0: GenState, log_pz: torch.Tensor, settings: SearchSettings = SearchSettings(),
                rescore: str = "thorough") -> tuple[list[Scored], list[Scored]]:
    """RAG-Token and RAG-Sequence from the same forward calls: the K + 1 searches run in lockstep,
    and a passage's beam that still equals a RAG-Token hypothesis shares its rows. The results are
    exactly those of `rag_token_decode` and `rag_sequence_decode` run alone."""
    token = _token_search(state0, log_pz, settings, gen)
    per_passage = _passage_searches(state0, settings, gen)
    run_lockstep(gen, state0, [token] + per_passage, settings)
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
    alt_ids, alt_lp = topk(logp, top_alternatives)  # (N*K, T, A)
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
