"""Move the query by hand on the Map: a clicked map point becomes a query vector (the inverse of the
placement rule, `PassageMap.lift`), and the top K, the scores and the prior follow at once with no
generator call; "Answer from here" then runs the generator on the new top K."""

from __future__ import annotations

import numpy as np
import pandas as pd
import streamlit as st
import torch

from app import state
from app.ui import safe_text, views
from rag_core.loupe.vocabulary import DECODING_LABELS, first_line, marginals


def clicked_point(key: str, owner: tuple) -> np.ndarray | None:
    """The map point the user clicked last on chart `key` (2-D), kept only while `owner` (question,
    index, layout) is unchanged: a new question or layout starts from the question's own q again."""
    sel = st.session_state.get(key)
    points = (
        (sel or {}).get("selection", {}).get("points", [])
        if isinstance(sel, dict)
        else (getattr(getattr(sel, "selection", None), "points", None) or [])
    )
    if points:
        st.session_state["_moved"] = (owner, [float(points[0]["x"]), float(points[0]["y"])])
    moved = st.session_state.get("_moved")
    return np.array(moved[1]) if moved and moved[0] == owner else None


@st.cache_resource(show_spinner="Answering from the moved query…", max_entries=32)
def _answer_from(stack: str, question: str, index_name: str, vector: tuple[float, ...], settings_key: tuple):
    """The trace of the question decoded over the top K of a moved query vector, computed once per
    (question, index, vector, settings): reruns of the Map page make no new generator call."""
    pipe = state.pipeline(index_name)
    settings = pipe.settings.with_(**dict(settings_key))
    return pipe.run_settings(question, [settings], query_vector=np.array([vector], dtype=np.float32))[0].trace


def top_k(pipe, pmap, point: np.ndarray, question: str, k: int) -> tuple[np.ndarray, list]:
    """The query vector lifted from the map `point` ((1, D)) and its top K by the index's own search:
    the Map's rings and the table below it both show these, and the Train page may start from it."""
    q = pmap.lift(point, normalise=bool(getattr(pipe.models.encoder, "normalises", False)))[None]  # (1, D)
    st.session_state["_moved_q"] = {"question": question, "index": pipe.index_name, "vector": q[0].tolist()}
    return q, pipe.retrieve(question, k, query_vector=q)


def panel(
    pipe, point: np.ndarray, q: np.ndarray, hits: list, question: str, own_hits: list, scale: float
) -> None:
    """The moved query's top K (`hits`, of the vector `q`, (1, D)) beside the question's own, and the
    answer from there on request."""
    prior = marginals.log_prior(torch.tensor([h.score for h in hits]), scale).exp()  # (K,)
    own = {h.passage.id: h.rank for h in own_hits}
    st.subheader("The query, moved by hand")
    st.caption(
        "You clicked a point on the map: the query vector is now the mean of the vectors of the 10 passages "
        "nearest that point (nearer ones weigh more), made unit-length. The top K, the scores and the prior "
        "below follow from it alone: no generator call; the rings on the map mark this top K. On the "
        'Train page, "Start from the query you moved on the Map" steps from here, to watch training '
        "pull the query back."
    )
    views.table(
        pd.DataFrame(
            [
                {
                    "rank": h.rank,
                    "title": h.passage.title,
                    "s(z)": round(h.score, 4),
                    "p(z|x)": float(p),
                    "rank for the question": own.get(h.passage.id, "—"),
                }
                for h, p in zip(hits, prior)
            ]
        ),
        hide_index=True,
        column_config=views.widths({"rank": 50, "s(z)": 80, "p(z|x)": 80, "rank for the question": 140}),
    )
    c1, c2 = st.columns([1, 3])
    if c1.button(
        "Answer from here",
        key="map_answer_moved",
        help="The generator reads these K passages with the "
        "question (one prompt pass and a decode, a few seconds).",
    ):
        st.session_state["_moved_answer"] = (question, point.tolist())
    if c2.button("Back to the question's own query", key="map_unmove"):
        st.session_state.pop("_moved", None)
        st.session_state.pop("_moved_q", None)
        st.rerun()
    if st.session_state.get("_moved_answer") == (question, point.tolist()):
        try:
            trace = _answer_from(
                state.stack_key(),
                question,
                pipe.index_name,
                tuple(q[0].tolist()),
                pipe.settings.key(),
            )
        except state.USER_ERRORS as e:
            st.error(safe_text.md_text(first_line(e, "that did not work")))
            return
        for d, name in DECODING_LABELS.items():
            c = trace.answer(d)
            if c is not None:
                st.text(f"{name} from the moved query: {c.answer}")
