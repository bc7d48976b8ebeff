"""The Train page's plotly figures: the pull on each passage, the walk over steps, the walk on the
map, and the fine-tuning loss. Plain functions returning `go.Figure`; nothing here calls Streamlit.
Titles are escaped with `safe_text.plot_text` and hovers use `hovertext` (see app/ui/charts.py); the
colours are `app.ui.palette`'s."""

from __future__ import annotations

import numpy as np
import plotly.graph_objects as go

from app.ui import charts
from app.ui.palette import (
    GAP_RED,
    OTHER_PASSAGE_GREY,
    PASSED_BY,
    PULL,
    PUSH,
    QUESTION_RED,
    RAISED_BLUE,
    STAYED_GREY,
    TRAIN_PRIOR_GREY,
    passage_color,
)
from app.ui.safe_text import plot_text
from rag_core.loupe.vocabulary import p_text

# The walk's log p(y|x) axis is never shorter than MIN_LOG_P_SPAN nats, so that a change of a
# thousandth draws as a flat line rather than a steep one; a change smaller than NO_CHANGE nats
# (p(y|x) moved by less than 1 %) is said in words to be no measurable change.
MIN_LOG_P_SPAN, NO_CHANGE = 0.5, 0.01


def log_p_range(values: list[float]) -> list[float]:
    """The y range of the log p(y|x) line: the values with a 10 % margin each side, widened about
    their middle to MIN_LOG_P_SPAN when they span less.

    >>> [round(v, 4) for v in log_p_range([-1.0, -1.001])]  # a thousandth: a flat line
    [-1.2505, -0.7505]
    >>> [round(v, 4) for v in log_p_range([-1.5, -0.5])]    # a real climb keeps its own scale
    [-1.6, -0.4]
    >>> [round(v, 4) for v in log_p_range([-0.02, -0.01])]  # a log-probability is never above 0
    [-0.5, 0.0]
    """
    lo, hi = float(min(values)), float(max(values))
    lo, hi = lo - 0.1 * (hi - lo), hi + 0.1 * (hi - lo)
    if hi - lo < MIN_LOG_P_SPAN:
        mid = (lo + hi) / 2
        lo, hi = mid - MIN_LOG_P_SPAN / 2, mid + MIN_LOG_P_SPAN / 2
    if hi > 0:  # the window slides down, keeping its span: the axis stops at p = 1
        lo, hi = lo - hi, 0.0
    return [lo, hi]


def no_measurable_change(values: list[float]) -> bool:
    """log p(y|x) over the steps never moved NO_CHANGE nats away from where it started.

    >>> no_measurable_change([-1.0, -1.001, -0.999]), no_measurable_change([-1.0, -0.98])
    (True, False)
    """
    return max(abs(v - values[0]) for v in values) < NO_CHANGE


def pull_bars(labels: list[str], titles: list[str], bracket, prior, posterior, marginal: str) -> go.Figure:
    """The bracket per passage as a diverging bar: right (green) pulls the query toward the passage."""
    b = np.asarray(bracket, dtype=float)  # (K,)
    what = "p(z|x,y) − p(z|x)" if marginal == "sequence" else "Σ_i (r_i(z) − p(z|x))"
    hover = [
        f"<b>{plot_text(t)}</b><br>prior p(z|x) = {p_text(float(p))}"
        f"<br>posterior p(z|x,y) = {p_text(float(q))}"
        f"<br>bracket {what} = {v:+.3f}"
        for t, p, q, v in zip(titles, prior, posterior, b)
    ]
    fig = go.Figure(
        go.Bar(
            x=b.tolist(),
            y=[plot_text(label, 34) for label in labels],
            orientation="h",
            marker_color=[PULL if v > 0 else PUSH for v in b],
            hovertext=hover,
            hoverinfo="text",
            text=[f"{v:+.3f}" for v in b],
            textposition="outside",
            cliponaxis=False,
        )
    )
    span = max(0.05, float(np.abs(b).max()) * 1.35)
    fig.update_layout(
        height=70 + 38 * len(b),
        margin=dict(l=10, r=30, t=30, b=30),
        xaxis=dict(range=[-span, span], zeroline=True, zerolinewidth=2, title=f"bracket {what}"),
        yaxis=dict(autorange="reversed"),
        title=dict(text="← pushed away · pulled toward →", x=0.5, font=dict(size=13)),
    )
    return fig


def prior_posterior_bars(labels: list[str], prior, posterior) -> go.Figure:
    """One step's prior and posterior side by side per passage: training closes the gap."""
    fig = go.Figure()
    ticks = [plot_text(label, 22) for label in labels]
    fig.add_trace(
        go.Bar(x=ticks, y=np.asarray(prior, float), name="prior p(z|x)", marker_color=TRAIN_PRIOR_GREY)
    )
    fig.add_trace(
        go.Bar(x=ticks, y=np.asarray(posterior, float), name="posterior p(z|x,y)", marker_color=RAISED_BLUE)
    )
    fig.update_layout(
        barmode="group",
        height=300,
        margin=dict(l=10, r=10, t=10, b=10),
        yaxis=dict(range=[0, 1.02]),
        legend=dict(orientation="h", y=1.1),
    )
    return fig


def walk_lines(log_likelihood: list[float], gap: list[float], entered: list[int]) -> go.Figure:
    """Over the steps: log p(y|x) climbing, and the prior–posterior gap (total variation) closing.
    `entered`: how many passages entered the top K at each step (marked on the line)."""
    steps = list(range(len(log_likelihood)))
    fig = go.Figure()
    fig.add_trace(
        go.Scatter(
            x=steps,
            y=log_likelihood,
            name="log p(y|x)",
            mode="lines+markers",
            yaxis="y",
            hovertext=[
                f"step {s}: log p(y|x) = {v:.3f}" + (f"<br>{n} passage(s) entered" if n else "")
                for s, v, n in zip(steps, log_likelihood, entered)
            ],
            hoverinfo="text",
            marker=dict(size=[12 if n else 6 for n in entered], color=RAISED_BLUE),
        )
    )
    fig.add_trace(
        go.Scatter(
            x=steps,
            y=gap,
            name="gap ½Σ|posterior − prior|",
            mode="lines+markers",
            yaxis="y2",
            hovertext=[f"step {s}: gap = {v:.3f}" for s, v in zip(steps, gap)],
            hoverinfo="text",
            line=dict(color=GAP_RED, dash="dot"),
        )
    )
    fig.update_layout(
        height=300,
        margin=dict(l=10, r=10, t=10, b=10),
        xaxis=dict(title="step", dtick=1),
        yaxis=dict(title="log p(y|x)", range=log_p_range(log_likelihood)),
        yaxis2=dict(
            title="gap",
            overlaying="y",
            side="right",
            tickformat=".2f",
            tickmode="linear",
            tick0=0,
            dtick=0.25,
            range=[0, 1],
            showgrid=False,
        ),
        legend=dict(orientation="h", y=1.12),
    )
    return fig


def walk_map(
    cloud: np.ndarray,
    cloud_hover: list[str],
    path: np.ndarray,
    passages: np.ndarray,
    passage_hover: list[str],
    in_first: list[bool],
    in_last: list[bool],
) -> go.Figure:
    """The query's path on the 2-D map (path: (S, 2), one point a step) drawn as arrows, over the
    nearest passages (cloud: (N, 2)); the passages of any step's top K (passages: (P, 2)) marked by
    whether they were in the first top K, the last, or both."""
    fig = go.Figure(
        go.Scattergl(
            x=cloud[:, 0],
            y=cloud[:, 1],
            mode="markers",
            name="other passages",
            hovertext=cloud_hover,
            hoverinfo="text",
            marker=dict(size=4, color=OTHER_PASSAGE_GREY, opacity=0.6),
        )
    )
    kind = [
        "both" if a and b else "left the top K" if a else "entered the top K" if b else "passed by"
        for a, b in zip(in_first, in_last)
    ]
    colour = {"both": STAYED_GREY, "left the top K": PUSH, "entered the top K": PULL, "passed by": PASSED_BY}
    for k in colour:
        sel = [i for i, v in enumerate(kind) if v == k]
        if sel:
            fig.add_trace(
                go.Scatter(
                    x=passages[sel, 0],
                    y=passages[sel, 1],
                    mode="markers",
                    name=k,
                    hovertext=[passage_hover[i] for i in sel],
                    hoverinfo="text",
                    marker=dict(size=13, symbol="circle-open", color=colour[k], line=dict(width=2.5)),
                )
            )
    fig.add_trace(
        go.Scatter(
            x=path[:, 0],
            y=path[:, 1],
            mode="markers",
            name="query, step by step",
            hovertext=[f"query after {s} step(s)" for s in range(len(path))],
            hoverinfo="text",
            marker=dict(
                size=[16] + [8] * (len(path) - 1),
                symbol=["star"] + ["circle"] * (len(path) - 1),
                color=QUESTION_RED,
            ),
        )
    )
    for a, b in zip(path, path[1:]):  # one arrow a step, in the direction of the gradient
        if np.linalg.norm(b - a) > 0:
            charts.add_arrow(fig, a, b, QUESTION_RED, size=1.2, width=2)
    box = np.vstack([path, passages])
    lo, hi = box.min(0), box.max(0)
    pad = np.maximum(0.2 * (hi - lo), 0.05)
    fig.update_xaxes(
        range=[lo[0] - pad[0], hi[0] + pad[0]], showticklabels=False, showgrid=False, zeroline=False
    )
    fig.update_yaxes(
        range=[lo[1] - pad[1], hi[1] + pad[1]], showticklabels=False, showgrid=False, zeroline=False
    )
    fig.update_layout(height=460, margin=dict(l=0, r=0, t=10, b=0), legend=dict(orientation="h", y=-0.02))
    return fig


def loss_curve(losses: list[float]) -> go.Figure:
    """The fine-tuning loss, −log p(y|x) of each step's batch."""
    steps = list(range(1, len(losses) + 1))
    fig = go.Figure(
        go.Scatter(
            x=steps,
            y=losses,
            mode="lines+markers",
            name="loss",
            line=dict(color=passage_color(0)),
            hovertext=[f"step {s}: loss {v:.3f}" for s, v in zip(steps, losses)],
            hoverinfo="text",
        )
    )
    fig.update_layout(
        height=260,
        margin=dict(l=10, r=10, t=10, b=10),
        xaxis=dict(title="step"),
        yaxis=dict(title="−log p(y|x), batch mean"),
    )
    return fig
