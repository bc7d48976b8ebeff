"""What every page shows of the model stack: the sidebar's Model choice, the first line naming the
stack in words (its full ids on hover), and the one message of a command line or a stack that could not be
used. Names and paths are a user's text: escaped, never read as Markdown."""

from __future__ import annotations

import streamlit as st

from app import stack, state
from app.ui.safe_text import md_text


def sidebar_choice() -> None:
    with st.sidebar:
        now = stack.current()
        st.selectbox(
            "Model",
            stack.keys(),
            key="stack",
            format_func=stack.label,
            on_change=stack.forget_scale,
            help=md_text(now.details()),
        )
        st.caption(f"Running on {md_text(stack.device_text())}")


def notices() -> None:
    """The command line's error (every session, so whoever opens the app learns why it shows the
    default stack) and this session's failed switch, each in one line."""
    _, _, error = stack.cli()
    if error:
        st.error(
            f"The command line could not be used: {md_text(error)}. Showing the default model stack.",
            icon=":material/error:",
        )
    failed = st.session_state.pop("_stack_error", None)
    if failed:
        st.error(f"{md_text(failed)}. Showing the default model stack.", icon=":material/error:")


def stack_line() -> None:
    """The page's first line: the stack it shows in words, retriever then generator, with its full
    ids on hover; a stack the user opened (the command line's, a training run) also by the name the
    sidebar gives it."""
    now = stack.current()
    named = {"preset": "", "cli": " (command line)"}.get(now.kind, f" ({now.name})")
    st.caption(f"**Model:** {md_text(state.stack_words() + named)}", help=md_text(now.details()))
