"""Page toggles whose value outlives a visit to another page. Streamlit drops a widget's state when
its page is not drawn, so a toggle would come back at its default; the value the user chose is
copied under `_<key>` when they change it, and put back into the widget's key before it is drawn.
Only a choice the user made is kept: nothing else ever writes `_<key>`."""
from __future__ import annotations

import streamlit as st


def _keep(key: str) -> None:
    st.session_state["_" + key] = bool(st.session_state[key])


def toggle(where, label: str, key: str, help: str | None = None, disabled: bool = False) -> bool:
    """A toggle in `where` (st or a column), off until the user turns it on, remembered across pages."""
    st.session_state[key] = bool(st.session_state.get("_" + key, False))
    return where.toggle(label, key=key, help=help, disabled=disabled, on_change=_keep, args=(key,))

