"""The stuffed reading's figures: what each passage is worth to its answer beside the mixture's
posterior of the same answer (`worth_chart`), the worth token by token (`token_worth_heatmap`), and
one step of its answer with every passage left out in turn (`step_chart`). Conventions of every
chart: `app.ui.charts`."""

from __future__ import annotations

import numpy as np
import plotly.graph_objects as go
from plotly.subplots import make_subplots

from app.ui.charts import AXIS_Z
from app.ui.palette import PRIOR_GREY, passage_color
from app.ui.safe_text import plot_text, token_label
from rag_core.loupe.stuffed_reading import StuffedWorth
from rag_core.loupe.vocabulary import p_text


def worth_chart(w: StuffedWorth, ticks: list[str], titles: list[str], prior) -> go.Figure:
    """Left: each passage's worth to the stuffed answer (nats lost when it is taken out). Right: the
    mixture's posterior p(z|x,y) of the same answer over the same passages, the prior beside it."""
    K = len(ticks)
    colours = [passage_color(z) for z in range(K)]
    fig = make_subplots(
        rows=1,
        cols=2,
        subplot_titles=("stuffed: what taking z out costs (nats)", "mixture: posterior p(z|x,y)"),
        horizontal_spacing=0.12,
    )
    hover = [
        f"{plot_text(titles[z])}<br>p(y|x, all) = {p_text(w.p)}<br>p(y|x, all but z) = "
        f"{p_text(w.p_without[z])}<br>worth = {w.worth[z]:+.3f} nats"
        for z in range(K)
    ]
    worth = np.nan_to_num(w.worth, posinf=50.0, neginf=-50.0)  # an answer impossible without z: a tall bar
    fig.add_trace(
        go.Bar(x=ticks, y=worth, marker_color=colours, hovertext=hover, hoverinfo="text", name="worth"),
        row=1,
        col=1,
    )
    if w.mixture is not None:
        post_hover = [
            f"{plot_text(titles[z])}<br>posterior p(z|x,y) = {p_text(w.mixture[z])}<br>prior p(z|x) = "
            f"{p_text(prior[z])}"
            for z in range(K)
        ]
        fig.add_trace(
            go.Bar(x=ticks, y=prior, marker_color=PRIOR_GREY, name="prior p(z|x)", hoverinfo="skip"),
            row=1,
            col=2,
        )
        fig.add_trace(
            go.Bar(
                x=ticks,
                y=w.mixture,
                marker_color=colours,
                name="posterior",
                hovertext=post_hover,
                hoverinfo="text",
            ),
            row=1,
            col=2,
        )
        fig.update_yaxes(range=[0, 1.05], row=1, col=2)
    fig.update_layout(height=330, showlegend=False, barmode="group", margin=dict(l=10, r=10, t=40, b=10))
    fig.update_xaxes(**AXIS_Z)
    return fig


def token_worth_heatmap(w: StuffedWorth, labels: list[str], titles: list[str]) -> go.Figure:
    """(K, T) nats each token loses when passage z is taken out: red where z carried the token,
    blue where the token is more likely without z, white where z does not matter."""
    toks = [token_label(t) for t in w.answer.tokens]
    K, T = w.token_worth.shape
    hover = [
        [
            f"token {i}: {plot_text(toks[i])}<br>{plot_text(titles[z])}<br>p(y_i|x, all, y_&lt;i) = "
            f"{p_text(w.p_token[i])}<br>p(y_i|x, all but z, y_&lt;i) = {p_text(w.p_token_without[z, i])}"
            f"<br>worth = {w.token_worth[z, i]:+.3f} nats"
            for i in range(T)
        ]
        for z in range(K)
    ]
    values = np.clip(np.nan_to_num(w.token_worth, posinf=10.0, neginf=-10.0), -10.0, 10.0)
    edge = max(float(np.abs(values).max()), 0.5)
    fig = go.Figure(
        go.Heatmap(
            z=values,
            x=[f"{i} {plot_text(t)}" for i, t in enumerate(toks)],
            y=[plot_text(label) for label in labels],
            zmin=-edge,
            zmax=edge,
            colorscale="RdBu_r",
            hovertext=hover,
            hoverinfo="text",
            text=[[f"{v:+.2f}" for v in row] for row in values],
            texttemplate="%{text}",
            colorbar=dict(title="nats"),
        )
    )
    fig.update_layout(
        height=90 + 40 * K,
        margin=dict(l=10, r=10, t=30, b=10),
        xaxis=dict(side="top", tickangle=0),
        yaxis=dict(autorange="reversed"),
    )
    return fig


def step_chart(w: StuffedWorth, i: int, ticks: list[str], titles: list[str]) -> go.Figure:
    """Step i of the stuffed answer: p(y_i | x, all but z, y_<i) for each passage z taken out, and
    the reading of all K (dashed line)."""
    K = len(ticks)
    hover = [
        f"without {plot_text(titles[z])}<br>p(y_i|x, all but z, y_&lt;i) = {p_text(w.p_token_without[z, i])}"
        for z in range(K)
    ]
    fig = go.Figure(
        go.Bar(
            x=ticks,
            y=np.nan_to_num(w.p_token_without[:, i]),
            marker_color=[passage_color(z) for z in range(K)],
            hovertext=hover,
            hoverinfo="text",
        )
    )
    fig.add_hline(y=float(w.p_token[i]), line_dash="dash", annotation_text=f"all K: {p_text(w.p_token[i])}")
    fig.update_layout(
        height=300,
        showlegend=False,
        margin=dict(l=10, r=10, t=30, b=10),
        yaxis=dict(range=[0, 1.05]),
        xaxis=AXIS_Z,
    )
    return fig


def order_chart(frame, answer: str) -> go.Figure:
    """p of the retrieved order's answer under each order (one bar per order, the retrieved order
    first); the hover names each order's own answer."""
    column = frame.columns[3]  # p(“answer”)
    hover = [
        f"{plot_text(o)}<br>p(“{plot_text(answer)}”) = {p_text(p)}<br>its answer: {plot_text(a)} "
        f"(p = {p_text(q)})"
        for o, p, a, q in zip(frame["order"], frame[column], frame["its answer"], frame["p (its answer)"])
    ]
    same = [not c for c in frame["changes the answer"]]
    fig = go.Figure(
        go.Bar(
            y=[plot_text(o, 40) for o in frame["order"]],
            x=frame[column],
            orientation="h",
            marker_color=[PRIOR_GREY if s else passage_color(1) for s in same],
            hovertext=hover,
            hoverinfo="text",
        )
    )
    fig.update_layout(
        height=60 + 26 * len(frame),
        margin=dict(l=10, r=10, t=40, b=10),
        title=dict(text=f"p(“{plot_text(answer, 40)}”) in each order (coloured: it answers otherwise)"),
        xaxis=dict(range=[0, 1.05], title="probability"),
        yaxis=dict(autorange="reversed"),
        showlegend=False,
    )
    return fig
