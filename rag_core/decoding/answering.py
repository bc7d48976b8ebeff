"""Prepared questions decoded into traces: one question (`analyse`) or several as one batch
(`decode_queries`), under both RAG models, each run carrying the settings it was decoded with.

A batch puts every question's K prompt rows through one prompt pass and one decode loop
(`decoding.decode_jobs`); each question's searches read only its own rows, so its trace is the
one it gets alone, to float32 rounding (`tests/test_batching.py`).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from functools import cache, partial

import torch

from rag_core import marginals
from rag_core.config import (
    DECODE_NAMES,
    MARGINAL_DECODE,
    RAG_SEQUENCE,
    RAG_TOKEN,
    STUFFED,
    AnswerSettings,
    TraceSettings,
)
from rag_core.decoding.decode import DecodeJob, Scored, SearchSettings, decode_jobs, score_answers
from rag_core.decoding.search import TOP_ALTERNATIVES
from rag_core.decoding.stuffed import leave_one_out, stuffed_decode, stuffed_state
from rag_core.generators import Generator
from rag_core.generators.base import GenState
from rag_core.generators.fingerprint import prompt_fingerprint
from rag_core.trace import Candidate, Hit, StuffedReading, Trace


@dataclass
class PreparedRun:
    """A trace and the prepared prompt state it was decoded from (reused for teacher forcing)."""

    trace: Trace
    state0: GenState


def to_candidates(gen: Generator, decoding: str, scored: list[Scored]) -> list[Candidate]:
    out = []
    for rank, s in enumerate(scored):
        alt_tokens = [[[gen.token_text(int(i)) for i in step] for step in row] for row in s.alt_ids.tolist()]
        out.append(
            Candidate(
                decoding,
                rank,
                gen.decode(s.tokens),
                list(s.tokens),
                [gen.token_text(t) for t in s.tokens],
                s.token_logp,
                s.alt_ids,
                alt_tokens,
                s.alt_logp,
                s.finished,
                set(s.sources),
                list(s.forced) or [False] * len(s.tokens),
                s.search_score,
            )
        )
    return out


def trace_of(
    gen: Generator,
    question: str,
    hits: list[Hit],
    log_pz: torch.Tensor,
    settings: AnswerSettings,
    index_name: str,
    scale: float,
    decoded: tuple[list[Scored], list[Scored]],
    calls: int,
    single: Callable[[], GenState] | None = None,
    explain: bool = True,
    notices: Sequence[str] | None = None,
    encoder: str | None = None,
) -> Trace:
    """The trace of one question's decoded answers (RAG-Token hypotheses, RAG-Sequence hypotheses);
    `notices` (how the question was cut or cleaned) and the query `encoder` are recorded with it."""
    token_scored, seq = decoded
    candidates = to_candidates(gen, RAG_TOKEN, token_scored) + to_candidates(gen, RAG_SEQUENCE, seq)
    recorded = TraceSettings(
        k=len(hits),
        beams=settings.beams,
        rescore=settings.rescore,
        decode=settings.decode,
        max_new_tokens=settings.max_new_tokens,
        length_penalty=settings.length_penalty,
        early_stopping=settings.early_stopping,
        generator=gen.id,
        prompt=prompt_fingerprint(gen.id),
        notices=notices,
        encoder=encoder,
    )
    wanted = STUFFED in DECODE_NAMES[settings.decode]
    stuffed = stuffed_reading(gen, question, hits, settings, single, explain, candidates) if wanted else None
    return Trace(
        question,
        index_name,
        hits,
        log_pz.double(),
        scale,
        candidates,
        recorded,
        model_calls=calls,
        stuffed=stuffed,
    )


def stuffed_reading(
    gen: Generator,
    question: str,
    hits: list[Hit],
    settings: AnswerSettings,
    single: Callable[[], GenState] | None = None,
    explain: bool = True,
    known: Sequence[Candidate] = (),
) -> StuffedReading:
    """The K passages read together (rank order) with the search of the marginals, what each
    passage is worth to the chosen answer (exact leave-one-out), and that answer read under each
    passage alone (the mixture's rows, for its posterior of the same answer): taken from a marginal's
    candidate in `known` with the same tokens when there is one (`rows_alone`), else teacher-forced
    through the K one-passage prompts (`single()`, the marginals' prepared state; else prepared here).
    `explain=False`: the answers only (a run that judges answers, the index swap, reads no more)."""
    passages = [h.passage for h in hits]
    state = stuffed_state(gen, question, passages)
    scored = stuffed_decode(gen, question, passages, SearchSettings.of(settings), state)
    best = list(scored[0].tokens) if scored else []
    if not (best and passages and explain):
        return StuffedReading(to_candidates(gen, STUFFED, scored))
    loo = leave_one_out(gen, question, passages, best, state)  # (K, T), reading the shared tokens from state
    alone = rows_alone(known, best, len(passages))  # (K, T) or None
    if alone is None:
        prepared = single() if single is not None else gen.prepare(question, passages)
        alone = score_answers(gen, prepared, [best], top_alternatives=1)[0][0]  # (K, T) log p(y_i|x,z,y_<i)
    return StuffedReading(to_candidates(gen, STUFFED, scored), loo, alone)


def rows_alone(known: Sequence[Candidate], tokens: list[int], k: int) -> torch.Tensor | None:
    """The rows log p(y_i | x, z, y_<i) (K, T) of the answer `tokens` under each of the `k` passages
    alone, from a marginal's candidate that already holds them: the same tokens, a row for every
    passage and each row scored (no NaN of fast rescoring). A step the generation config forced
    keeps the model's own log p there too (`decode.py`), so it is the same number. None when no
    candidate has them.

    >>> c = Candidate("rag-token", 0, "a", [7], ["a"], torch.tensor([[-0.5], [-2.0]]), None, [], None)
    >>> rows_alone([c], [7], 2).tolist(), rows_alone([c], [8], 2), rows_alone([c], [7], 3)
    ([[-0.5], [-2.0]], None, None)
    """
    for c in known:
        if c.token_ids == tokens and c.token_logp.shape[0] == k and not torch.isnan(c.token_logp).any():
            return c.token_logp  # (K, T)
    return None


NO_MARGINAL: tuple[list[Scored], list[Scored]] = ([], [])  # a stuffed-only run decodes no marginal


def _job(
    settings: AnswerSettings, rows: list[int], log_pz: torch.Tensor, top_alternatives: int = TOP_ALTERNATIVES
) -> DecodeJob | None:
    """The marginals' decoding of one question (None: the settings ask for the stuffed reading only)."""
    marginal = MARGINAL_DECODE[settings.decode]
    if marginal is None:
        return None
    search = SearchSettings.of(settings, top_alternatives)
    return DecodeJob(rows, log_pz, search, marginal, settings.rescore)


def analyse(
    gen: Generator,
    question: str,
    hits: list[Hit],
    log_pz: torch.Tensor,
    settings: AnswerSettings,
    index_name: str,
    scale: float,
    state0: GenState | None = None,
    top_alternatives: int = TOP_ALTERNATIVES,
) -> Trace:
    """Decode under both models from one prepared state and build the trace. `top_alternatives`:
    the tokens kept beside each step's own, per passage (what a counterfactual's bounds read)."""
    state0 = state0 or gen.prepare(question, [h.passage for h in hits])
    # Both decodings share every forward call (see decoding.decode_jobs); same results as apart.
    job = _job(settings, list(range(len(hits))), log_pz, top_alternatives)
    decoded = decode_jobs(gen, state0, [job])[0] if job is not None else NO_MARGINAL
    calls = state0.calls
    return trace_of(gen, question, hits, log_pz, settings, index_name, scale, decoded, calls, lambda: state0)


def rows_of_state(gen: Generator, state: GenState, rows: list[int]) -> GenState:
    """The prepared rows `rows` of a batch's state (the state itself when they are all of it)."""
    return state if rows == list(range(state.logprobs.shape[0])) else gen.select(state, torch.tensor(rows))


@dataclass
class Query:
    """One question retrieved on one index, to be decoded under each of `settings` (K, scale,
    decoding); the hits are the top max(K) of them."""

    question: str  # as cleaned by `clean_question`
    hits: list[Hit]
    index_name: str
    settings: list[AnswerSettings]
    notices: list[str] = field(default_factory=list)
    encoder: str | None = None  # the retriever's id, recorded in each trace's settings


def decode_queries(
    gen: Generator,
    queries: list[Query],
    scale_of: Callable[[AnswerSettings], float],
    keep_state: bool = False,
    explain: bool = True,
) -> list[list[PreparedRun]]:
    """Several questions (on any indexes) through one prompt pass and one decode loop: per query,
    one run per setting, each exactly what the query decoded alone gives.

    A prompt row two queries share (the same question and passage, e.g. a base-corpus passage both
    year indexes retrieve) is prepared and decoded once. `keep_state`: each run also keeps its own
    K prepared rows (a copy), for teacher forcing gold answers later. `explain=False`: a stuffed
    reading keeps its answers only (no leave-one-out, no rows of each passage alone).
    """
    rows: list[tuple[str, object]] = []
    where: dict[tuple, int] = {}
    rows_of: list[list[int]] = []
    for q in queries:
        ids = []
        for h in q.hits:
            key = (q.question, h.passage.id, h.passage.title, h.passage.text)
            if key not in where:
                where[key] = len(rows)
                rows.append((q.question, h.passage))
            ids.append(where[key])
        rows_of.append(ids)
    state = gen.prepare_rows(rows)  # one batched pass over every distinct prompt
    jobs, made = [], []
    for q, ids in zip(queries, rows_of):
        for settings in q.settings:
            scale = scale_of(settings)
            log_pz = marginals.log_prior(torch.tensor([h.score for h in q.hits[: settings.k]]), scale)  # (k,)
            jobs.append(_job(settings, ids[: settings.k], log_pz))
            made.append((q, settings, scale, log_pz, ids[: settings.k]))
    decoded = iter(decode_jobs(gen, state, [j for j in jobs if j is not None]))
    out: dict[int, list[PreparedRun]] = {id(q): [] for q in queries}
    for (q, settings, scale, log_pz, own_rows), job in zip(made, jobs):
        result = next(decoded) if job is not None else NO_MARGINAL
        hits = q.hits[: settings.k]
        own_state = cache(partial(rows_of_state, gen, state, own_rows))  # this run's K rows, once
        trace = trace_of(
            gen,
            q.question,
            hits,
            log_pz,
            settings,
            q.index_name,
            scale,
            result,
            state.calls,
            own_state,
            explain,
            notices=q.notices,
            encoder=q.encoder,
        )
        out[id(q)].append(PreparedRun(trace, own_state() if keep_state else None))
    return [out[id(q)] for q in queries]
