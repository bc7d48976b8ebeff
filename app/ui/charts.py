"""What every page's plotly figures share. The figures themselves are built by job: the Token vs
Sequence page and where each token came from in `app.ui.token_charts`, the citations in
`app.ui.citation_charts`, the By hand page in `app.by_hand.by_hand_charts`, the Map in
`app.map.map_chart`, two runs compared in `app.eval.comparison_charts`, training in
`app.train.train_charts`. Each builder is a plain function that returns a `go.Figure`; the page
draws it with `st.plotly_chart`. No chart module calls Streamlit, and every colour comes from
`app.ui.palette`.

Text that comes from users, corpora or models (titles, tokens, answers) goes through
`safe_text.plot_text`, which HTML-escapes it: plotly reads a few HTML tags in labels and hovers.
Such text goes into `hovertext` or `text`, never into a `hovertemplate`, so a "%{...}" in a title
is not read as a template (the Map's cloud shows its escaped `text` through the fixed template
"%{text}", which substitutes once).
"""

from __future__ import annotations

NO_BAR = {"displayModeBar": False}  # the plotly_chart config of the small charts
AXIS_Z = dict(tickangle=0, tickfont=dict(size=11))  # the x axis of the per-passage bar charts


def add_arrow(fig, start, end, colour: str, size: float, width: float) -> None:
    """A 2-D arrow in data coordinates from `start` to `end` (x, y), head at `end`, no text."""
    fig.add_annotation(
        x=end[0],
        y=end[1],
        ax=start[0],
        ay=start[1],
        xref="x",
        yref="y",
        axref="x",
        ayref="y",
        showarrow=True,
        arrowhead=3,
        arrowsize=size,
        arrowwidth=width,
        arrowcolor=colour,
        text="",
    )
