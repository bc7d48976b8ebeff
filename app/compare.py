"""Ask's "Compare with": the same question, index and settings under another model stack, side by
side with the session's own (the before and after of a fine-tuning run is the first use).

The server holds one stack; the other is loaded for the comparison alone and freed once its trace
is made (for that moment two stacks are in memory). Its trace is cached by the other stack's
fingerprint, so it is computed once, and never shown under the wrong name.
"""

from __future__ import annotations

import gc

import pandas as pd
import streamlit as st

from app import safe_text, stack, state, views
from rag_core import stacks
from rag_core.config import RAG_SEQUENCE, RAG_TOKEN
from rag_core.errors import first_line
from rag_core.marginals import p_text, prob
from rag_core.pipeline import Pipeline, load_models
from rag_core.trace import Trace

NONE = "(none)"


@st.cache_resource(show_spinner=False, max_entries=32)
def _other_trace(
    fingerprint: str, question: str, index_name: str, settings_key: tuple, _other: stacks.Stack
) -> Trace:
    """The trace under `_other` (loaded here, dropped when done; one load at a time)."""
    with stack.loading_lock():
        models = load_models(_other.cfg)
        try:
            encoder = models.encoder
            idx = state.index_for(encoder, index_name)
            cfg = _other.cfg.with_(corpus=None, **dict(settings_key))
            return Pipeline(models, index_name, idx, cfg).run(question, cfg)
        finally:
            del models
            gc.collect()


def section(trace: Trace) -> None:
    """The picker and, once another stack is picked, the two answers and top passages side by side."""
    here = stack.current()
    others = [s for s in stack.offered() if s.key != here.key and s.key in stack.keys()]
    if not others:
        return
    names = {s.key: s.name for s in others}
    st.subheader("Compare with another model")
    pick = st.selectbox(
        "Compare with",
        [NONE, *names],
        key="compare_with",
        format_func=lambda k: names.get(k, k),
        help="The same question, index and settings under another model stack: the answers, their "
        "probabilities and the top passages side by side. The other stack is loaded for this "
        "alone and freed after.",
    )
    if pick == NONE:
        return
    other = next(s for s in others if s.key == pick)
    try:
        with st.spinner(f"Answering with {other.name} (loaded for this comparison)…"):
            theirs = _other_trace(
                stacks.fingerprint(other.cfg),
                trace.query,
                trace.index,
                state.settings_key(state.settings()),
                other,
            )
    except stack.LOAD_ERRORS as e:
        st.error(f"{safe_text.md_text(other.name)} could not answer: {safe_text.md_text(first_line(e))}")
        return
    left, right = st.columns(2)
    for col, name, t in ((left, here.name, trace), (right, other.name, theirs)):
        with col:
            st.markdown(f"**{safe_text.md_text(name)}**")
            views.table(summary(t), hide_index=True)
            views.table(top_passages(t), hide_index=True)


def summary(t: Trace) -> pd.DataFrame:
    """One row per marginal: its answer, p_tok and p_seq of that answer."""
    rows = []
    for decoding in (RAG_TOKEN, RAG_SEQUENCE):
        c = t.answer(decoding)
        if c is not None:
            rows.append(
                {
                    "decoding": decoding,
                    "answer": c.answer,
                    "p_tok": p_text(prob(c.log_p_tok(t.log_prior))),
                    "p_seq": p_text(prob(c.log_p_seq(t.log_prior))),
                }
            )
    return pd.DataFrame(rows)


def top_passages(t: Trace, n: int = 3) -> pd.DataFrame:
    return pd.DataFrame(
        [
            {"rank": h.rank, "title": h.passage.title, "prior p(z|x)": p_text(float(p))}
            for h, p in list(zip(t.hits, t.prior))[:n]
        ]
    )
