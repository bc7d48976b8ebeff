"""Two runs compared: where the questions' outcomes in one run went in the other (a Sankey).
Conventions of every chart: `app.ui.charts`."""

from __future__ import annotations

import plotly.graph_objects as go

from app.ui.palette import RIGHT_GREEN, SANKEY_RIGHT, SANKEY_TEXT, SANKEY_WRONG, WRONG_RED
from app.ui.safe_text import plot_text


def transition_sankey(transitions, name_a: str = "A", name_b: str = "B") -> go.Figure:
    """Outcomes in run A (left) flowing to outcomes in run B (right); `transitions` has columns
    outcome_a, outcome_b, questions."""
    left = sorted(set(transitions.outcome_a))
    right = sorted(set(transitions.outcome_b))
    nodes = [f"{name_a}: {o}" for o in left] + [f"{name_b}: {o}" for o in right]
    color = {"right": RIGHT_GREEN}
    # Labels lie across the links: near-black text (at least 7:1 on white, and on the pale links)
    # at the page's text size, with plotly's white halo; links pale enough to stay behind it.
    fig = go.Figure(
        go.Sankey(
            node=dict(
                label=[plot_text(n) for n in nodes],
                pad=14,
                thickness=16,
                color=[color.get(o, WRONG_RED) for o in left + right],
                line=dict(width=0),
            ),
            link=dict(
                source=[left.index(a) for a in transitions.outcome_a],
                target=[len(left) + right.index(b) for b in transitions.outcome_b],
                value=[int(v) for v in transitions.questions],
                color=[SANKEY_RIGHT if b == "right" else SANKEY_WRONG for b in transitions.outcome_b],
            ),
            textfont=dict(color=SANKEY_TEXT, size=14),
        )
    )
    fig.update_layout(height=360, margin=dict(l=10, r=10, t=10, b=10))
    return fig
