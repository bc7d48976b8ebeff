"""Small presentation helpers shared by pages: answer cards, passage lists, the CSV download.

Passage text is always shown as plain text (st.text / dataframes), never as Markdown or HTML.
The pages' plotly figures are built in `app.charts`.
"""
from __future__ import annotations

import html
import re

import numpy as np
import pandas as pd
import streamlit as st

from app import state
from rag_core import marginals
from rag_core.config import RAG_SEQUENCE, RAG_TOKEN
from rag_core.marginals import prob
from rag_core.trace import Trace


def answer_cards(trace: Trace) -> None:
    cols = st.columns(2)
    for col, decoding, label in zip(cols, (RAG_TOKEN, RAG_SEQUENCE), ("RAG-Token", "RAG-Sequence")):
        best = trace.answer(decoding)
        with col:
            if best is None:
                st.caption(f"{label}: not decoded")
                continue
            main = best.log_p_tok(trace.log_prior) if decoding == RAG_TOKEN else best.log_p_seq(trace.log_prior)
            st.metric(label, best.answer or "(empty)", f"p = {prob(main):.3f}", delta_color="off", delta_arrow="off")
            other = "p_seq" if decoding == RAG_TOKEN else "p_tok"
            other_p = best.log_p_seq(trace.log_prior) if decoding == RAG_TOKEN else best.log_p_tok(trace.log_prior)
            st.caption(f"{other} of the same answer: {prob(other_p):.3f}" + "".join(f" · {n}" for n in ending_notes(best)))


def ending_notes(c) -> list[str]:
    """Plain words for how an answer began and ended, where decoding rules (not the model) decided."""
    notes = []
    if c.forced and c.forced[0] and len(c.forced) > 1:
        notes.append("first token forced by the generator's settings")
    if not c.finished:
        notes.append("end token forced at the token limit" if c.forced and c.forced[-1] else
                     "unfinished: cut at the token limit")
    return notes


def citation(log_prior, cand) -> np.ndarray:
    """The posterior p(z|x,y) over the K passages after the whole answer of `cand`: (K,)."""
    return marginals.citation(log_prior, cand.token_logp).numpy()


def passages_frame(trace: Trace) -> pd.DataFrame:
    rows = []
    posts = {d: marginals.citation(trace.log_prior, trace.answer(d).token_logp).tolist()
             for d in (RAG_TOKEN, RAG_SEQUENCE) if trace.answer(d) is not None}
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
    trace = state.current_trace()
    if trace is None:
        st.info("Ask a question on the Ask page first.")
        st.stop()
    return trace


# --- Helpers for the step-by-step and citation pages (charts get text escaped, never as HTML) ---

PASSAGE_COLORS = ["#636EFA", "#EF553B", "#00CC96", "#AB63FA", "#FFA15A", "#19D3F3", "#FF6692", "#B6E880", "#FF97FF",
                  "#FECB52", "#1F77B4", "#FF7F0E", "#2CA02C", "#D62728", "#9467BD", "#8C564B", "#E377C2", "#7F7F7F",
                  "#BCBD22", "#17BECF"]


def token_label(token: str) -> str:
    """A token as text with its whitespace visible: ' Mel' -> '␣Mel', '\\n' -> '↵'."""
    return token.replace(" ", "␣").replace("\n", "↵").replace("\t", "⇥") or "∅"


def plot_text(text: str, width: int | None = None) -> str:
    """Text for a plotly label or hover: cut to `width` characters and HTML-escaped (plotly reads a
    few HTML tags in labels; escaped, a passage title shows exactly as written). Quotes stay as
    they are: plotly shows `&quot;` literally, and a label is never inside an attribute."""
    text = str(text)
    if width is not None and len(text) > width:
        text = text[: width - 1] + "…"
    return html.escape(text, quote=False)


def passage_label(trace: Trace, z: int, width: int = 30) -> str:
    """'z1 · Herman Melville' for the passage at 0-based position z (plain text, not escaped)."""
    title = trace.hits[z].passage.title
    if len(title) > width:
        title = title[: width - 1] + "…"
    return f"z{trace.hits[z].rank} · {title}"


def passage_color(z: int) -> str:
    return PASSAGE_COLORS[z % len(PASSAGE_COLORS)]


def passage_tick(trace: Trace, z: int, width: int = 12) -> str:
    """A two-line, escaped axis label for plotly: 'z1<br>Herman Melv…'."""
    return f"z{trace.hits[z].rank}<br>{plot_text(trace.hits[z].passage.title, width)}"


def md_text(text: str) -> str:
    """Model or user text made literal inside a Markdown string (st.warning, st.caption): every
    Markdown, LaTeX ($), emoji-shortcode (:) and HTML (<) character is backslash-escaped.

    >>> md_text("born <other> *1*")
    'born \\\\<other\\\\> \\\\*1\\\\*'
    """
    return re.sub(r"([\\`*_{}\[\]()#+\-.!|<>~$:&])", r"\\\1", str(text))
