"""A link is a question: the question, the index, K, the decoding settings and the model stack live
in the URL's query parameters (the page is the URL's path), so a reload or a link sent to a class
opens the same question with the same numbers (from the server's shared answers when another
session computed them already).

A session reads its link once, on its first run, before anything uses the settings; a value that
is unknown or out of range is left out (the default stays) and the page names it once. Every run
then writes the session's settings back into the URL, the defaults left out, so the address bar is
always the link to what is on screen.

>>> parse("k", "7"), parse("k", "0"), parse("rescore", "fast"), parse("beams", "two")
(7, None, 'fast', None)
"""

from __future__ import annotations

from collections.abc import Callable
from urllib.parse import urlencode

import streamlit as st

from app import stack, state
from app.ui.safe_text import md_text
from app.ui.sidebar import (
    BEAMS_RANGE,
    K_RANGE,
    LENGTH_PENALTY_RANGE,
    MAX_TOKENS_RANGE,
    SCALE_RANGE,
    index_choices,
)


def _number(kind: Callable, low: float, high: float) -> Callable[[str], object]:
    def read(raw: str):
        try:
            value = kind(raw)
        except ValueError:
            return None
        return value if low <= value <= high else None

    return read


# Each parameter: the session key it sets, and how its text is read (None: not a value it takes).
PARAMS: dict[str, tuple[str, Callable[[str], object]]] = {
    "q": ("question", lambda raw: raw if raw.strip() else None),
    "k": ("k", _number(int, *K_RANGE)),
    "beams": ("beams", _number(int, *BEAMS_RANGE)),
    "length_penalty": ("length_penalty", _number(float, *LENGTH_PENALTY_RANGE)),
    "rescore": ("rescore", lambda raw: raw if raw in ("thorough", "fast") else None),
    "max_new_tokens": ("max_new_tokens", _number(int, *MAX_TOKENS_RANGE)),
    "scale": ("scale", _number(float, *SCALE_RANGE)),
}
# Read against what this server offers now (its indexes and stacks), not a fixed list.
OFFERED = {"index": ("index_name", index_choices), "stack": ("stack", stack.keys)}
ORDER = ("q", "index", "k", "beams", "length_penalty", "rescore", "max_new_tokens", "scale", "stack")


def parse(name: str, raw: str):
    """The value parameter `name` takes from its text `raw`, or None (unknown or out of range)."""
    if name in PARAMS:
        return PARAMS[name][1](raw)
    if name in OFFERED:
        return raw if raw in OFFERED[name][1]() else None
    return None


def read_link() -> None:
    """The link's values into the session, once, on its first run (before the stack loads and the
    sidebar draws); the values left out are kept for `notice`."""
    ss = st.session_state
    if ss.get("_link_read"):
        return
    ss["_link_read"] = True
    ignored = []
    for name in st.query_params:
        raw = st.query_params[name]
        value = parse(name, raw)
        if value is None:
            ignored.append(f"{name}={raw}")
            continue
        key = PARAMS[name][0] if name in PARAMS else OFFERED[name][0]
        ss[key] = value
        if name == "q":
            ss["question_box"] = value  # Ask's field shows the linked question
    if ignored:
        ss["_link_ignored"] = ignored


def notice() -> None:
    """The values of the session's link that were not used, named (the defaults were), on every
    run until one reaches its end (`notice_shown`): a run that stops early (the model loading, a
    rerun) must not take the notice with it."""
    ignored = st.session_state.get("_link_ignored")
    if ignored:
        st.warning(
            "This link's "
            + ", ".join(f"“{md_text(v)}”" for v in ignored)
            + " could not be used (an unknown name or a value out of range): the defaults are shown instead.",
            icon=":material/link_off:",
        )


def notice_shown() -> None:
    """The page ran to its end with the link's notice on it: it is not shown again."""
    st.session_state.pop("_link_ignored", None)


def current() -> dict[str, str]:
    """The session's question and settings as query parameters, the defaults left out."""
    ss, asked, defaults = st.session_state, state.answer_settings(), state.DEFAULTS
    values = {
        "q": state.question(),
        "index": asked.index if asked.index != stack.default_index() else None,
        "stack": ss.get("stack") if ss.get("stack") not in (None, "default") else None,
    }
    for name in ("k", "beams", "length_penalty", "rescore", "max_new_tokens", "scale"):
        value = getattr(asked, name)
        values[name] = None if value == getattr(defaults, name) else value
    if values["q"] == state.DEFAULT_QUESTION:
        values["q"] = None
    return {
        name: f"{values[name]:g}" if isinstance(values[name], float) else str(values[name])
        for name in ORDER
        if values.get(name) is not None
    }


def write_link() -> None:
    """The address bar shows the link to what is on screen (the defaults left out)."""
    wanted = current()
    if dict(st.query_params) != wanted:
        st.query_params.from_dict(wanted)


def link() -> str:
    """The full link to this page with the session's question and settings."""
    query = urlencode(current())
    base = st.context.url or ""
    return f"{base}?{query}" if query else base


def copy_control() -> None:
    """A "Copy link" control: the link in a box with its own copy button (shown as plain text)."""
    with st.popover("Copy link", icon=":material/link:"):
        st.code(link(), language=None, wrap_lines=True)
        st.caption("Opens this page with the same question, index, settings and model: the same numbers.")
