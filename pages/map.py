"""Map: every passage of the index laid out by UMAP (cosine) or PCA, the question placed among them
and its true top-K ringed; a click moves the query, and the rings follow the moved query's top-K."""

import streamlit as st

from app import state
from app.map import map_chart, map_views, moved_query
from app.train import train_views
from app.ui import views
from app.ui.safe_text import md_text
from rag_core.loupe.maps import map_layout, projection
from rag_core.loupe.vocabulary import clean_question, first_line

st.title("Map")

asked = state.answer_settings()
name = asked.index
views.about_query(state.question(), name, f"K={asked.k}")
c1, c2, c3 = st.columns([1, 1, 2])
method = c1.radio(
    "Layout",
    ["UMAP", "PCA"],
    horizontal=True,
    key="map_method",
    help="UMAP (cosine distance) keeps neighbourhoods; it takes a minute or two the first time for an "
    "index, then loads from disk. PCA is instant: the two or three directions of largest variance.",
)
dims = 3 if c2.radio("View", ["2-D", "3-D"], horizontal=True, key="map_dims") == "3-D" else 2
zoom = c3.toggle(
    "Zoom to the question",
    key="map_zoom",
    disabled=dims == 3,
    persist_state="session",  # kept across page visits, as the user left it
    help="Frame the question, the query you moved (if any) and the ringed top-K; double-click "
    "the map to see all of it again.",
)

loading = st.empty()
try:
    with loading.container():  # the engine's own loading notes show here while they run, then go
        idx = state.index(name)
        encoder = state.models().encoder
except state.USER_ERRORS as e:
    loading.empty()
    st.error(first_line(e, f"the index {name} could not be opened"))
    st.stop()
loading.empty()
stamp = f"{idx.manifest.get('ids_checksum')}:{idx.manifest.get('built_at')}"  # a rebuilt index is a new key


@st.cache_resource(show_spinner=False, max_entries=8)
def _maps(index_name: str, method: str, dims: int, stamp: str) -> dict:
    """Holds the fitted map; filled below, outside the cached call, so the progress UI is never replayed."""
    return {}


holder = _maps(name, method.lower(), dims, stamp)
if "map" not in holder:
    # fit_map says "Fitting UMAP … about N s" through `progress` only when it really has to fit
    # (the built-in indexes reuse the shipped base layout and take under a second).
    first = f"Preparing the {method} map of {name} ({len(idx):,} passages, {dims}-D)…"
    with st.status(first, expanded=method == "UMAP") as status:
        bar = st.progress(0.0)

        def progress(msg: str, frac: float) -> None:
            status.update(label=msg, expanded=method == "UMAP")  # keep the bar in view while UMAP fits
            bar.progress(min(1.0, max(0.0, frac)))

        try:
            pmap = projection.fit_map(idx, method.lower(), dims, progress)
        except (projection.ProjectionError, ValueError, MemoryError) as e:
            status.update(label="The map could not be made", state="error")
            why = first_line(e)
            st.error(f"The {method} map of {name} could not be made: {why}")
            st.stop()
        bar.empty()
        st.caption(projection.how_made(pmap))  # the status opens onto what was done, never onto nothing
        how = (
            "the shipped base layout"
            if pmap.shipped
            else "loaded from the cache"
            if pmap.loaded_from
            else f"fitted in {pmap.fit_seconds:.1f} s"
        )  # say what happened, never "fitted in 0.0 s"
        status.update(
            label=f"{pmap.method.upper()} map of {len(idx):,} passages: {how}",
            state="complete",
            expanded=False,
        )
    holder["map"] = pmap
pmap = holder["map"]
pts = map_views.passage_points(name, stamp, idx.passages)
if pmap.note:
    st.info(pmap.note)

# The question: placed on the map, and its true top-K by inner product (the retriever's own ranking).
question, hits, qpos = state.question(), [], None
try:
    question, _ = clean_question(question)
    pipe = state.pipeline(name)
    qvec = pipe.query_vector(question)  # (1, D)
    qpos = pmap.place(
        qvec[0], scale=asked.scale or encoder.default_scale
    )  # (dims,) weights = the prior's softmax
    hits = pipe.retrieve(question, asked.k, query_vector=qvec)  # under the models' lock, as every search
except state.USER_ERRORS as e:
    st.error(first_line(e, "the question could not be placed"))

# A click moves the query: the rings then mark the moved query's top-K, by the index's search of its vector.
moved = moved_query.clicked_point("passage-map", (question, name, pmap.method, dims)) if dims == 2 else None
own, moved_q = hits, None
if moved is not None and qpos is not None:
    try:
        moved_q, moved_hits = moved_query.top_k(pipe, pmap, moved, question, asked.k)
        hits = moved_hits
    except state.USER_ERRORS as e:
        st.error(first_line(e, "the moved query could not be searched"))

placed = (
    "placed at the score-weighted mean of its 10 nearest passages"
    if pmap.method == "umap"
    else "projected exactly"
)
ringed = (
    f"the true top-{len(hits)} by inner product s(z) = d(z)·q(x)"
    if moved_q is None
    else f"the top-{len(hits)} of the query you moved (the open star), by the index's search of its vector"
)
st.caption(
    f"Each dot is one of the {len(idx):,} passages of **{md_text(name)}**, coloured by topic; the red "
    f"{'★' if dims == 2 else '◆'} is the question, {placed}. Closeness on the map is *not* the retriever's "
    f"ranking: the map squeezes {idx.dim} dimensions into {dims}. The numbered rings mark {ringed} — "
    "the passages the generator reads."
)

C = pmap.coords
hits = [h for h in hits if h.passage.id in pts["row"]]
rows = [pts["row"][h.passage.id] for h in hits]
own_rows = [pts["row"][h.passage.id] for h in own if h.passage.id in pts["row"]]
drawn = map_layout.draw_rows(C, centre=qpos, keep=own_rows + rows)  # every row up to the cap; top-Ks always
if len(drawn) < len(C):
    near = (
        f"the {int(map_layout.DRAW_CAP * map_layout.NEAR_SHARE):,} nearest the question, "
        if qpos is not None
        else ""
    )
    st.caption(
        f"Drawn: {len(drawn):,} of the {len(C):,} passages, so the map opens in a second or two: {near}the "
        "top-K, and a fixed random share of the others."
    )
# plotly keeps the user's pan and zoom while `view` is the same; with the zoom on, a move frames anew
view = f"{name}-{method}-{dims}-{zoom}-{question}" + (f"-{moved}" if zoom else "")
fig = map_chart.passage_map(
    C,
    pts["hover"],
    pts["topic"],
    hits,
    rows,
    qpos,
    question,
    dims,
    zoom,
    uirevision=view,
    drawn=drawn,
    moved=None if moved_q is None else moved,
)
pull = st.toggle(
    "Show the training pull",
    key="map_pull",
    disabled=qpos is None,
    help="The arrow from the question to where one step of the paper's training signal moves the query, "
    "for the expected answer typed on the Train page, or else the one the Diagnose box offers "
    "(one teacher-forced pass the first time).",
)
if pull and qpos is not None:
    start, end = train_views.pull_on_map(pmap, question, name, asked)
    if start is None:
        st.info(
            "No expected answer is known for this question: type one on the Train page (the pull is toward "
            "the passages that explain it)."
        )
    else:
        map_chart.add_pull_arrow(fig, start, end, dims)
st.plotly_chart(
    fig,
    width="stretch",
    key="passage-map",
    **({"on_select": "rerun", "selection_mode": "points"} if dims == 2 else {}),
)
if dims == 2 and qpos is not None:
    st.caption("Click any dot to move the query there (the open star): its top K (rings) and prior follow.")

if hits and qpos is not None:
    map_views.distance_table(C, qpos if moved_q is None else moved, hits, rows, moved=moved_q is not None)
if moved_q is not None:
    moved_query.panel(
        pipe, moved, moved_q, moved_hits, question, own, float(asked.scale or encoder.default_scale)
    )
