"""Moving the query by hand on the Map: `PassageMap.lift` against a brute-force loop, a passage's own
map point lifting back to (nearly) its own vector, and the Map page's moved-query panel and rings against
a fresh retrieval with the lifted vector (and its answer against the pipeline run from that vector); the
Train page's start (the question's own query unless the user asks for the moved one). The pages run
on the default retriever with a tiny random generator (`on_tiny_generator` in conftest), and their
answers and walks are recomputed with the app's own models: none of it depends on what the trained
model answers."""

import json
import math
from pathlib import Path

import numpy as np
import pytest
from streamlit.testing.v1 import AppTest
from test_app_pages_b import values

from app.ui import safe_text
from rag_core.config import AnswerSettings
from rag_core.maps.map_layout import PassageMap, fit_pca
from rag_core.pipeline import Pipeline

from conftest import visit

ROOT = Path(__file__).resolve().parent.parent
QUESTION = "Who wrote Moby-Dick?"


def brute_lift(coords, vectors, point, m):
    dists = [math.dist(c, point) for c in coords.tolist()]
    order = sorted(range(len(dists)), key=lambda i: dists[i])[:m]
    weights = [1.0 / max(dists[i], 1e-6) for i in order]
    q = [
        sum(w * float(vectors[i][j]) for w, i in zip(weights, order)) / sum(weights)
        for j in range(vectors.shape[1])
    ]
    norm = math.sqrt(sum(v * v for v in q))
    return [v / norm for v in q]


def test_lift_equals_a_brute_force_loop():
    rng = np.random.default_rng(3)
    vectors = rng.normal(size=(40, 6)).astype(np.float32)
    pmap = fit_pca(vectors, 2)
    for point in (pmap.coords[5] + 0.01, np.array([0.3, -0.2]), pmap.coords.mean(0)):
        assert pmap.lift(point, m=7).tolist() == pytest.approx(
            brute_lift(pmap.coords, vectors, point, 7), abs=1e-6
        )
    raw = pmap.lift(np.array([0.3, -0.2]), m=7, normalise=False)
    assert abs(float(np.linalg.norm(raw)) - 1.0) > 1e-3  # DPR-style: the length is kept


def test_a_passage_point_lifts_to_a_query_that_retrieves_that_passage(default_pipeline):
    idx = default_pipeline.index
    pmap = PassageMap(
        "pca",
        fit_pca(np.asarray(idx.vectors[:3000], np.float32), 2).coords,
        np.asarray(idx.vectors[:3000], np.float32),
    )
    for row in (10, 1234, 2999):
        q = pmap.lift(pmap.coords[row])[None]  # right on the passage: its weight dominates
        assert default_pipeline.retrieve(QUESTION, 1, query_vector=q)[0].passage.id == idx.passages[row].id


@pytest.fixture(scope="module")
def moved_map(on_tiny_generator):
    at = AppTest.from_file(str(ROOT / "app/main.py"), default_timeout=600)
    at.session_state["index_name"] = "wiki"
    at.session_state["question"] = QUESTION
    at.session_state["map_method"] = "PCA"
    at.session_state["_moved"] = ((QUESTION, "wiki", "pca", 2), [0.1, -0.05])
    return visit(at, "map.py")


def test_the_moved_query_panel_equals_a_fresh_retrieval(moved_map):
    from app import state
    from rag_core.maps import projection

    idx = state.index("wiki")
    pmap = projection.fit_map(idx, "pca", 2)
    q = pmap.lift(np.array([0.1, -0.05]))  # (D,)
    x = np.asarray(idx.index.reconstruct_n(0, len(idx)), dtype=np.float64)  # (N, D)
    scores = x @ q.astype(np.float64)  # (N,)
    top = np.argsort(-scores)[:5]
    table = next(d.value for d in moved_map.dataframe if "rank for the question" in d.value.columns)
    assert list(table["title"]) == [idx.passages[i].title for i in top]
    assert table["s(z)"].tolist() == pytest.approx(np.round(scores[top], 4).tolist(), abs=2e-4)
    probs = np.exp(20 * scores[top]) / np.exp(20 * scores[top]).sum()
    assert table["p(z|x)"].tolist() == pytest.approx(probs.tolist(), abs=1e-5)


def chart(at: AppTest, key_part: str) -> dict:
    return next(json.loads(c.proto.spec) for c in at.get("plotly_chart") if key_part in c.proto.id)


def moved_top(idx, pmap) -> np.ndarray:
    """The rows of the top 5 for the query lifted from the fixture's map point, by brute force over
    every stored vector."""
    x = np.asarray(idx.index.reconstruct_n(0, len(idx)), dtype=np.float64)  # (N, D)
    return np.argsort(-(x @ pmap.lift(np.array([0.1, -0.05])).astype(np.float64)))[:5]  # (5,)


@pytest.mark.slow  # over 5 s on 2 cores
def test_the_zoom_frames_the_moved_query_and_stays_on(moved_map):
    """With "Zoom to the question" on, the view holds the question's star, the open star of the query
    moved by hand and every ring (it used to frame the question and its own top K, far from the open
    star); turned on, the zoom is still on after a visit to another page (it used to reset)."""
    from app import state
    from rag_core.maps import projection

    idx = state.index("wiki")
    pmap = projection.fit_map(idx, "pca", 2)
    marks = [[0.1, -0.05], *pmap.coords[moved_top(idx, pmap)].tolist()]  # the open star and its rings
    moved_map.toggle(key="map_zoom").set_value(True).run()
    for _ in range(2):  # zoomed, then again after a visit to the Train page
        layout = chart(moved_map, "passage-map")["layout"]
        (x0, x1), (y0, y1) = layout["xaxis"]["range"], layout["yaxis"]["range"]
        shown = {t.get("name"): t for t in chart(moved_map, "passage-map")["data"]}
        question = [values(shown["question"]["x"])[0], values(shown["question"]["y"])[0]]
        for px, py in [*marks, question]:
            assert x0 < px < x1, (px, layout["xaxis"]["range"])
            assert y0 < py < y1, (py, layout["yaxis"]["range"])
        assert moved_map.toggle(key="map_zoom").value is True
        visit(moved_map, "train.py")
        visit(moved_map, "map.py")


def test_the_rings_follow_the_moved_query(moved_map):
    """After a click the numbered rings sit on the moved query's own top K, a brute-force ranking of
    every stored vector against the lifted vector (not on the question's, where they used to stay),
    and the lines start at the open star."""
    from app import state
    from rag_core.maps import projection

    idx = state.index("wiki")
    pmap = projection.fit_map(idx, "pca", 2)
    x = np.asarray(idx.index.reconstruct_n(0, len(idx)), dtype=np.float64)  # (N, D)
    top = moved_top(idx, pmap)
    own = np.argsort(-(x @ state.pipeline("wiki").query_vector(QUESTION)[0].astype(np.float64)))[:5]  # (5,)
    assert set(top.tolist()) != set(own.tolist())  # the question's rings would not pass
    traces = {t.get("name"): t for t in chart(moved_map, "passage-map")["data"]}
    rings = traces["top-5 (rings)"]
    assert values(rings["x"]) == pytest.approx(pmap.coords[top, 0].astype(np.float64).tolist(), abs=1e-6)
    assert values(rings["y"]) == pytest.approx(pmap.coords[top, 1].astype(np.float64).tolist(), abs=1e-6)
    assert [h.split("<br>")[1] for h in rings["hovertext"]] == [
        f"<b>{safe_text.plot_text(idx.passages[i].title)}</b>" for i in top
    ]
    lines = traces["query → top-K"]
    assert values(lines["x"])[0::3] == pytest.approx([0.1] * 5)  # each segment: star, ring, gap
    assert values(lines["y"])[0::3] == pytest.approx([-0.05] * 5)
    star = traces["moved query"]
    assert (values(star["x"]), values(star["y"])) == (pytest.approx([0.1]), pytest.approx([-0.05]))


@pytest.mark.slow
def test_the_train_page_starts_from_the_question_unless_asked(moved_map):
    """After a click on the Map the Train page still walks from q(x), the question's own query (it
    used to start from the moved one, where little pulls); "Start from the query you moved on the
    Map", turned on, walks from the lifted vector, and stays on across a visit to the Map."""
    from app import state
    from rag_core.maps import projection
    from rag_core.training.query_walk import walk

    moved_map.session_state["_train_for"] = QUESTION
    moved_map.session_state["train_expected"] = "Herman Melville"
    moved_map.session_state["train_steps"] = 2
    visit(moved_map, "train.py")
    pipe = Pipeline(state.models(), "wiki", state.index("wiki"), AnswerSettings(index="wiki"))
    lifted = projection.fit_map(state.index("wiki"), "pca", 2).lift(np.array([0.1, -0.05]))
    moved = walk(pipe, QUESTION, "Herman Melville", "sequence", 5, None, 0.02, 2, start=lifted)
    own = walk(pipe, QUESTION, "Herman Melville", "sequence", 5, None, 0.02, 2)
    assert abs(moved.steps[0].log_likelihood - own.steps[0].log_likelihood) > 1e-3  # really another start
    assert moved_map.toggle(key="train_from_moved").value is False
    own_line = [s.log_likelihood for s in own.steps]
    assert chart(moved_map, "train_lines")["data"][0]["y"] == pytest.approx(own_line, abs=1e-5)
    moved_map.toggle(key="train_from_moved").set_value(True).run()
    for _ in range(2):  # turned on, then again after a visit to the Map
        assert moved_map.toggle(key="train_from_moved").value is True
        assert chart(moved_map, "train_lines")["data"][0]["y"] == pytest.approx(
            [s.log_likelihood for s in moved.steps], abs=1e-5
        )
        visit(moved_map, "map.py")
        moved_map.session_state["train_steps"] = 2  # the slider's own state goes with the page
        visit(moved_map, "train.py")
    moved_map.toggle(key="train_from_moved").set_value(False).run()
    visit(moved_map, "map.py")


@pytest.mark.slow  # over 5 s on 2 cores
def test_answer_from_here_runs_the_generator_on_the_moved_top_k(moved_map):
    from app import state
    from rag_core.maps import projection

    moved_map.button(key="map_answer_moved").click().run()
    shown = [t.value for t in moved_map.text if "from the moved query" in t.value]
    pmap = projection.fit_map(state.index("wiki"), "pca", 2)
    pipe = Pipeline(
        state.models(), "wiki", state.index("wiki"), AnswerSettings(index="wiki")
    )  # the sidebar's defaults
    trace = pipe.run_settings(
        QUESTION, [pipe.settings], query_vector=pmap.lift(np.array([0.1, -0.05]))[None]
    )[0].trace
    assert shown == [
        f"RAG-Token from the moved query: {trace.answer('rag-token').answer}",
        f"RAG-Sequence from the moved query: {trace.answer('rag-sequence').answer}",
    ]
    moved_map.button(key="map_unmove").click().run()
    assert not [d for d in moved_map.dataframe if "rank for the question" in d.value.columns]
