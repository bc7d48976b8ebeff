"""The reliability diagram of an eval run: for each reading, its answers binned by their own p,
the share right in each bin against the bin's mean p (`analysis.calibration`). A reading on the
diagonal means what it says; above it, its p undersells its answers; below, it oversells them."""

from __future__ import annotations

import plotly.graph_objects as go

from app.ui import palette
from rag_core.loupe.evaluation import Reliability
from rag_core.loupe.vocabulary import RAG_SEQUENCE, RAG_TOKEN, READING_LABELS, STUFFED

COLOURS = {RAG_TOKEN: palette.TOKEN_BLUE, RAG_SEQUENCE: palette.SEQUENCE_RED, STUFFED: palette.STUFFED_GREEN}


def reliability_figure(by_mode: dict[str, Reliability]) -> go.Figure:
    """One line per reading, a marker per non-empty bin sized by its answers, hover with the bin's
    range, its answers, mean p and share right; the diagonal is perfect calibration."""
    fig = go.Figure()
    fig.add_trace(
        go.Scatter(
            x=[0, 1], y=[0, 1], mode="lines", line=dict(color=palette.PRIOR_GREY, dash="dot"),
            name="perfectly calibrated", hoverinfo="skip",
        )
    )  # fmt: skip
    for mode, rel in by_mode.items():
        bins = rel.bins
        fig.add_trace(
            go.Scatter(
                x=[b.confidence for b in bins],
                y=[b.accuracy for b in bins],
                mode="lines+markers",
                marker=dict(size=[6 + 2 * b.n**0.5 for b in bins], color=COLOURS.get(mode)),
                line=dict(color=COLOURS.get(mode)),
                name=f"{READING_LABELS.get(mode, mode)} (ECE {rel.ece:.3f})",
                customdata=[[b.lo, b.hi, b.n] for b in bins],
                hovertemplate=(
                    "p in [%{customdata[0]:.1f}, %{customdata[1]:.1f}): %{customdata[2]} answers<br>"
                    "mean p %{x:.3f} · right %{y:.1%}<extra></extra>"
                ),
            )
        )
    fig.update_layout(
        xaxis=dict(title="the answer's p (mean of its bin)", range=[0, 1.02]),
        yaxis=dict(title="share of the bin's answers right", range=[0, 1.05], tickformat=".0%"),
        height=360,
        margin=dict(l=10, r=10, t=10, b=10),
        legend=dict(orientation="h", y=-0.25),
    )
    return fig
