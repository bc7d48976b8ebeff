"""Detours: a button that takes the user to another page with other settings (a question, an index,
K, beams) remembers what it changed, so the page it lands on says so and offers a Back button that
restores them. The app calls `on_page` and `follow_back` before each page runs."""

from __future__ import annotations

import streamlit as st

from app import state
from app.ui.safe_text import md_text

DETOUR_NAMES = {"question": "the question", "index_name": "the sidebar index", "k": "K", "beams": "beams"}


def detour(page: str, label: str, note: str = "", **changes) -> None:
    """Before a button takes the user to another page with other settings (`changes`, session keys):
    remember what it changes, so the page it lands on says so and offers the way back. `page`: the
    script to go back to; `label`: its title. Call it from a button's callback (a sidebar setting
    cannot change once the sidebar is drawn). `note`: what the page now shows, said first (plain text)."""
    ss = st.session_state
    shown = {"question": state.question(), "index_name": state.answer_settings().index}  # defaults included
    ss["detour"] = {
        "page": page,
        "label": label,
        "before": {k: ss.get(k) for k in changes},
        "after": changes,
        "was": {k: shown.get(k, ss.get(k)) for k in changes},
        "shown_on": None,
        "note": note,
    }
    ss.update(changes)


def _undo_detour() -> None:
    d = st.session_state.pop("detour", None)
    if d:
        st.session_state["detour_back_to"] = d["page"]  # the run that follows goes there (`follow_back`)
        for k, v in d["before"].items():
            if v is None:
                st.session_state.pop(k, None)
            else:
                st.session_state[k] = v


def follow_back() -> None:
    """After a detour's Back button: go to the page the detour came from. Called by the app before
    any page runs, because the click's callback has already undone the detour, so the page with the
    button no longer draws it (a switch placed after the button never ran)."""
    if back_to := st.session_state.pop("detour_back_to", None):
        st.switch_page(back_to)


def on_page(title: str) -> None:
    """Called by the app before each page runs, with the page's title. A detour's notice belongs
    to the page it landed on (the first other page that runs after it): once the user opens any
    other page it is gone for good, so it never follows them onto a page it does not describe."""
    ss = st.session_state
    ss["_page"] = title
    d = ss.get("detour")
    if d and d.get("shown_on") is None and title != d["label"]:
        d["shown_on"] = title
    elif d and d.get("shown_on") not in (None, title):
        ss.pop("detour")


def detour_notice() -> None:
    """'Opened from Index swap: the question set to …, the sidebar index to … (was …)' with a Back
    button, on the page the detour landed on, while the settings are still the ones it set."""
    d = st.session_state.get("detour")
    if not d or d.get("shown_on", st.session_state.get("_page")) != st.session_state.get("_page"):
        return
    if any(st.session_state.get(k) != v for k, v in d["after"].items()):
        st.session_state.pop("detour")  # the user has moved on: nothing to undo any more
        return
    was = d.get("was", d["before"])  # what the user saw before, a default by its value
    words = "; ".join(
        f"{DETOUR_NAMES.get(k, k)} set to “{md_text(v)}” (was “{md_text(was[k] or 'the default')}”)"
        for k, v in d["after"].items()
        if v != was[k]
    )
    words = words or "the question and the sidebar index were already these"
    note = f"{md_text(d['note'])}; " if d.get("note") else ""
    st.info(f"Opened from {md_text(d['label'])}: {note}{words}.", icon=":material/alt_route:")
    st.button(f"Back to {d['label']}, as it was", on_click=_undo_detour, key="detour_back")
