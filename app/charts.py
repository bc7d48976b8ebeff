"""The pages' plotly figures. Each builder is a plain function that returns a `go.Figure`; the page
draws it with `st.plotly_chart`. Nothing here calls Streamlit.

Text that comes from users, corpora or models (titles, tokens, answers) goes through
`views.plot_text`, which HTML-escapes it: plotly reads a few HTML tags in labels and hovers.
Hovers use `hovertext`, never `hovertemplate`, so a "%{...}" in a title is not read as a template.
"""

from __future__ import annotations

import math

import numpy as np
import plotly.graph_objects as go
from plotly.subplots import make_subplots

from app.views import passage_color, plot_text, token_label
from rag_core.analysis.token_sources import END, FORCED, KNOWN, PASSAGE, SEVERAL, UNSEEN, WEIGHTS, kind
from rag_core.analysis.token_sources import LABELS as SOURCE_LABELS
from rag_core.marginals import p_text

NO_BAR = {"displayModeBar": False}  # the plotly_chart config of the small charts


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


# ---------------- Token vs Sequence ----------------


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
        go.Bar(
            x=list(range(T)),
            y=[1] * T,
            marker=dict(
                color=colors,
                opacity=[1.0 if z is not None else 0.35 for z in sources],
                line=dict(
                    color=["black" if i == step else "white" for i in range(T)],
                    width=[4 if i == step else 1 for i in range(T)],
                ),
            ),
            text=[plot_text(token_label(t)) for t in tokens],
            textposition="inside",
            insidetextanchor="middle",
            hovertext=hover,
            hoverinfo="text",
            width=0.96,
            showlegend=False,
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
    fig.update_layout(
        height=150,
        margin=dict(l=5, r=5, t=5, b=5),
        bargap=0.02,
        showlegend=True,
        legend=dict(orientation="h", y=-0.05, yanchor="top", x=0),
        xaxis=dict(visible=False),
        yaxis=dict(visible=False),
        uniformtext=dict(minsize=10, mode="show"),
    )
    return fig


AXIS_Z = dict(tickangle=0, tickfont=dict(size=11))  # the x axis of the per-passage bar charts


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
        ("prior p(z|x)", prior, "#bbbbbb"),
        ("responsibility r_i(z)", resp, "#636EFA"),
        ("prefix posterior p(z|x,y_≤i)", posterior, "#EF553B"),
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


# ---------------- Citations ----------------


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
        for series, vals, color in (("posterior before", b, "#c6cbf7"), ("posterior after", a, "#636EFA")):
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
    fig.update_xaxes(tickangle=0, tickfont=dict(size=11))
    fig.update_layout(
        barmode="group",
        height=380,
        margin=dict(l=10, r=10, t=70, b=10),
        yaxis=dict(range=[0, 1.05]),
        legend=dict(orientation="h", y=1.08, yanchor="bottom", x=0),
    )
    return fig


# ---------------- By hand ----------------


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
            for n, col in (("p_seq", "#EF553B"), ("p_tok", "#636EFA"))
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


# ---------------- Map ----------------

# Tableau-10 less its red (red is the question) and grey (kept for passages without a topic), plus four more.
PALETTE = [
    "#4E79A7",
    "#F28E2B",
    "#76B7B2",
    "#59A14F",
    "#EDC948",
    "#B07AA1",
    "#FF9DA7",
    "#9C755F",
    "#17BECF",
    "#000075",
    "#808000",
    "#911EB4",
]
NO_TOPIC = ("Uncategorized", "(no topic)", "passages")


# The map's marks in screen pixels: rank numbers at font size 14, rings of size 16, the star of 18.
RING_R, STAR_R, DIGIT_W, LABEL_H = 8.0, 9.0, 9.0, 16.0
PLOT_PX = (600.0, 600.0)  # about the plot area's size at 1280 px (the page stretches it; close enough)
SPOTS = [
    (v, h)
    for v in ("top", "middle", "bottom")
    for h in ("left", "center", "right")
    if (v, h) != ("middle", "center")
]


def _boxes_overlap(a, b) -> bool:
    """Boxes as (x0, y0, x1, y1) share some area."""
    return a[0] < b[2] and b[0] < a[2] and a[1] < b[3] and b[1] < a[3]


def shown_ranges(coords: np.ndarray, ends: np.ndarray, qpos: np.ndarray, zoom: bool):
    """The x and y ranges the 2-D map shows: with `zoom`, the query point(s) `qpos` ((2,), or (M, 2):
    the question and the query moved by hand) and the ringed top-K (`ends`, (K, 2)) with a margin;
    else the whole cloud (`coords`) as plotly's autorange frames it (5% more)."""
    if zoom:
        box = np.vstack([ends[:, :2], np.atleast_2d(qpos)[:, :2]])  # (K + M, 2)
        lo, hi = box.min(0), box.max(0)
        pad = np.maximum(0.15 * (hi - lo), 0.01 * (coords.max(0) - coords.min(0)))
    else:
        lo, hi = coords.min(0), coords.max(0)
        pad = 0.05 * (hi - lo)
    return (float(lo[0] - pad[0]), float(hi[0] + pad[0])), (float(lo[1] - pad[1]), float(hi[1] + pad[1]))


def label_spots(points: np.ndarray, centre: np.ndarray, texts: list[str], x_range, y_range) -> list[str]:
    """Plotly text positions for the rank numbers of the rings at `points` (K, 2), so that none sits
    under the question's star at `centre` or on another number or ring. Greedy, in rank order, in
    screen pixels (the axis ranges shown mapped onto `PLOT_PX`): of the eight spots around a ring,
    the one that hits the fewest marks, and among those the farthest from the star.

    >>> label_spots(np.array([[1.0, 1.0], [-1.0, -2.0]]), np.zeros(2), ["1", "2"], (-3, 3), (-3, 3))
    ['top right', 'bottom left']
    >>> label_spots(np.array([[1.0, 1.0], [1.0, 1.0]]), np.zeros(2), ["1", "2"], (-3, 3), (-3, 3))
    ['top right', 'top center']
    """
    sx = PLOT_PX[0] / max(float(x_range[1] - x_range[0]), 1e-9)  # px per unit
    sy = PLOT_PX[1] / max(float(y_range[1] - y_range[0]), 1e-9)
    px = np.column_stack([points[:, 0] * sx, -points[:, 1] * sy])  # (K, 2) screen: y grows downwards
    star = np.array([centre[0] * sx, -centre[1] * sy])  # (2,)
    taken = [(star[0] - STAR_R, star[1] - STAR_R, star[0] + STAR_R, star[1] + STAR_R)]
    taken += [(x - RING_R, y - RING_R, x + RING_R, y + RING_R) for x, y in px]
    spots = []
    for (x, y), text in zip(px, texts):
        w = DIGIT_W * len(text)
        own = (x - RING_R, y - RING_R, x + RING_R, y + RING_R)  # a number may touch its own ring
        best = None
        for v, h in SPOTS:
            cx = x + {"left": -(RING_R + w / 2), "center": 0.0, "right": RING_R + w / 2}[h]
            cy = y + {"top": -(RING_R + LABEL_H / 2), "middle": 0.0, "bottom": RING_R + LABEL_H / 2}[v]
            box = (cx - w / 2, cy - LABEL_H / 2, cx + w / 2, cy + LABEL_H / 2)
            hits = sum(_boxes_overlap(box, t) for t in taken if t != own)
            key = (hits, -float(np.hypot(cx - star[0], cy - star[1])))
            if best is None or key < best[0]:
                best = (key, f"{v} {h}", box)
        spots.append(best[1])
        taken.append(best[2])
    return spots


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
    C = coords
    cloud = np.arange(len(C)) if drawn is None else np.asarray(drawn)  # (n_drawn,) rows of the cloud
    Scatter = go.Scattergl if dims == 2 else go.Scatter3d

    def xyz(points: np.ndarray) -> dict:
        axes = {"x": points[:, 0], "y": points[:, 1]}
        if dims == 3:
            axes["z"] = points[:, 2]
        return axes

    # The few marks over the cloud (lines, rings, their rank numbers, the question) are SVG in 2-D:
    # drawn above the WebGL cloud, and each rank number is a text element the browser lays out
    # itself (WebGL text is painted on a canvas), so nothing can hide it.
    Mark = go.Scatter if dims == 2 else go.Scatter3d
    fig = go.Figure()
    topics = sorted(set(topic), key=lambda t: (t in NO_TOPIC, t))  # every topic keeps its colour when thinned
    for i, t in enumerate(topics):
        sel = cloud[topic[cloud] == t]
        if not len(sel):
            continue
        colour = "#9A948F" if t in NO_TOPIC else PALETTE[i % len(PALETTE)]
        fig.add_trace(
            Scatter(
                **xyz(C[sel]),
                mode="markers",
                name=t,
                text=hover[sel],
                hovertemplate="%{text}<extra></extra>",
                legendgroup="topics",
                marker={"size": 4 if dims == 2 else 2, "opacity": 0.55, "color": colour},
            )
        )
    centre = qpos if moved is None else np.asarray(moved, dtype=float)  # where the ringed top-K's query is
    stars = (
        centre if qpos is None or moved is None else np.vstack([qpos[None, :2], centre[None, :2]])
    )  # (2, 2): the two stars the zoom frames
    if qpos is not None and rows:
        ends = C[rows]  # (K, dims)
        seg = [v for end in ends for v in (centre.tolist(), end.tolist(), [None] * dims)]  # query -> z, gap
        fig.add_trace(
            Mark(
                **{a: [p[i] for p in seg] for i, a in enumerate("xyz"[:dims])},
                mode="lines",
                name="query → top-K",
                hoverinfo="skip",
                line={"color": "rgba(20,20,20,0.55)", "width": 1.5},
            )
        )
        rank_hover = [
            f"<b>rank {h.rank}</b> · s(z) = {h.score:.3f}<br>{hover[r]}" for h, r in zip(hits, rows)
        ]
        fig.add_trace(
            Mark(
                **xyz(ends),
                mode="markers+text",
                name=f"top-{len(rows)} (rings)",
                text=[str(h.rank) for h in hits],
                textposition=label_spots(
                    ends, centre, [str(h.rank) for h in hits], *shown_ranges(C, ends, stars, zoom)
                )
                if dims == 2
                else "top center",
                textfont={"size": 14, "color": "#111"},
                hovertext=rank_hover,
                hoverinfo="text",
                marker={
                    "symbol": "circle-open",
                    "size": 16 if dims == 2 else 9,
                    "color": "#111",
                    "line": {"width": 2.5, "color": "#111"},
                },
            )
        )
    if qpos is not None:  # drawn last: the question stays visible above everything
        fig.add_trace(
            Mark(
                **xyz(qpos[None, :]),
                mode="markers",
                name="question",
                hovertext=[f"<b>question</b><br>{plot_text(question)}"],
                hoverinfo="text",
                marker={
                    "symbol": "star" if dims == 2 else "diamond",
                    "size": 18 if dims == 2 else 8,
                    "color": "#e4002b",
                    "line": {"width": 1.5, "color": "white"},
                },
            )
        )
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
            x_range, y_range = shown_ranges(C, C[rows], stars, zoom)
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
            marker={"symbol": "star-open", "size": 20, "color": "#e4002b", "line": {"width": 2.5}},
        )
    )


def add_pull_arrow(fig: go.Figure, start, end, dims: int) -> None:
    """The training pull on the query: an arrow from its map position `start` to where one step
    along ∂ log p(y|x)/∂q puts it (`end`); in 3-D a shaft and a cone."""
    start, end = np.asarray(start, float), np.asarray(end, float)
    if dims == 2:
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
            arrowsize=1.5,
            arrowwidth=3,
            arrowcolor="#1a9850",
            text="",
        )
        fig.add_trace(
            go.Scattergl(
                x=[end[0]],
                y=[end[1]],
                mode="markers",
                name="one training step",
                hovertext=["where one step along the gradient moves the query"],
                hoverinfo="text",
                marker={"size": 8, "color": "#1a9850"},
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
            line={"color": "#1a9850", "width": 6},
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
            colorscale=[[0, "#1a9850"], [1, "#1a9850"]],
            hoverinfo="skip",
            name="pull",
        )
    )


# ---------------- where each token came from ----------------

SOURCE_COLORS = {
    SEVERAL: "#a0a0a0",
    WEIGHTS: "#2f2f2f",
    KNOWN: "#5b5b5b",
    UNSEEN: "#2f2f2f",
    FORCED: "#e8e8e8",
    END: "#e8e8e8",
}
DARK_SOURCES = (WEIGHTS, KNOWN, UNSEEN)  # dark, white text; KNOWN also hatched: not told by colour alone


def _times(gain: float) -> str:
    """A gain in nats as '× 12.3' (the factor the passages multiplied the token's probability by)."""
    if math.isnan(gain):
        return "× ?"
    return f"× {math.exp(min(gain, 700.0)):.3g}"


def source_strip(tokens: list[str], found: list, labels: list[str]) -> go.Figure:
    """The answer's tokens coloured by where each came from (`token_sources.kind`): the colour of
    the passage that carried it, grey for several passages, dark grey and hatched for a token the
    model already knew that a passage holds, near-black for one no passage holds, pale for forced
    and end tokens; the hover holds the numbers."""
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
        go.Bar(
            x=list(range(len(tokens))),
            y=[1] * len(tokens),
            marker=dict(
                color=colors,
                line=dict(color="white", width=1),
                pattern=dict(
                    shape=["/" if k == KNOWN else "" for k in kinds],
                    fillmode="overlay",
                    fgcolor="#8c8c8c",
                    size=12,
                    solidity=0.25,
                ),
            ),
            text=[plot_text(token_label(t)) for t in tokens],
            textposition="inside",
            insidetextanchor="middle",
            hovertext=hover,
            hoverinfo="text",
            width=0.96,
            showlegend=False,
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
    fig.update_layout(
        height=140,
        margin=dict(l=5, r=5, t=5, b=5),
        bargap=0.02,
        showlegend=True,
        legend=dict(orientation="h", y=-0.05, yanchor="top", x=0),
        xaxis=dict(visible=False),
        yaxis=dict(visible=False),
        uniformtext=dict(minsize=10, mode="show"),
    )
    return fig


# ---------------- two runs compared ----------------

SANKEY_TEXT = "#1a1a1a"
SANKEY_RIGHT, SANKEY_WRONG = "rgba(44,160,44,0.22)", "rgba(214,39,40,0.18)"


def transition_sankey(transitions, name_a: str = "A", name_b: str = "B") -> go.Figure:
    """Outcomes in run A (left) flowing to outcomes in run B (right); `transitions` has columns
    outcome_a, outcome_b, questions."""
    left = sorted(set(transitions.outcome_a))
    right = sorted(set(transitions.outcome_b))
    nodes = [f"{name_a}: {o}" for o in left] + [f"{name_b}: {o}" for o in right]
    color = {"right": "#1e7b1e"}
    # Labels lie across the links: near-black text (at least 7:1 on white, and on the pale links)
    # at the page's text size, with plotly's white halo; links pale enough to stay behind it.
    fig = go.Figure(
        go.Sankey(
            node=dict(
                label=[plot_text(n) for n in nodes],
                pad=14,
                thickness=16,
                color=[color.get(o, "#b81d1d") for o in left + right],
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
            marker_color=["#2ca02c" if r["delta_logp"] > 0 else "#bbbbbb" for r in rows],
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
