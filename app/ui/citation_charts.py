"""The citations' figures: the prior and posterior over the passages (`slope_chart`, also on the By
hand page), the responsibilities r_i(z) per token, the posterior before and after removing passages,
and which sentence of a passage carried the answer. Conventions of every chart: `app.ui.charts`."""

from __future__ import annotations

import numpy as np
import plotly.graph_objects as go
from plotly.subplots import make_subplots

from app.ui.charts import AXIS_Z
from app.ui.palette import DROP_AFTER, DROP_BEFORE, SENTENCE_HELPS, SENTENCE_IDLE, passage_color
from app.ui.safe_text import plot_text, token_label
from rag_core.loupe.vocabulary import p_text


def slope_chart(
    labels: list[str], titles: list[str], prior, posterior, heading: str, height: int = 360
) -> go.Figure:
    """Prior p(z|x) on the left, posterior p(z|x,y) on the right, one line per passage."""
    fig = go.Figure()
    for z, (label, title, a, b) in enumerate(zip(labels, titles, prior, posterior)):
        # hovertext, not hovertemplate: a title holding "%{...}" must not be read as a template.
        hover = (
            f"{plot_text(title)}<br>prior p(z|x) = {p_text(float(a))}"
            f"<br>posterior p(z|x,y) = {p_text(float(b))}"
        )
        fig.add_trace(
            go.Scatter(
                x=["prior p(z|x)", "posterior p(z|x,y)"],
                y=[float(a), float(b)],
                mode="lines+markers",
                name=plot_text(label, 34),
                line=dict(color=passage_color(z), width=3),
                marker=dict(size=10),
                hovertext=[hover, hover],
                hoverinfo="text",
            )
        )
    fig.update_layout(
        title=dict(text=plot_text(heading, 70)),
        height=height,
        margin=dict(l=10, r=10, t=50, b=10),
        yaxis=dict(range=[-0.03, 1.03], title="probability"),
        legend=dict(font=dict(size=11)),
    )
    return fig


def responsibility_heatmap(
    tokens: list[str], resp: np.ndarray, p_doc: np.ndarray, prior, titles: list[str], labels: list[str]
) -> go.Figure:
    """r_i(z) as a heatmap: passages down (K rows), tokens across (T columns), the value in each cell."""
    K, T = len(labels), len(tokens)
    toks = [token_label(t) for t in tokens]
    hover = [
        [
            f"token {i}: {plot_text(toks[i])}<br>{plot_text(titles[z])}<br>r_i(z) = {p_text(resp[z, i])}"
            f"<br>p(y_i|x,z,y_&lt;i) = {p_text(p_doc[z, i])}<br>prior p(z|x) = {p_text(prior[z])}"
            for i in range(T)
        ]
        for z in range(K)
    ]
    fig = go.Figure(
        go.Heatmap(
            z=resp,
            x=list(range(T)),
            y=list(range(K)),
            zmin=0,
            zmax=1,
            colorscale="Blues",
            hovertext=hover,
            hoverinfo="text",
            colorbar=dict(title="r_i(z)"),
            text=np.round(resp, 2),
            texttemplate="%{text}",
        )
    )
    fig.update_layout(
        height=90 + 38 * K,
        margin=dict(l=10, r=10, t=20, b=10),
        xaxis=dict(
            tickmode="array", tickvals=list(range(T)), ticktext=[plot_text(t, 14) for t in toks], side="top"
        ),
        yaxis=dict(
            tickmode="array",
            tickvals=list(range(K)),
            ticktext=[plot_text(l) for l in labels],
            autorange="reversed",
        ),
    )
    return fig


def drop_chart(
    headings: list[str], before: list, after: list, ticks: list[str], titles: list[str], keep: list[bool]
) -> go.Figure:
    """One panel per answer (`headings`): its posterior over the passages before and after removing
    the passages not in `keep`, grouped bars."""
    K = len(ticks)
    fig = make_subplots(
        rows=1, cols=len(headings), subplot_titles=[plot_text(h, 40) for h in headings], shared_yaxes=True
    )
    for j, (b, a) in enumerate(zip(before, after), start=1):
        for series, vals, color in (("posterior before", b, DROP_BEFORE), ("posterior after", a, DROP_AFTER)):
            fig.add_trace(
                go.Bar(
                    name=series,
                    x=ticks,
                    y=vals,
                    marker_color=color,
                    showlegend=j == 1,
                    legendgroup=series,
                    hoverinfo="text",
                    hovertext=[
                        f"{plot_text(titles[z])}<br>{series}: {p_text(vals[z])}"
                        + ("<br>(removed)" if not keep[z] else "")
                        for z in range(K)
                    ],
                ),
                row=1,
                col=j,
            )
    fig.update_xaxes(**AXIS_Z)
    fig.update_layout(
        barmode="group",
        height=380,
        margin=dict(l=10, r=10, t=70, b=10),
        yaxis=dict(range=[0, 1.05]),
        legend=dict(orientation="h", y=1.08, yanchor="bottom", x=0),
    )
    return fig


# ---------------- which sentence carried the answer ----------------


def sentence_bars(rows: list[dict]) -> go.Figure:
    """Δ log p(y|x,z) per sentence (`SentenceAttribution.rows()`), the passage's order top to bottom;
    green where leaving the sentence out makes the answer less likely."""
    labels = [f"s{r['sentence']}: {plot_text(r['text'], 60)}" for r in rows]
    fig = go.Figure(
        go.Bar(
            x=[r["delta_logp"] for r in rows],
            y=labels,
            orientation="h",
            marker_color=[SENTENCE_HELPS if r["delta_logp"] > 0 else SENTENCE_IDLE for r in rows],
            hovertext=[
                f"sentence {r['sentence']} (rank {r['rank']}): Δ log p = {r['delta_logp']:.3f}<br>"
                f"{plot_text(r['text'], 300)}"
                for r in rows
            ],
            hoverinfo="text",
        )
    )
    fig.update_layout(
        height=80 + 34 * len(rows),
        margin=dict(l=10, r=10, t=10, b=30),
        showlegend=False,
        xaxis=dict(title="Δ log p(y|x,z) without the sentence (nats)", zeroline=True),
        yaxis=dict(autorange="reversed", tickfont=dict(size=11)),
    )
    return fig
