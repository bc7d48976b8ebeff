"""App state: the cached engine, the sidebar settings every page shares, and per-query results.

Engine objects load once per server with `st.cache_resource` and are shared by every session;
a query's trace is cached by (question, index, settings), so switching pages, steps or views never
recomputes what is known. Pages call `current_trace()` and only present.
"""
from __future__ import annotations

from dataclasses import asdict

import streamlit as st

from app import jobs
from rag_core.analysis import sentences
from rag_core.analysis import token_sources as origins
from rag_core.catalog import available_indexes, default_index_name, resolve_index
from rag_core.config import Config
from rag_core.corpus import CorpusError, Passage
from rag_core.index import IndexLoadError
from rag_core.pipeline import Pipeline, QuestionError, load_models
from rag_core.sources import ModelSourceError
from rag_core.trace import Trace

DEFAULT_QUESTION = "Who wrote Moby-Dick?"
USER_ERRORS = (QuestionError, IndexLoadError, CorpusError, ModelSourceError, ValueError)


# The loaders draw nothing themselves: Streamlit replays elements drawn inside a cached function on
# every later call, so a status box there would spin on every page forever. The spinner text is
# shown only while the function really runs.
@st.cache_resource(show_spinner="Loading the retriever and the generator (first start only, ~30 s)…")
def models():
    """Encoder + generator, loaded once for the whole server (all sessions share them)."""
    return load_models(Config())


@st.cache_resource(show_spinner="Opening the index (its first use builds it: ~10 s)…", max_entries=8)
def index(name: str):
    """A named index (built and cached on disk on first use), shared by all sessions."""
    return resolve_index(name, models().encoder)[1]


def forget_index(name: str) -> None:
    """Drop every cached object of an index that was replaced or deleted (its traces included)."""
    index.clear()
    _trace.clear()


def pipeline(name: str | None = None) -> Pipeline:
    name = name or settings().index or default_index_name()
    return Pipeline(models(), name, index(name), settings())


@st.cache_resource(show_spinner=False, max_entries=256)
def _trace(question: str, index_name: str, settings_key: tuple) -> Trace:
    cfg = Config(**dict(settings_key))
    return pipeline(index_name).run(question, cfg)


def cached_trace(question: str, index_name: str, cfg: Config) -> Trace:
    """The cached trace for exactly these inputs (computed on a miss); raises user errors."""
    return _trace(question, index_name, settings_key(cfg))


@st.cache_resource(show_spinner=False, max_entries=512)
def _closed_book_row(question: str, token_ids: tuple[int, ...]):
    """The closed-book teacher-forced row of one answer (T,): it depends on the question and the
    answer only, so every index and setting shares it (the pipeline is built without an index: a
    closed-book row reads none)."""
    return Pipeline(models(), "", None, Config()).closed_book_scores(question, [list(token_ids)])[0]


def token_sources(trace: Trace, decoding: str, rank: int = 0) -> list[origins.TokenSource] | None:
    """Where each token of a trace's candidate came from (one extra model row, computed once)."""
    cand = next((c for c in trace.of(decoding) if c.rank == rank), None)
    if cand is None or not cand.token_ids:
        return None
    try:
        closed = _closed_book_row(trace.query, tuple(cand.token_ids))
    except USER_ERRORS as e:
        st.error(str(e).splitlines()[0] if str(e) else "that did not work")
        return None
    return origins.candidate_sources(trace.log_prior, cand, closed)


@st.cache_resource(show_spinner="Reading the passage with each sentence left out…", max_entries=256)
def _sentences(question: str, index_name: str, passage: Passage, token_ids: tuple[int, ...]):
    return sentences.attribute(pipeline(index_name), question, passage, list(token_ids))


def sentence_attribution(trace: Trace, cand, z: int) -> sentences.SentenceAttribution | None:
    """Leave-one-sentence-out of a candidate's answer over passage `z` (one batched pass, once)."""
    try:
        return _sentences(trace.query, trace.index, trace.hits[z].passage, tuple(cand.token_ids))
    except USER_ERRORS as e:
        st.error(str(e).splitlines()[0] if str(e) else "that did not work")
        return None


def settings_key(cfg: Config) -> tuple:
    keep = ("k", "decode", "beams", "max_new_tokens", "length_penalty", "rescore", "scale")
    return tuple((k, v) for k, v in asdict(cfg).items() if k in keep)


def trace_for(question: str, index_name: str | None = None, cfg: Config | None = None) -> Trace | None:
    """The trace of a question under the current settings, computed once; None after a user error
    (the error is shown on the page, nothing else is lost)."""
    cfg = cfg or settings()
    name = index_name or cfg.index or default_index_name()
    try:
        with st.spinner(f"Answering on the {name} index…"):
            return _trace(question, name, settings_key(cfg))
    except USER_ERRORS as e:
        st.error(str(e).splitlines()[0] if str(e) else "that did not work")
        return None


def question() -> str:
    return st.session_state.get("question", DEFAULT_QUESTION)


def current_trace() -> Trace | None:
    return trace_for(question())


def settings() -> Config:
    s = st.session_state
    return Config(k=s.get("k", 5), beams=s.get("beams", 1), rescore=s.get("rescore", "thorough"),
                  scale=s.get("scale"), max_new_tokens=s.get("max_new_tokens", 16),
                  length_penalty=float(s.get("length_penalty", 1.0)), index=s.get("index_name") or default_index_name())


def sidebar() -> None:
    """The settings every page shares."""
    with st.sidebar:
        st.markdown("### Settings")
        names = available_indexes()
        if st.session_state.get("index_name") not in names:
            st.session_state["index_name"] = default_index_name()
        st.selectbox("Index", names, key="index_name",
                     help="2018 and 2016: the base Wikipedia passages plus world-leader passages as of that year. "
                          "wiki: the base alone. Others: corpora you built on the Corpus page.")
        st.slider("K (passages retrieved)", 1, 20, 5, key="k")
        st.slider("Beams", 1, 4, 1, key="beams", help="1 = greedy decoding, as the paper decoded QA.")
        st.number_input("Length penalty", min_value=-2.0, max_value=4.0, value=1.0, step=0.5, key="length_penalty",
                        disabled=st.session_state.get("beams", 1) == 1,
                        help="Beam search only: a finished beam ranks by its log-probability divided by "
                             "(answer length) to this power. 1.0 is transformers' default; 0 ranks by the plain "
                             "log-probability; larger values favour longer answers.")
        st.radio("RAG-Sequence rescoring", ["thorough", "fast"], key="rescore", horizontal=True,
                 help="thorough: every hypothesis scored under every passage. fast: a passage that did not "
                      "produce a hypothesis gives it probability 0.")
        default_scale = 20.0
        scale = st.number_input("Retriever scale", min_value=0.1, max_value=200.0,
                                value=float(st.session_state.get("scale") or default_scale), step=1.0,
                                help="p(z|x) = softmax(scale · s(z)). 20 is the scale MiniLM was trained with.")
        st.session_state["scale"] = None if scale == default_scale else scale
        st.slider("Max answer tokens", 4, 48, 16, key="max_new_tokens")
        st.caption("Passages: Wikipedia Level-4 vital article summaries, CC BY-SA 4.0.")
    jobs.sidebar_panel()
