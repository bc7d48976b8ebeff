"""App state: the cached engine, the sidebar's settings as pages read them, and per-query results.

Engine objects load once per server with `st.cache_resource` and are shared by every session; the
models are those of the session's model stack (`app.stack`: one stack held at a time). A query's
trace is cached by (stack, question, index, settings), so switching pages, steps or views never
recomputes what is known, and a trace of one stack is never shown under another. Pages call
`current_trace()` and only present.
"""

from __future__ import annotations

import dataclasses
import json

import streamlit as st

from app import stack as stacks
from rag_core.analysis.attribution import sentences, token_sources
from rag_core.analysis.diagnosis import confidence as certainty
from rag_core.config import DECODINGS, STUFFED, Config, answer_settings
from rag_core.corpus import CorpusError, Passage
from rag_core.decoding.stuffed import orders
from rag_core.errors import first_line
from rag_core.models.sources import ModelSourceError
from rag_core.pipeline import Pipeline, QuestionError, open_index
from rag_core.retrieval.catalog import available_indexes, default_index_name, resolve_index
from rag_core.retrieval.index import IndexLoadError
from rag_core.stacks import in_words
from rag_core.trace import Trace

DEFAULT_QUESTION = "Who wrote Moby-Dick?"
USER_ERRORS = (QuestionError, IndexLoadError, CorpusError, ModelSourceError, ValueError)


def models():
    """Encoder + generator of the session's stack (loaded once, shared by every session on it;
    `main.py` loads it with progress before the page runs)."""
    return stacks.models()


def stack_key() -> str:
    """The session's stack fingerprint: the first argument of every cached model result."""
    return stacks.key()


# The loaders draw nothing themselves: Streamlit replays elements drawn inside a cached function on
# every later call, so a status box there would spin on every page forever. The spinner text is
# shown only while the function really runs.
@st.cache_resource(show_spinner="Opening the index (its first use builds it: ~10 s)…", max_entries=8)
def _index(encoder_id: str, name: str, _encoder):
    """Keyed by the passage encoder's id: stacks that share passage vectors share the index."""
    _, corpus, _ = stacks.cli()
    if name == corpus and name not in available_indexes():  # the command line's --corpus FILE
        return open_index(Config(corpus=name), _encoder)[1]
    return resolve_index(name, _encoder)[1]


def index(name: str):
    """A named index (built and cached on disk on first use), shared by all sessions."""
    return index_for(models().encoder, name)


def index_for(encoder, name: str):
    """The index `name` as `encoder`'s passage tower reads it (another stack's, for a comparison)."""
    return _index(encoder.id, name, encoder)


def forget_index(name: str) -> None:
    """Drop every cached object of an index that was replaced or deleted (its traces included)."""
    for cached in (_index, _trace, _stuffed_of, _orders, _stuffed_sentences, _sentences):
        cached.clear()


def pipeline(name: str | None = None) -> Pipeline:
    name = name or settings().index or default_index_name()
    return Pipeline(models(), name, index(name), settings())


@st.cache_resource(show_spinner=False, max_entries=256)
def _trace(stack: str, question: str, index_name: str, settings_key: tuple) -> Trace:
    cfg = Config(**dict(settings_key))
    return pipeline(index_name).run(question, cfg)


@st.cache_resource(show_spinner=False, max_entries=256)
def _stuffed_of(stack: str, query: str, index_name: str, passage_ids: tuple, settings: str, _trace: Trace):
    """The stuffed reading of any trace (a counterfactual's rerun, another page's) from its own
    passages and recorded settings, once per key."""
    return pipeline(index_name).with_stuffed(_trace).stuffed


def _stuffed_key(trace: Trace) -> tuple[tuple, str]:
    """What a trace's stuffed reading depends on besides its question: its passages, in rank order,
    and the settings it was decoded with."""
    return tuple(h.passage.id for h in trace.hits), json.dumps(trace.settings, sort_keys=True, default=str)


def _with_reading(trace: Trace) -> Trace:
    with st.spinner(f"Reading the {trace.k} passages together in one prompt…"):
        reading = _stuffed_of(stack_key(), trace.question, trace.index, *_stuffed_key(trace), trace)
    return dataclasses.replace(trace, stuffed=reading)


def with_own_stuffed(trace: Trace) -> Trace:
    """`trace` with the stuffed reading of its own passages, question and settings (for the
    low-confidence rule, which compares all three readings); a stuffed prompt too long for the
    generator leaves it without one, and then the rule compares the two marginals."""
    if trace.stuffed is not None:
        return trace
    try:
        return _with_reading(trace)
    except USER_ERRORS:
        return trace


@st.cache_resource(show_spinner=False, max_entries=256)
def _closed_book_rows(stack: str, question: str, answers: tuple[tuple[int, ...], ...]) -> dict:
    """The closed-book teacher-forced rows (T,) of answers of one question, by their token ids, in
    one batched pass: they depend on the question and the answers only, so every index and setting
    shares them (the pipeline is built without an index: a closed-book row reads none)."""
    rows = Pipeline(models(), "", None, Config()).closed_book_scores(question, [list(a) for a in answers])
    return dict(zip(answers, rows))


def closed_row(trace: Trace, cand):
    """The closed-book row (T,) of one candidate, computed with those of every other candidate of
    its trace in the same pass, once: a counterfactual that picks another of them later (a view of
    stored numbers) then finds its row without a model call. Raises user errors."""
    own = tuple(cand.token_ids)
    trace = with_own_stuffed(trace)  # every reading's answers, so each page asks for the same batch
    answers = {tuple(c.token_ids) for d in (*DECODINGS, STUFFED) for c in trace.of(d) if c.token_ids}
    batch = tuple(sorted(answers)) if own in answers else (own,)
    return _closed_book_rows(stack_key(), trace.question, batch)[own]


def token_sources_of(trace: Trace, decoding: str, rank: int = 0) -> list[token_sources.TokenSource] | None:
    """Where each token of a trace's candidate came from (one extra model row, computed once)."""
    cand = next((c for c in trace.of(decoding) if c.rank == rank), None)
    if cand is None or not cand.token_ids:
        return None
    try:
        closed = closed_row(trace, cand)
    except USER_ERRORS as e:
        st.error(first_line(e, "that did not work"))
        return None
    return token_sources.candidate_sources(trace.log_prior, cand, closed, token_sources.passage_texts(trace))


def confidence(trace: Trace, cand, log_prior=None) -> certainty.Confidence:
    """Whether the model is guessing at this answer (`rag_core.analysis.diagnosis.confidence`), from the trace
    and the answer's closed-book row (the one the token sources use, computed once). Without that
    row (a user error computing it) the rule runs without its support check. `log_prior` (K,): a
    counterfactual's prior instead of the trace's. The rule compares all three readings, so the
    trace gets the stuffed reading of its own passages first (`with_own_stuffed`), whatever page
    draws the card: the same answer wears the same badge on every page."""
    trace = with_own_stuffed(trace)
    closed = None
    if cand.token_ids:
        try:
            closed = closed_row(trace, cand)
        except USER_ERRORS:
            closed = None
    return certainty.candidate_confidence(trace, cand, closed, log_prior)


@st.cache_resource(show_spinner="Reading the passage with each sentence left out…", max_entries=256)
def _sentences(stack: str, question: str, index_name: str, passage: Passage, token_ids: tuple[int, ...]):
    return sentences.attribute(pipeline(index_name), question, passage, list(token_ids))


@st.cache_resource(show_spinner="Reading the passages together with each sentence left out…", max_entries=256)
def _stuffed_sentences(stack: str, question: str, index_name: str, passages: tuple, z: int, token_ids: tuple):
    return sentences.attribute_stuffed(pipeline(index_name), question, passages, z, list(token_ids))


def sentence_attribution(trace: Trace, cand, z: int) -> sentences.SentenceAttribution | None:
    """Leave-one-sentence-out of a candidate's answer over passage `z` (one batched pass, once): the
    passage read alone for a marginal's answer, inside the K passages' one prompt for the stuffed
    reading's."""
    ids = tuple(cand.token_ids)
    try:
        if cand.decoding == STUFFED:
            passages = tuple(h.passage for h in trace.hits)
            return _stuffed_sentences(stack_key(), trace.question, trace.index, passages, z, ids)
        return _sentences(stack_key(), trace.question, trace.index, trace.hits[z].passage, ids)
    except USER_ERRORS as e:
        st.error(first_line(e, "that did not work"))
        return None


def settings_key(cfg: Config) -> tuple:
    """The settings an answer depends on, as a hashable argument of the cached trace functions."""
    return tuple(answer_settings(cfg).items())


def trace_for(question: str, index_name: str | None = None, cfg: Config | None = None) -> Trace | None:
    """The trace of a question under the current settings, computed once; None after a user error
    (the error is shown on the page, nothing else is lost)."""
    cfg = cfg or settings()
    name = index_name or cfg.index or default_index_name()
    try:
        with st.spinner(f"Answering on the {name} index…"):
            return _trace(stack_key(), question, name, settings_key(cfg))
    except USER_ERRORS as e:
        st.error(first_line(e, "that did not work"))
        return None


@st.cache_resource(show_spinner=False, max_entries=64)
def _orders(stack: str, question: str, index_name: str, settings_key: tuple) -> list:
    trace = _trace(stack, question, index_name, settings_key)
    reading = _stuffed_of(stack, trace.question, index_name, *_stuffed_key(trace), trace)
    return pipeline(index_name).stuffed_orders(dataclasses.replace(trace, stuffed=reading))


def stuffed_orders(trace: Trace) -> list | None:
    """The current question's stuffed reading with its passages in the other orders
    (`Pipeline.stuffed_orders`), computed once; None after a user error (the message is shown)."""
    try:
        with st.spinner(f"Reading the {trace.k} passages in {len(orders(trace.k))} other orders…"):
            return _orders(stack_key(), question(), trace.index, settings_key(settings()))
    except USER_ERRORS as e:
        st.error(first_line(e, "reading the other orders did not work"))
        return None


def with_stuffed(trace: Trace) -> Trace:
    """`trace` with its stuffed reading (the K passages in one prompt and its exact leave-one-out,
    `with_own_stuffed`), computed once when a page first draws it. After a user error (a stuffed
    prompt longer than the generator reads) the message is shown and the trace comes back as it was."""
    if trace.stuffed is not None:
        return trace
    try:
        return _with_reading(trace)
    except USER_ERRORS as e:
        st.error(first_line(e, "the stuffed reading did not work"))
        return trace


def stack_name() -> str:
    """The session's stack in a few words (job labels: every session sees every job)."""
    return stacks.current().name


def stack_words() -> str:
    """The session's stack in words, retriever then generator ("MiniLM-L6 retriever · SmolLM2-135M
    + RAG adapter"): what a page's first line names."""
    return in_words(stacks.current().cfg)


def stack_config() -> Config:
    """The session's model stack with every other setting at its default (what the index swap runs)."""
    cfg = stacks.current().cfg
    return Config(**{name: getattr(cfg, name) for name in stacks.STACK_FIELDS})


def question() -> str:
    return st.session_state.get("question", DEFAULT_QUESTION)


def current_trace() -> Trace | None:
    return trace_for(question())


def settings() -> Config:
    s = st.session_state
    return stacks.current().cfg.with_(  # the session's model stack, with the sidebar's settings
        corpus=None,
        k=s.get("k", 5),
        beams=s.get("beams", 1),
        rescore=s.get("rescore", "thorough"),
        scale=s.get("scale"),
        max_new_tokens=s.get("max_new_tokens", 16),
        length_penalty=float(s.get("length_penalty", 1.0)),
        index=s.get("index_name") or stacks.default_index(),
    )
