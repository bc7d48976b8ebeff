"""What training changed, on the Eval page: the untrained base's shipped run of the held-out test
split against the trained default's, question by question (the same passages and settings)."""

from __future__ import annotations

import streamlit as st

from app.eval import eval_views
from rag_core.loupe.evaluation import runs as ev
from rag_core.loupe.evaluation import shipped_runs


def before_after() -> None:
    pairs = shipped_runs.before_after_pairs()
    if not pairs:
        return
    st.subheader("What training changed")
    st.caption(
        "A′: the untrained base (SmolLM2 as shipped, steered by worked examples). B′: the trained default "
        "(the same model fine-tuned through the RAG marginal likelihood on questions disjoint from this "
        "split). Both are shipped runs of the held-out test split with the same passages and settings."
    )
    names = {b: f"K={ev.load_run(b).settings.get('k', '?')} ({b.stem})" for _, b in pairs}
    trained = st.radio(
        "Runs", [b for _, b in pairs], format_func=names.get, horizontal=True, key="train_effect_run"
    )
    mode = st.radio("Mode", list(ev.RAG_MODES), index=1, horizontal=True, key="train_effect_mode")
    base = next(a for a, b in pairs if b == trained)
    a, b = ev.load_run(base), ev.load_run(trained)
    if a is None or b is None:
        st.error("One of the two shipped runs cannot be read.")
        return
    eval_views.pair(a, b, mode, "train_effect", ("A′", "B′"))
