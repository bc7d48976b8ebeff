"""Small presentation helpers shared by pages: answer cards, passage lists, the CSV download.

Passage text is always shown as plain text (st.text / dataframes), never as Markdown or HTML.
"""
from __future__ import annotations

import math

import pandas as pd
import streamlit as st

from rag_core import marginals
from rag_core.trace import Trace


def prob(logp: float) -> float:
    return math.exp(logp) if logp > float("-inf") else 0.0


def answer_cards(trace: Trace) -> None:
    cols = st.columns(2)
    for col, decoding, label in zip(cols, ("rag-token", "rag-sequence"), ("RAG-Token", "RAG-Sequence")):
        best = trace.answer(decoding)
        with col:
            if best is None:
                st.caption(f"{label}: not decoded")
                continue
            main = best.log_p_tok(trace.log_prior) if decoding == "rag-token" else best.log_p_seq(trace.log_prior)
            st.metric(label, best.answer or "(empty)", f"p = {prob(main):.3f}", delta_color="off")
            other = "p_seq" if decoding == "rag-token" else "p_tok"
            other_p = best.log_p_seq(trace.log_prior) if decoding == "rag-token" else best.log_p_tok(trace.log_prior)
            st.caption(f"{other} of the same answer: {prob(other_p):.3f}" + ("" if best.finished else " · cut at the token limit"))


def passages_frame(trace: Trace) -> pd.DataFrame:
    rows = []
    posts = {d: marginals.citation(trace.log_prior, trace.answer(d).token_logp).tolist()
             for d in ("rag-token", "rag-sequence") if trace.answer(d) is not None}
    for i, (h, p) in enumerate(zip(trace.hits, trace.prior)):
        row = {"rank": h.rank, "title": h.passage.title, "score s(z)": round(h.score, 4), "prior p(z|x)": float(p)}
        for d, post in posts.items():
            row[f"posterior ({d})"] = post[i]
        row["text"] = h.passage.text
        rows.append(row)
    return pd.DataFrame(rows)


def passages_table(trace: Trace) -> None:
    frame = passages_frame(trace)
    fmt = {c: st.column_config.ProgressColumn(c, min_value=0.0, max_value=1.0, format="%.3f")
           for c in frame.columns if c.startswith(("prior", "posterior"))}
    fmt["text"] = st.column_config.TextColumn("text", width="large")
    st.dataframe(frame, hide_index=True, column_config=fmt, width="stretch")


def csv_download(trace: Trace, key: str) -> None:
    st.download_button("Download the trace CSV", trace.to_csv(), file_name="rag-trace.csv", mime="text/csv",
                       key=key, help="One row per (decoding, candidate, step, passage), as the CLI writes it.")


def need_trace():
    """The current question's trace, or a hint to ask one first (then the page stops)."""
    from app import state

    trace = state.current_trace()
    if trace is None:
        st.info("Ask a question on the Ask page first.")
        st.stop()
    return trace
