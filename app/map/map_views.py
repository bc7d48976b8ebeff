"""The Map page's pieces: each passage's hover text and topic, and the table that sets the
retriever's ranking of the ringed top-K beside their distances on the map."""

from __future__ import annotations

import numpy as np
import pandas as pd
import streamlit as st

from app.ui import safe_text, views


@st.cache_resource(show_spinner=False, max_entries=8)
def passage_points(index_name: str, stamp: str, _passages: list) -> dict:
    """Per-passage hover text (escaped: passage text is never HTML), topics and row numbers, for
    one build of one index (`stamp`)."""
    ps = _passages
    hover = [
        f"<b>{safe_text.plot_text(p.title)}</b><br>{safe_text.plot_text(' '.join(p.text.split()[:14]))}…"
        for p in ps
    ]
    blank = "(no topic)" if any(p.topic for p in ps) else "passages"
    return {
        "hover": np.array(hover, dtype=object),
        "topic": np.array([p.topic or blank for p in ps]),
        "row": {p.id: i for i, p in enumerate(ps)},
    }


def distance_table(coords: np.ndarray, centre: np.ndarray, hits: list, rows: list[int], moved: bool) -> None:
    """The ringed top-K with where each falls when every passage is ranked by its distance on the map
    to `centre` (the question, or the query the user moved): closeness on the map is not the ranking.

    `coords` (N, dims) the map; `centre` (dims,); `rows[i]` is hits[i]'s row in `coords`."""
    dist = np.linalg.norm(coords - centre, axis=1)  # (N,) to the rings' query
    order = np.argsort(np.argsort(dist)) + 1  # (N,) 1 = closest on the map
    table = pd.DataFrame(
        [
            {
                "rank (by s(z))": h.rank,
                "title": h.passage.title,
                "score s(z)": round(h.score, 4),
                "rank by map distance": int(order[r]),
            }
            for h, r in zip(hits, rows)
        ]
    )
    st.caption(
        ("The moved query's" if moved else "The") + " top-K again, with where each one falls if you ranked "
        "all passages by distance on the map to " + ("the open star:" if moved else "the question:")
    )
    views.table(table, hide_index=True, width="stretch")
