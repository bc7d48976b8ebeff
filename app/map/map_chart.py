"""The Map's figure: every passage coloured by topic, the question, its top K ringed and numbered,
the query moved by hand and the training pull on it. Where the rank numbers go: `app.map.map_labels`.
Conventions of every chart: `app.ui.charts`."""

from __future__ import annotations

import numpy as np
import plotly.graph_objects as go

from app.map.map_labels import label_spots, shown_ranges
from app.ui import charts
from app.ui.palette import NO_TOPIC_GREY, PULL, QUESTION_RED, RING_BLACK, TOP_K_LINE, TOPIC_COLORS
from app.ui.safe_text import plot_text

NO_TOPIC = ("Uncategorized", "(no topic)", "passages")  # topic names of passages without a topic


def _xyz(points: np.ndarray, dims: int) -> dict:
    """A trace's coordinates (x, y and, in 3-D, z) from points (n, dims)."""
    axes = {"x": points[:, 0], "y": points[:, 1]}
    if dims == 3:
        axes["z"] = points[:, 2]
    return axes


def _mark(dims: int):
    # The few marks over the cloud (lines, rings, their rank numbers, the question) are SVG in 2-D:
    # drawn above the WebGL cloud, and each rank number is a text element the browser lays out
    # itself (WebGL text is painted on a canvas), so nothing can hide it.
    return go.Scatter if dims == 2 else go.Scatter3d


def _add_cloud(fig: go.Figure, coords: np.ndarray, hover: np.ndarray, topic: np.ndarray, cloud, dims: int):
    """The passages at rows `cloud`, one WebGL trace per topic; every topic keeps its colour when
    the cloud is thinned."""
    Scatter = go.Scattergl if dims == 2 else go.Scatter3d
    topics = sorted(set(topic), key=lambda t: (t in NO_TOPIC, t))
    for i, t in enumerate(topics):
        sel = cloud[topic[cloud] == t]
        if not len(sel):
            continue
        colour = NO_TOPIC_GREY if t in NO_TOPIC else TOPIC_COLORS[i % len(TOPIC_COLORS)]
        fig.add_trace(
            Scatter(
                **_xyz(coords[sel], dims),
                mode="markers",
                name=t,
                text=hover[sel],
                hovertemplate="%{text}<extra></extra>",
                legendgroup="topics",
                marker={"size": 4 if dims == 2 else 2, "opacity": 0.55, "color": colour},
            )
        )


def _add_top_k(fig: go.Figure, coords, hover, hits: list, rows: list[int], centre, stars, dims, zoom):
    """Lines from the query at `centre` to its top K (map rows `rows`), and numbered rings on them."""
    Mark = _mark(dims)
    ends = coords[rows]  # (K, dims)
    seg = [v for end in ends for v in (centre.tolist(), end.tolist(), [None] * dims)]  # query -> z, gap
    fig.add_trace(
        Mark(
            **{a: [p[i] for p in seg] for i, a in enumerate("xyz"[:dims])},
            mode="lines",
            name="query → top-K",
            hoverinfo="skip",
            line={"color": TOP_K_LINE, "width": 1.5},
        )
    )
    ranks = [str(h.rank) for h in hits]
    rank_hover = [f"<b>rank {h.rank}</b> · s(z) = {h.score:.3f}<br>{hover[r]}" for h, r in zip(hits, rows)]
    fig.add_trace(
        Mark(
            **_xyz(ends, dims),
            mode="markers+text",
            name=f"top-{len(rows)} (rings)",
            text=ranks,
            textposition=label_spots(ends, centre, ranks, *shown_ranges(coords, ends, stars, zoom))
            if dims == 2
            else "top center",
            textfont={"size": 14, "color": RING_BLACK},
            hovertext=rank_hover,
            hoverinfo="text",
            marker={
                "symbol": "circle-open",
                "size": 16 if dims == 2 else 9,
                "color": RING_BLACK,
                "line": {"width": 2.5, "color": RING_BLACK},
            },
        )
    )


def _add_question(fig: go.Figure, qpos, question: str, dims: int) -> None:
    """The question's star, drawn last so it stays visible above everything."""
    fig.add_trace(
        _mark(dims)(
            **_xyz(qpos[None, :], dims),
            mode="markers",
            name="question",
            hovertext=[f"<b>question</b><br>{plot_text(question)}"],
            hoverinfo="text",
            marker={
                "symbol": "star" if dims == 2 else "diamond",
                "size": 18 if dims == 2 else 8,
                "color": QUESTION_RED,
                "line": {"width": 1.5, "color": "white"},
            },
        )
    )


def passage_map(
    coords: np.ndarray,
    hover: np.ndarray,
    topic: np.ndarray,
    hits: list,
    rows: list[int],
    qpos,
    question: str,
    dims: int,
    zoom: bool,
    uirevision: str,
    drawn: np.ndarray | None = None,
    moved: np.ndarray | None = None,
) -> go.Figure:
    """Every passage (coords: (N, dims)) coloured by topic, with its escaped `hover` text; the
    question at `qpos` (or None), lines to its top-K `hits` (at map rows `rows`) and numbered rings
    on them. `moved`: the 2-D point the user moved the query to (an open star); `hits` are then that
    query's top-K, the lines start from it and the zoom frames both stars. `drawn`: the rows of the
    cloud to send (`map_layout.draw_rows`), None for all. `hover` is already escaped; the question is
    escaped here. Both views draw the cloud in WebGL: 2-D as scattergl (the marks over it in SVG)
    and, with `zoom`, frames the question and its top-K; 3-D as scatter3d."""
    fig = go.Figure()
    cloud = np.arange(len(coords)) if drawn is None else np.asarray(drawn)  # (n_drawn,) rows of the cloud
    _add_cloud(fig, coords, hover, topic, cloud, dims)
    centre = qpos if moved is None else np.asarray(moved, dtype=float)  # where the ringed top-K's query is
    stars = (
        centre if qpos is None or moved is None else np.vstack([qpos[None, :2], centre[None, :2]])
    )  # (2, 2): the two stars the zoom frames
    if qpos is not None and rows:
        _add_top_k(fig, coords, hover, hits, rows, centre, stars, dims, zoom)
    if qpos is not None:
        _add_question(fig, qpos, question, dims)
    if moved is not None:
        add_moved_query(fig, centre)
    fig.update_layout(
        height=640,
        margin={"l": 0, "r": 0, "t": 36, "b": 0},
        legend={"itemsizing": "constant"},
        hoverlabel={"align": "left"},
        uirevision=uirevision,
    )
    if dims == 2:
        fig.update_xaxes(showticklabels=False, title=None, zeroline=False, showgrid=False)
        fig.update_yaxes(showticklabels=False, title=None, zeroline=False, showgrid=False)
        if zoom and qpos is not None and rows:
            x_range, y_range = shown_ranges(coords, coords[rows], stars, zoom)
            fig.update_xaxes(range=list(x_range))
            fig.update_yaxes(range=list(y_range))
    else:
        blank = {"showticklabels": False, "title": ""}
        fig.update_layout(scene={"xaxis": blank, "yaxis": blank, "zaxis": blank})
    return fig


def add_moved_query(fig: go.Figure, point) -> None:
    """The query the user moved by clicking the map, as an open red star at `point` (2-D)."""
    fig.add_trace(
        go.Scatter(
            x=[float(point[0])],
            y=[float(point[1])],
            mode="markers",
            name="moved query",
            hovertext=["the query, moved here by hand"],
            hoverinfo="text",
            marker={"symbol": "star-open", "size": 20, "color": QUESTION_RED, "line": {"width": 2.5}},
        )
    )


def add_pull_arrow(fig: go.Figure, start, end, dims: int) -> None:
    """The training pull on the query: an arrow from its map position `start` to where one step
    along ∂ log p(y|x)/∂q puts it (`end`); in 3-D a shaft and a cone."""
    start, end = np.asarray(start, float), np.asarray(end, float)
    if dims == 2:
        charts.add_arrow(fig, start, end, PULL, size=1.5, width=3)
        fig.add_trace(
            go.Scattergl(
                x=[end[0]],
                y=[end[1]],
                mode="markers",
                name="one training step",
                hovertext=["where one step along the gradient moves the query"],
                hoverinfo="text",
                marker={"size": 8, "color": PULL},
            )
        )
        return
    fig.add_trace(
        go.Scatter3d(
            x=[start[0], end[0]],
            y=[start[1], end[1]],
            z=[start[2], end[2]],
            mode="lines",
            name="one training step",
            line={"color": PULL, "width": 6},
            hoverinfo="skip",
        )
    )
    d = end - start
    fig.add_trace(
        go.Cone(
            x=[end[0]],
            y=[end[1]],
            z=[end[2]],
            u=[d[0]],
            v=[d[1]],
            w=[d[2]],
            sizemode="absolute",
            sizeref=max(float(np.linalg.norm(d)), 1e-6) * 0.4,
            anchor="tip",
            showscale=False,
            colorscale=[[0, PULL], [1, PULL]],
            hoverinfo="skip",
            name="pull",
        )
    )
