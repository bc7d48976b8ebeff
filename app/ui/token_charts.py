"""The Token vs Sequence page's figures (the answer as coloured boxes, one step's bars, values over
the steps) and where each answer token came from (`source_strip`, on the Ask and Token vs Sequence
pages). Conventions of every chart: `app.ui.charts`."""

from __future__ import annotations

import math

import numpy as np
import plotly.graph_objects as go

from app.ui.charts import AXIS_Z
from app.ui.palette import KNOWN_HATCH, PRIOR_GREY, SEQUENCE_RED, SOURCE_COLORS, TOKEN_BLUE, passage_color
from app.ui.safe_text import plot_text, token_label
from rag_core.loupe.token_sources import KNOWN, PASSAGE, SEVERAL, UNSEEN, WEIGHTS, kind
from rag_core.loupe.token_sources import LABELS as SOURCE_LABELS
from rag_core.loupe.vocabulary import p_text


def token_bar(tokens: list[str], hover: list[str], **bar) -> go.Bar:
    """A strip of the answer's tokens, one equal box a token with its text inside and its numbers
    on hover (already escaped); `bar` sets the boxes' colours (marker) and text colour."""
    return go.Bar(
        x=list(range(len(tokens))),
        y=[1] * len(tokens),
        text=[plot_text(token_label(t)) for t in tokens],
        textposition="inside",
        insidetextanchor="middle",
        hovertext=hover,
        hoverinfo="text",
        width=0.96,
        showlegend=False,
        **bar,
    )


def _strip_layout(fig: go.Figure, height: int) -> go.Figure:
    """The layout both token strips share: one row of boxes, no axes, the legend below."""
    fig.update_layout(
        height=height,
        margin=dict(l=5, r=5, t=5, b=5),
        bargap=0.02,
        showlegend=True,
        legend=dict(orientation="h", y=-0.05, yanchor="top", x=0),
        xaxis=dict(visible=False),
        yaxis=dict(visible=False),
        uniformtext=dict(minsize=10, mode="show"),
    )
    return fig


def token_strip(
    tokens: list[str], resp: np.ndarray, sources: list[int | None], labels: list[str], step: int
) -> go.Figure:
    """The answer as boxes coloured by the top-responsibility passage (resp: (K, T) r_i(z)); faded
    where `sources` is None (r_i(z) stays near the prior); the box of `step` outlined."""
    T = len(tokens)
    top = resp.argmax(axis=0)  # (T,)
    colors = [passage_color(int(z)) for z in top]
    hover = [
        f"step {i}: {plot_text(token_label(t))}<br>top r_i(z): {plot_text(labels[top[i]])} "
        f"({resp[top[i], i]:.2f})"
        + ("" if sources[i] is not None else "<br>responsibility ≈ prior: little evidence")
        for i, t in enumerate(tokens)
    ]
    fig = go.Figure(
        token_bar(
            tokens,
            hover,
            marker=dict(
                color=colors,
                opacity=[1.0 if z is not None else 0.35 for z in sources],
                line=dict(
                    color=["black" if i == step else "white" for i in range(T)],
                    width=[4 if i == step else 1 for i in range(T)],
                ),
            ),
        )
    )
    for z, label in enumerate(labels):  # the colour key: one square per passage, under the strip
        fig.add_trace(
            go.Scatter(
                x=[None],
                y=[None],
                mode="markers",
                name=plot_text(label),
                hoverinfo="skip",
                marker=dict(color=passage_color(z), symbol="square", size=12),
            )
        )
    return _strip_layout(fig, height=150)


def step_bars(
    ticks: list[str], titles: list[str], p_doc, prior, alts: list[str], mixture: float
) -> go.Figure:
    """p(y_i|x,z,y_<i) per passage at one step (p_doc: (K,), NaN = never scored, drawn as 0), with
    the RAG-Token mixture as a dashed line; `alts` are each passage's top tokens, for the hover."""
    K = len(ticks)
    hover = [
        f"{plot_text(titles[z])}<br>p(y_i|x,z,y_&lt;i) = {p_text(p_doc[z])}<br>prior {p_text(prior[z])}"
        f"<br>top tokens: {plot_text(alts[z])}"
        for z in range(K)
    ]
    fig = go.Figure(
        go.Bar(
            x=ticks,
            y=np.nan_to_num(p_doc),
            marker_color=[passage_color(z) for z in range(K)],
            hovertext=hover,
            hoverinfo="text",
        )
    )
    fig.add_hline(y=float(mixture), line_dash="dash", annotation_text=f"mixture {p_text(mixture)}")
    fig.update_layout(
        height=320,
        showlegend=False,
        margin=dict(l=10, r=10, t=30, b=10),
        yaxis=dict(range=[0, 1.05]),
        xaxis=AXIS_Z,
    )
    return fig


def credit_bars(ticks: list[str], titles: list[str], prior, resp, posterior) -> go.Figure:
    """Per passage at one step: the prior, the responsibility r_i(z) and the prefix posterior, grouped."""
    K = len(ticks)
    fig = go.Figure()
    for name, vals, color in (
        ("prior p(z|x)", prior, PRIOR_GREY),
        ("responsibility r_i(z)", resp, TOKEN_BLUE),
        ("prefix posterior p(z|x,y_≤i)", posterior, SEQUENCE_RED),
    ):
        fig.add_trace(
            go.Bar(
                name=name,
                x=ticks,
                y=vals,
                marker_color=color,
                hovertext=[f"{plot_text(titles[z])}<br>{name}: {p_text(vals[z])}" for z in range(K)],
                hoverinfo="text",
            )
        )
    fig.update_layout(
        barmode="group",
        height=320,
        yaxis=dict(range=[0, 1.05]),
        xaxis=AXIS_Z,
        margin=dict(l=10, r=10, t=30, b=10),
        legend=dict(orientation="h", y=1.0, yanchor="bottom", x=0),
    )
    return fig


def over_steps(
    values: np.ndarray,
    labels: list[str],
    titles: list[str],
    tokens: list[str],
    step: int,
    title: str,
    ytitle: str,
    log: bool = False,
) -> go.Figure:
    """One line per passage over the answer's steps (values: (K, T)), a dotted line at `step`."""
    T = len(tokens)
    ticks = dict(
        tickmode="array",
        tickvals=list(range(T)),
        ticktext=[plot_text(f"{j} {token_label(t)}", 14) for j, t in enumerate(tokens)],
    )
    fig = go.Figure()
    for z in range(len(labels)):
        fig.add_trace(
            go.Scatter(
                x=list(range(T)),
                y=values[z],
                mode="lines+markers",
                name=plot_text(labels[z]),
                line=dict(color=passage_color(z)),
                hoverinfo="text",
                hovertext=[
                    f"{plot_text(titles[z])}<br>step {j} {plot_text(token_label(t))}<br>{ytitle} = {v:.4g}"
                    for j, (t, v) in enumerate(zip(tokens, values[z]))
                ],
            )
        )
    fig.add_vline(x=step, line_dash="dot", line_color="black")
    fig.update_layout(
        title=title,
        height=360,
        xaxis=ticks,
        margin=dict(l=10, r=10, t=50, b=10),
        yaxis=dict(title=ytitle, type="log" if log else "linear"),
    )
    return fig


# ---------------- where each token came from ----------------

DARK_SOURCES = (WEIGHTS, KNOWN, UNSEEN)  # dark, white text; KNOWN also hatched: not told by colour alone


def _times(gain: float) -> str:
    """A gain in nats as '× 12.3' (the factor the passages multiplied the token's probability by)."""
    if math.isnan(gain):
        return "× ?"
    return f"× {math.exp(min(gain, 700.0)):.3g}"


def source_strip(tokens: list[str], found: list, labels: list[str]) -> go.Figure:
    """The answer's tokens coloured by where each came from (`token_sources.kind`): the colour of
    the passage that carried it, grey for several passages, dark grey and hatched for a token the
    model already knew that a passage holds, near-black for one no passage holds (or any token the
    model already knew, when the passages were not checked), pale for forced and end tokens
    (`palette.SOURCE_COLORS`); the hover holds the numbers."""
    kinds = [kind(s) for s in found]
    colors = [passage_color(s.top) if k == PASSAGE else SOURCE_COLORS[k] for s, k in zip(found, kinds)]
    hover = [
        f"step {s.step}: {plot_text(token_label(t))} · {SOURCE_LABELS[kind(s)]}"
        f"<br>p with the passages {p_text(math.exp(s.logp_rag))}"
        f" · closed-book {p_text(math.exp(s.logp_closed))}"
        f" ({_times(s.gain)})<br>top passage {plot_text(labels[s.top])}: {s.top_share:.2f} of the token"
        for t, s in zip(tokens, found)
    ]
    fig = go.Figure(
        token_bar(
            tokens,
            hover,
            marker=dict(
                color=colors,
                line=dict(color="white", width=1),
                pattern=dict(
                    shape=["/" if k == KNOWN else "" for k in kinds],
                    fillmode="overlay",
                    fgcolor=KNOWN_HATCH,
                    size=12,
                    solidity=0.25,
                ),
            ),
            textfont=dict(color=["white" if k in DARK_SOURCES else "black" for k in kinds]),
        )
    )
    used = sorted({s.top for s in found if s.label == PASSAGE})
    keys = [(plot_text(labels[z]), passage_color(z)) for z in used]
    keys += [
        (SOURCE_LABELS[lab], SOURCE_COLORS[lab]) for lab in (SEVERAL, KNOWN, UNSEEN, WEIGHTS) if lab in kinds
    ]
    for name, color in keys:  # the colour key: one square per source present
        fig.add_trace(
            go.Scatter(
                x=[None],
                y=[None],
                mode="markers",
                name=name,
                hoverinfo="skip",
                marker=dict(color=color, symbol="square", size=12),
            )
        )
    return _strip_layout(fig, height=140)
