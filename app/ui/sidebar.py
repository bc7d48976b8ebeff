"""The sidebar's settings, shared by every page: the index, K, beams, length penalty, rescoring,
the retriever's scale and the answer length, and the credit of the selected index's passages.
Pages read them through `state.answer_settings()`.

Each setting is kept across pages (`KEEP`): `st.switch_page` (a button that opens another page)
drops the state of every widget, the sidebar's included, so without it a drill-down from Eval
quietly put the sidebar back on the default index.
"""

from __future__ import annotations

import streamlit as st

from app import stack, state
from app.ui import jobs
from app.ui.safe_text import md_text
from rag_core.loupe.indexes import NAMED, available_indexes, user_indexes

WIKIPEDIA = "Wikipedia Level-4 vital article summaries, CC BY-SA 4.0"
KEEP = "session"  # the sidebar's settings outlive a page switch (`st.switch_page` drops other widgets' state)
K_RANGE, BEAMS_RANGE = (1, 20), (1, 4)  # what the sidebar's K and Beams offer
LENGTH_PENALTY_RANGE, MAX_TOKENS_RANGE, SCALE_RANGE = (-2.0, 4.0), (4, 48), (0.1, 200.0)  # and the rest


def index_source(name: str) -> str:
    """Where an index's passages come from, in a few words: the sidebar credits the selected one.

    >>> index_source("wiki")
    'Wikipedia Level-4 vital article summaries, CC BY-SA 4.0'
    """
    if name == "wiki":
        return WIKIPEDIA
    if name in NAMED:  # 2016, 2018
        return f"{WIKIPEDIA}; world-leader passages written for this app as of 31 December {name}"
    built = next((r for r in user_indexes() if r["name"] == name), None)
    if built is not None:
        count = f"{built['passages']:,} passages" if isinstance(built["passages"], int) else "passages"
        return f"the corpus “{name}” built on the Corpus page ({count})"
    return f"the index “{name}” named on the command line"


def index_choices() -> list[str]:
    """The indexes the sidebar offers: the named ones, the user's, and the command line's."""
    names = available_indexes()
    return names + [n for n in stack.extra_indexes() if n not in names]


def _index_names() -> list[str]:
    """The Index choices; a selected index that is gone (deleted on the Corpus page, or by another
    session) gives way to the default, and the page says so once."""
    names = index_choices()
    picked = st.session_state.get("index_name")
    if picked not in names:
        if picked is not None:
            st.session_state["_index_gone"] = picked
        st.session_state["index_name"] = stack.default_index()
    return names


def sidebar() -> None:
    """The settings every page shares (each kept across pages, `KEEP`), and the credit of the
    selected index's passages."""
    ss = st.session_state
    names = _index_names()
    if gone := ss.pop("_index_gone", None):
        st.warning(
            f"The index “{md_text(gone)}” is gone (deleted?): the sidebar's Index is now "
            f"“{md_text(ss['index_name'])}”.",
            icon=":material/swap_horiz:",
        )
    with st.sidebar:
        st.markdown("### Settings")
        st.selectbox(
            "Index",
            names,
            key="index_name",
            persist_state=KEEP,
            help="2018 and 2016: the base Wikipedia passages plus world-leader passages as of that "
            "year. wiki: the base alone. Others: corpora you built on the Corpus page.",
        )
        st.slider("K (passages retrieved)", *K_RANGE, state.DEFAULTS.k, key="k", persist_state=KEEP)
        st.slider(
            "Beams",
            *BEAMS_RANGE,
            state.DEFAULTS.beams,
            key="beams",
            persist_state=KEEP,
            help="1 = greedy decoding, as the paper decoded QA.",
        )
        st.number_input(
            "Length penalty",
            min_value=LENGTH_PENALTY_RANGE[0],
            max_value=LENGTH_PENALTY_RANGE[1],
            value=state.DEFAULTS.length_penalty,
            step=0.5,
            key="length_penalty",
            disabled=ss.get("beams", state.DEFAULTS.beams) == 1,
            persist_state=KEEP,
            help="Beam search only: a finished beam ranks by its log-probability divided by "
            "(answer length) to this power. 1.0 is transformers' default; 0 ranks by the "
            "plain log-probability; larger values favour longer answers.",
        )
        st.radio(
            "RAG-Sequence rescoring",
            ["thorough", "fast"],
            index=["thorough", "fast"].index(state.DEFAULTS.rescore),
            key="rescore",
            horizontal=True,
            persist_state=KEEP,
            help="thorough: every hypothesis scored under every passage. fast: a passage that did not "
            "produce a hypothesis gives it probability 0.",
        )
        default_scale = float(state.models().encoder.default_scale)  # 20 for MiniLM, 1 for DPR
        if "scale" not in ss:  # a new session starts on the command line's --scale (kept: not a widget key)
            ss["scale"] = stack.cli_scale()
        scale = st.number_input(
            "Retriever scale",
            min_value=SCALE_RANGE[0],
            max_value=SCALE_RANGE[1],
            value=float(ss.get("scale") or default_scale),
            step=1.0,
            help=f"p(z|x) = softmax(scale · s(z)). {default_scale:g} is this encoder's "
            "own (20: the scale MiniLM was trained with; 1: DPR's plain inner "
            "product).",
        )
        ss["scale"] = None if scale == default_scale else scale
        st.slider(
            "Max answer tokens",
            4,
            48,
            state.DEFAULTS.max_new_tokens,
            key="max_new_tokens",
            persist_state=KEEP,
        )
        st.caption(f"Passages: {md_text(index_source(ss['index_name']))}.")
    jobs.sidebar_panel()
