"""The By hand page's figures: p_seq and p_tok of each answer, and the retriever's toy plane of
passage and query vectors. Conventions of every chart: `app.ui.charts`."""

from __future__ import annotations

import plotly.graph_objects as go

from app.ui.palette import SEQUENCE_RED, TOKEN_BLUE, passage_color
from app.ui.safe_text import plot_text
from rag_core.loupe.vocabulary import p_text


def answer_bars(rows: list[dict]) -> go.Figure:
    """p_seq and p_tok of each answer side by side (rows: `by_hand.answer_rows`)."""
    fig = go.Figure(
        [
            go.Bar(
                name=n,
                x=[plot_text(r["answer"]) for r in rows],
                y=[r[n] for r in rows],
                marker_color=col,
                text=[p_text(r[n]) for r in rows],
                textposition="outside",
                hoverinfo="text",
                hovertext=[f"{plot_text(r['answer'])}: {n} = {p_text(r[n])}" for r in rows],
            )
            for n, col in (("p_seq", SEQUENCE_RED), ("p_tok", TOKEN_BLUE))
        ]
    )
    fig.update_layout(
        barmode="group",
        height=300,
        margin=dict(l=10, r=10, t=30, b=10),
        yaxis=dict(range=[0, 1]),
        legend=dict(orientation="h", y=1.0, yanchor="bottom", x=0),
    )
    return fig


def retriever_plane(hits: list, probs: list[float], vectors: list, query: list) -> go.Figure:
    """Passage vectors (one [x, y] per hit) and the query vector as arrows from the origin; a
    passage's marker grows with its p(z|x) in `probs`; the hover gives its score s(z)."""
    fig = go.Figure()
    for j, (h, p) in enumerate(zip(hits, probs)):
        pid, s = h.passage.id, h.score
        x, y = vectors[j]
        fig.add_trace(
            go.Scatter(
                x=[0, x],
                y=[0, y],
                mode="lines+markers+text",
                name=plot_text(pid),
                line=dict(color=passage_color(j), width=2),
                marker=dict(size=[0, 10 + 40 * p]),
                text=["", plot_text(f"{pid}  p={p_text(p)}")],
                textposition="top right",
                hoverinfo="text",
                hovertext=["", f"{plot_text(pid)} ({x:g}, {y:g})<br>s = {s:.3f}<br>p(z|x) = {p_text(p)}"],
            )
        )
    q = query
    fig.add_trace(
        go.Scatter(
            x=[0, q[0]],
            y=[0, q[1]],
            mode="lines+markers+text",
            name="query q",
            line=dict(color="black", width=3, dash="dash"),
            marker=dict(size=[0, 14], symbol="star"),
            text=["", "q"],
            textposition="bottom right",
            hoverinfo="text",
            hovertext=["", f"query q ({q[0]:g}, {q[1]:g})"],
        )
    )
    fig.update_layout(
        height=380,
        margin=dict(l=10, r=10, t=10, b=10),
        legend=dict(orientation="h", y=1.0, yanchor="bottom"),
        yaxis=dict(scaleanchor="x", scaleratio=1, zeroline=True),
        xaxis=dict(zeroline=True),
    )
    return fig
