"""A student's exercise answers, kept in their own browser (its localStorage): no account, and the
server holds them only while the session lasts. A reload, or the same browser tomorrow, finds them.

The browser side is a small component: on every mount it merges what the page asks it to save
into the stored answers and sends the whole back; the page reads them from the component's state
(None until the browser has answered once, on the first run after a page load).
"""

from __future__ import annotations

import streamlit as st

STORAGE_KEY = "rag-loupe-exercises"
_JS = """
export default function (component) {
  const { data, setStateValue } = component;
  const KEY = "STORAGE_KEY";
  let stored = {};
  try {  // a browser that keeps nothing (storage off) still answers, with nothing kept
    stored = JSON.parse(window.localStorage.getItem(KEY) || "{}") || {};
    if (data && data.forget) {
      stored = {};
      window.localStorage.removeItem(KEY);
    } else if (data && data.save && Object.keys(data.save).length) {
      stored = Object.assign(stored, data.save);
      window.localStorage.setItem(KEY, JSON.stringify(stored));
    }
  } catch (e) {
    stored = (data && data.save) || {};
  }
  setStateValue("progress", stored);
}
""".replace("STORAGE_KEY", STORAGE_KEY)

_store = st.components.v2.component("rag_loupe.exercise_progress", js=_JS)


def synced(progress: dict, forget: bool = False) -> dict | None:
    """The answers this browser keeps, after saving `progress` (this session's) into them, or
    forgetting them all; None before the browser has answered."""
    result = _store(
        key="exercise_progress_store",
        data={"save": progress, "forget": forget},
        default={"progress": None},
        on_progress_change=lambda: None,
    )
    return result.progress
