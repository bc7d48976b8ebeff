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

from dataclasses import dataclass

import torch

from rag_core import marginals
from rag_core.decoding.search import NAN, TOP_ALTERNATIVES, Scored, Search, SearchSettings, run_lockstep, topk
from rag_core.generators.base import Generator, GenState, PackedAnswers, pad_answers

DECODER_VERSION = 2  # bump when decoding results change: cached runs (leaders, eval traces) are keyed by it


def _token_search(rows: list[int], log_pz: torch.Tensor, settings: SearchSettings, gen: Generator) -> Search:
    return Search(list(rows), log_pz, settings, gen.eos_ids)


def _passage_searches(rows: list[int], settings: SearchSettings, gen: Generator) -> list[Search]:
    return [Search([z], torch.zeros(1), settings, gen.eos_ids) for z in rows]


def _all_rows(state0: GenState) -> list[int]:
    return list(range(state0.logprobs.shape[0]))


@dataclass
class DecodeJob:
    """One question's decoding in a batch: the prepared rows it reads (its passages, best first),
    their log prior, how to search, which model(s) (`token`, `sequence` or `both`) and how to
    rescore RAG-Sequence's hypotheses."""

    rows: list[int]
    log_pz: torch.Tensor  # (K,)
    settings: SearchSettings = SearchSettings()
    decode: str = "both"
    rescore: str = "thorough"


def decode_jobs(
    gen: Generator, state0: GenState, jobs: list[DecodeJob]
) -> list[tuple[list[Scored], list[Scored]]]:
    """RAG-Token and RAG-Sequence answers of every job, from one decode loop over all of them.

    Each job's searches read only its own rows, so its answers and numbers are those it gets
    decoded alone; a row two searches share (a passage's beam that still equals the RAG-Token path,
    or the same prompt row in two jobs) is computed once. Per job: (RAG-Token hypotheses, RAG-Sequence
    hypotheses), each best first and empty for a model the job did not ask for."""
    token = [
        _token_search(j.rows, j.log_pz, j.settings, gen) if j.decode != "sequence" else None for j in jobs
    ]
    per_passage = [_passage_searches(j.rows, j.settings, gen) if j.decode != "token" else [] for j in jobs]
    run_lockstep(gen, state0, [t for t in token if t is not None] + [s for ps in per_passage for s in ps])
    out = []
    for job, tok, ps in zip(jobs, token, per_passage):
        token_scored = tok.results() if tok is not None else []
        seq = []
        if ps:
            state = state0 if job.rows == _all_rows(state0) else gen.select(state0, torch.tensor(job.rows))
            seq = rescore_hypotheses(
                gen,
                state,
                job.log_pz,
                [s.results() for s in ps],
                job.rescore,
                job.settings.top_alternatives,
                token_scored,
            )
        out.append((token_scored, seq))
    return out


def rag_token_decode(
    gen: Generator, state0: GenState, log_pz: torch.Tensor, settings: SearchSettings = SearchSettings()
) -> list[Scored]:
    """The RAG-Token search on the mixture; best hypothesis first (at most `beams`)."""
    return decode_jobs(gen, state0, [DecodeJob(_all_rows(state0), log_pz, settings, "token")])[0][0]


def closed_book_decode(
    gen: Generator, state0: GenState, settings: SearchSettings = SearchSettings()
) -> Scored:
    """The generator alone on one prepared row (no passage): the best hypothesis of the same search."""
    return rag_token_decode(gen, state0, torch.zeros(1), settings)[0]


def rag_sequence_beams(
    gen: Generator, state0: GenState, settings: SearchSettings = SearchSettings()
) -> list[list[Scored]]:
    """A search per passage under p(y|x,z); per passage its finished hypotheses, best first, each
    with a (1, T) table of its own passage's log-probs."""
    searches = _passage_searches(_all_rows(state0), settings, gen)
    run_lockstep(gen, state0, searches)
    return [s.results() for s in searches]


# Log-probs one teacher-forced pass may hold (K rows × answer tokens × vocabulary): 256 MB of floats.
# RAG-Sequence's thorough rescoring reads every hypothesis under every passage, and with K = 20, four
# beams and 48 tokens its hypotheses would need 15 GB at once; in groups under this budget the same
# numbers take a bounded share of memory. An ordinary question (K = 5, a few short answers) is one group.
LOGIT_BUDGET = 2**26


def answer_groups(lengths: list[int], k: int, vocab: int, budget: int = LOGIT_BUDGET) -> list[list[int]]:
    """Consecutive answers (their token counts `lengths`) in groups whose pass under `k` rows holds
    at most `budget` log-probs over `vocab` tokens, each answer counted at the group's longest
    length (a pass that does not pack pads them to it); an answer over the budget alone is a group.

    >>> answer_groups([3, 3, 3], k=2, vocab=10, budget=120), answer_groups([9, 1], k=2, vocab=10, budget=120)
    ([[0, 1], [2]], [[0], [1]])
    >>> answer_groups([1, 1, 4], k=2, vocab=10, budget=120)  # three padded to 4 would be 240
    [[0, 1], [2]]
    """
    groups: list[list[int]] = [[]]
    longest = 0
    for i, n in enumerate(lengths):
        wider = max(longest, n, 1)
        if groups[-1] and (len(groups[-1]) + 1) * wider * k * vocab > budget:
            groups.append([])
            wider = max(n, 1)
        groups[-1].append(i)
        longest = wider
    return groups


def score_answers(
    gen: Generator,
    state0: GenState,
    answers: list[list[int]],
    top_alternatives: int = TOP_ALTERNATIVES,
    budget: int = LOGIT_BUDGET,
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]:
    """Teacher-force N answers under all K passages, in as few batched passes as `budget` allows
    (`answer_groups`; each answer is read on its own, so the grouping changes no number).

    Returns token log-probs (N, K, T), mask (N, T), alternative ids and log-probs (N, K, T, A); the
    entries past an answer's end are NaN (log-probs) and 0 (ids). A generator that can pack
    (`teacher_force_packed`) reads a group's answers in one row per passage; any other reads
    (answers × K) rows.
    """
    k, vocab = state0.logprobs.shape
    groups = answer_groups([len(a) for a in answers], k, vocab, budget)
    if len(groups) == 1:
        return _score_group(gen, state0, answers, top_alternatives)
    n, t = len(answers), max(1, max(len(a) for a in answers))
    a = min(top_alternatives, vocab)
    tok = torch.full((n, k, t), NAN)  # (N, K, T)
    mask = torch.zeros((n, t), dtype=torch.bool)  # (N, T)
    alt_ids = torch.zeros((n, k, t, a), dtype=torch.long)  # (N, K, T, A)
    alt_lp = torch.full((n, k, t, a), NAN)  # (N, K, T, A)
    for group in groups:
        g_tok, g_mask, g_ids, g_lp = _score_group(gen, state0, [answers[i] for i in group], top_alternatives)
        width = g_mask.shape[1]  # the group's longest answer
        tok[group, :, :width], mask[group, :width] = g_tok, g_mask  # (G, K, Tg), (G, Tg)
        alt_ids[group, :, :width], alt_lp[group, :, :width] = g_ids, g_lp  # (G, K, Tg, A)
    return tok, mask, alt_ids, alt_lp


def _score_group(
    gen: Generator, state0: GenState, answers: list[list[int]], top_alternatives: int
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]:
    """`score_answers` in one batched pass."""
    k = state0.logprobs.shape[0]
    n = len(answers)
    ids, mask = pad_answers(answers, getattr(gen, "pad_id", 0))  # (N, T), (N, T)
    t = ids.shape[1]
    a = min(top_alternatives, state0.logprobs.shape[-1])
    tok = torch.full((n, k, t), NAN)  # (N, K, T)
    alt_ids = torch.zeros((n, k, t, a), dtype=torch.long)  # (N, K, T, A)
    alt_lp = torch.full((n, k, t, a), NAN)  # (N, K, T, A)
    if hasattr(gen, "teacher_force_packed"):
        tok[:, :, 0] = state0.logprobs[:, ids[:, 0]].T  # (N, K): step 0 comes from the prompt pass
        first_ids, first_lp = topk(state0.logprobs, a)  # (K, A)
        alt_ids[:, :, 0], alt_lp[:, :, 0] = first_ids, first_lp
        packed = PackedAnswers.of(answers)
        if len(packed.tokens):
            logp = gen.teacher_force_packed(state0, packed)  # (K, L, V)
            step = packed.steps + 1  # (L,) the answer step each packed position predicts
            target = ids[packed.owner, step]  # (L,)
            tok[packed.owner, :, step] = (
                logp.gather(-1, target.view(1, -1, 1).expand(k, -1, 1)).squeeze(-1).T
            )  # (L, K)
            pid, plp = topk(logp, a)  # (K, L, A)
            alt_ids[packed.owner, :, step], alt_lp[packed.owner, :, step] = (
                pid.transpose(0, 1),
                plp.transpose(0, 1),
            )
    else:
        state = gen.select(state0, torch.arange(k).repeat(n))  # (N*K rows): row n*K + z
        logp = gen.teacher_force(state, ids.repeat_interleave(k, dim=0))  # (N*K, T, V)
        tok = (
            logp.gather(-1, ids.repeat_interleave(k, dim=0).unsqueeze(-1)).squeeze(-1).view(n, k, t)
        )  # (N, K, T)
        rid, rlp = topk(logp, a)  # (N*K, T, A)
        alt_ids, alt_lp = rid.view(n, k, t, a), rlp.view(n, k, t, a)
    off = ~mask.view(n, 1, t)  # (N, 1, T)
    tok = tok.masked_fill(off, NAN)  # (N, K, T)
    alt_ids = alt_ids.masked_fill(off.unsqueeze(-1), 0)  # (N, K, T, A)
    alt_lp = alt_lp.masked_fill(off.unsqueeze(-1), NAN)  # (N, K, T, A)
    return tok, mask, alt_ids, alt_lp


def rag_sequence_decode(
    gen: Generator,
    state0: GenState,
    log_pz: torch.Tensor,
    settings: SearchSettings = SearchSettings(),
    rescore: str = "thorough",
    known: list[Scored] | None = None,
) -> list[Scored]:
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
                union[key] = Scored(
                    list(h.tokens),
                    torch.full((k, t), NAN),
                    torch.zeros((k, t, a), dtype=torch.long),
                    torch.full((k, t, a), NAN),
                    set(),
                    h.finished,
                    list(h.forced),
                    h.search_score,
                )
            s = union[key]
            s.sources.add(z)
            s.token_logp[z] = h.token_logp[0]
            s.alt_ids[z, :, : h.alt_ids.shape[-1]] = h.alt_ids[0]
            s.alt_logp[z, :, : h.alt_logp.shape[-1]] = h.alt_logp[0]
    return list(union.values())


def rescore_hypotheses(
    gen: Generator,
    state0: GenState,
    log_pz: torch.Tensor,
    per_passage: list[list[Scored]],
    rescore: str = "thorough",
    top_alternatives: int = TOP_ALTERNATIVES,
    known: list[Scored] | None = None,
) -> list[Scored]:
    """The union of the per-passage hypotheses, rescored thoroughly or fast, best marginal first."""
    hyps = _union(per_passage, state0.logprobs.shape[0], top_alternatives)
    if rescore == "thorough":
        known_by_tokens = {tuple(s.tokens): s for s in (known or [])}
        todo = []
        for i, h in enumerate(hyps):
            src = known_by_tokens.get(tuple(h.tokens))
            if src is not None:
                hyps[i] = Scored(
                    h.tokens,
                    src.token_logp,
                    src.alt_ids,
                    src.alt_logp,
                    h.sources,
                    h.finished,
                    h.forced,
                    h.search_score,
                )
            else:
                todo.append(i)
        if todo:
            lp, _, ids, vals = score_answers(gen, state0, [hyps[i].tokens for i in todo], top_alternatives)
            for j, i in enumerate(todo):
                h = hyps[i]
                t = h.length
                hyps[i] = Scored(
                    h.tokens,
                    lp[j, :, :t],
                    ids[j, :, :t],
                    vals[j, :, :t],
                    h.sources,
                    h.finished,
                    h.forced,
                    h.search_score,
                )
    lpz = log_pz.double()
    # Python's sort is stable: hypotheses with equal marginals keep the order the passages gave them.
    hyps.sort(key=lambda h: float(marginals.rag_sequence(lpz, h.token_logp)), reverse=True)
    return hyps
