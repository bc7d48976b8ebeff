"""Small presentation helpers shared by pages: passage lists, tables, the exports, the line naming
what a page shows (the answer cards are in `app.ui.answer_card`).

Passage text is always shown as plain text (st.text / dataframes), never as Markdown or HTML.
Text escaping is `app.ui.safe_text`'s, colours `app.ui.palette`'s, detours `app.ui.detours`'; the pages'
plotly figures are built by the chart modules (see `app.ui.charts`).
"""

from __future__ import annotations

from functools import partial

import numpy as np
import pandas as pd
import streamlit as st

from app import state
from app.ui import question_box
from app.ui.detours import detour_notice
from app.ui.palette import QUESTION_RGB
from app.ui.safe_text import md_text
from rag_core.loupe.trace_exports import exports
from rag_core.loupe.vocabulary import RAG_SEQUENCE, RAG_TOKEN, Trace, marginals, p_text


def citation(log_prior, cand) -> np.ndarray:
    """The posterior p(z|x,y) over the K passages after the whole answer of `cand`: (K,)."""
    return marginals.citation(log_prior, cand.token_logp).numpy()


def passages_frame(trace: Trace) -> pd.DataFrame:
    rows = []
    posts = {
        d: marginals.citation(trace.log_prior, trace.answer(d).token_logp).tolist()
        for d in (RAG_TOKEN, RAG_SEQUENCE)
        if trace.answer(d) is not None
    }
    for i, (h, p) in enumerate(zip(trace.hits, trace.prior)):
        row = {
            "rank": h.rank,
            "title": h.passage.title,
            "score s(z)": round(h.score, 4),
            "prior p(z|x)": float(p),
        }
        for d, post in posts.items():
            row[f"posterior ({d})"] = post[i]
        row["text"] = h.passage.text
        rows.append(row)
    return pd.DataFrame(rows)


def _tint(p) -> str:
    """A cell's background, red as strong as the probability `p` in it (none where it is missing)."""
    return (
        ""
        if pd.isna(p)
        else f"background-color: rgba({QUESTION_RGB}, {0.4 * min(max(float(p), 0.0), 1.0):.3f})"
    )


def table(
    frame: pd.DataFrame,
    column_config: dict | None = None,
    hide_index: bool = True,
    width="stretch",
    probabilities=(),
    **kwargs,
) -> None:
    """A dataframe as every page shows one. Every float cell reads as `p_text` writes a number:
    three significant digits, scientific below 1e-4 (3.21e-06; the grid's own printf formats would
    write 0.00000321), so pandas' Styler formats the cells. `probabilities`: columns of values in
    [0, 1], tinted red as strong as each value, so a shift of belief shows at a glance. A Styler
    given as `frame` keeps its own formats. Cells are plain text (the grid never renders Markdown)."""
    styler = (
        frame
        if hasattr(frame, "data")
        else frame.style.format(
            {c: p_text for c in frame.columns if pd.api.types.is_float_dtype(frame[c])}, na_rep="—"
        )
    )
    shown = [c for c in probabilities if c in styler.data.columns]
    if shown:
        styler = styler.map(_tint, subset=shown)
    st.dataframe(styler, hide_index=hide_index, width=width, column_config=column_config or {}, **kwargs)


def widths(px: dict[str, int | tuple]) -> dict:
    """Column settings of fixed pixel widths, for a table whose columns must all fit the page at
    1280 px (about 790 px of content beside the sidebar) instead of scrolling sideways. A value is a
    width, or (header, width, help): a header short enough for its column (the grid cuts a longer
    one), its full meaning shown on hover.

    >>> list(widths({"question": 170, "answer rank": ("rank", 45, "rank of the best passage")}))
    ['question', 'answer rank']
    """
    out = {}
    for c, w in px.items():
        header, width, hover = (c, w, None) if isinstance(w, int) else (*w, None)[:3]
        out[c] = st.column_config.Column(header, width=width, help=hover)
    return out


def passages_table(trace: Trace, compact: bool = False) -> None:
    """The K passages with their scores, prior and posteriors (tinted as strong as each probability);
    `compact` (a half-width column): rank, title, prior and the RAG-Sequence posterior only, so every
    column fits."""
    frame = passages_frame(trace)
    if compact:
        frame = frame[
            [c for c in ("rank", "title", "prior p(z|x)", f"posterior ({RAG_SEQUENCE})") if c in frame]
        ]
    fmt = {}
    for d, short in ((RAG_TOKEN, "tok"), (RAG_SEQUENCE, "seq")):  # headers that fit their column, whole
        fmt[f"posterior ({d})"] = st.column_config.Column(
            f"p(z|x,y) {short}",
            width=100,
            help=f"The posterior p(z|x,y) after the {d} answer: how much that answer leans on passage z.",
        )
    fmt["prior p(z|x)"] = st.column_config.Column(
        "prior p(z|x)", width=100, help="The retriever's prior p(z|x) = softmax(scale · s(z)) over the K."
    )
    fmt["rank"] = st.column_config.NumberColumn("rank", width=45)
    fmt["title"] = st.column_config.TextColumn("title", width=120 if compact else 170)
    fmt["text"] = st.column_config.TextColumn("text", width="medium")  # the full text shows on hover
    table(frame, fmt, probabilities=[c for c in frame.columns if c.startswith(("prior", "posterior"))])


def export_buttons(frame: pd.DataFrame, kind: str, stem: str, key: str, what: str) -> None:
    """One download button per export format (CSV, Parquet, JSON Lines) of the same frame, each
    naming where its columns are documented: a file a user keeps must say how to read it."""
    _format_buttons(lambda fmt: exports.frame_bytes(frame, fmt, kind), kind, stem, key, what)


def _format_buttons(data, kind: str, stem: str, key: str, what: str) -> None:
    """The download buttons of `export_buttons`, each file made by `data(fmt)` when it is clicked."""
    names = {"csv": "CSV", "parquet": "Parquet", "jsonl": "JSON Lines"}
    schema = f"{kind}/{exports.SCHEMAS[kind]}"
    for col, fmt in zip(st.columns(len(exports.FORMATS)), exports.FORMATS):
        col.download_button(
            f"Download the {what} ({names[fmt]})",
            partial(data, fmt),
            file_name=f"{stem}.{fmt}",
            mime=exports.MIME[fmt],
            key=f"{key}_{fmt}",
            help=f"The same columns in every format, as the CLI writes them (schema "
            f"{schema}). Every column is explained in `{exports.DOCS}` in the "
            "repository.",
        )
    st.caption(f"Columns (schema {schema}) explained in `{exports.DOCS}` in the repository.")


def csv_download(trace: Trace, key: str) -> None:
    """The trace in every export format: one row per (decoding, candidate, step, passage); and the
    query as OpenTelemetry spans for trace tools. Each file is made when it is downloaded, once."""
    _format_buttons(partial(state.export, trace), "trace", "rag-trace", key, "trace")
    st.download_button(
        "Download the query as OpenTelemetry spans (OTLP JSON)",
        partial(state.export, trace, "otlp"),
        file_name="rag-trace.otlp.json",
        mime="application/json",
        key=f"{key}_otlp",
        help="The retrieval and each reading as spans with the OpenInference conventions, which trace "
        "tools such as Arize Phoenix read: the passages with their scores, each answer with its "
        "probability, this product's numbers under `rag_loupe.` (as `ask --otlp` writes them).",
    )


def need_trace(stuffed: bool = False):
    """The current question's trace, or a hint to ask one first (then the page stops); the page
    says which question, index and settings it shows. `stuffed`: with its stuffed reading."""
    trace = state.current_trace()
    if trace is None:
        st.info("Ask a question on the Ask page first.")
        st.stop()
    about(trace)
    return state.with_stuffed(trace) if stuffed else trace


def about(trace: Trace) -> None:
    """One line naming what the page shows (the session's question, as the engine read it): the
    question, the index and the decoding settings; then what the engine cut from the question, as it
    recorded it with the trace (the question is cleaned once, by the engine)."""
    beams = trace.settings.beams or 1
    decoding = "greedy" if beams == 1 else f"{beams} beams"
    about_query(trace.question, trace.index, f"K={trace.k} · {decoding} · scale {trace.scale:g}", notes=False)
    show_cuts(question_box.sentences(trace.settings.notices or ()))


def about_query(question: str, index: str, settings: str, raw: str | None = None, notes: bool = True) -> None:
    """The first line of a page about one question: what it asks, on which index, with which settings;
    then (`notes`) what was cut from the question as typed (`raw`, default `question`)."""
    detour_notice()
    st.markdown(f"**Question:** “{md_text(question)}” · **index** {md_text(index)} · {md_text(settings)}")
    if notes:
        question_notes(question if raw is None else raw)


def question_notes(raw: str) -> None:
    """The notices of a question as typed (`question_box.notes`): a cut, and what it kept."""
    show_cuts(question_box.notes(raw))


def show_cuts(notes: list[str]) -> None:
    """What was cut from a question, each as a warning where the answer is."""
    for note in notes:
        st.warning(md_text(note), icon=":material/content_cut:")
