"""AppTest checks of the Map and Corpus pages.

Map: PCA (instant) on the `wiki` index; the chart holds every passage, the question's marker and
its K ringed passages; with the drawing cap lowered, a thinned cloud that keeps the top-K.
Corpus: AppTest cannot upload files, so the test calls what the Build button calls
(`rag_core.retrieval.catalog_actions`), in a throw-away cache folder, then asks a question on the new index.
"""

import base64
import json
from pathlib import Path

import numpy as np
import pytest
from streamlit.testing.v1 import AppTest

from rag_core.config import cache_dir
from rag_core.corpus import CorpusError
from rag_core.retrieval import catalog
from rag_core.retrieval import catalog_actions as actions

from conftest import visit

STUFFED_CARD = "Stuffed (the 5 passages in one prompt)"  # the third card, on Ask

ROOT = Path(__file__).resolve().parent.parent


def values(arr) -> list:
    """A plotly array from the chart spec: a list, or a typed array {"dtype", "bdata"} (plotly >= 6)."""
    if isinstance(arr, dict) and "bdata" in arr:
        return np.frombuffer(base64.b64decode(arr["bdata"]), dtype=np.dtype(arr["dtype"])).tolist()
    return list(arr)


def chart(at: AppTest) -> dict:
    charts = at.get("plotly_chart")
    assert len(charts) == 1
    return json.loads(charts[0].proto.spec)


def test_map_page_pca_shows_passages_question_and_rings():
    at = AppTest.from_file(str(ROOT / "app/main.py"), default_timeout=600)
    at.session_state["index_name"] = "wiki"
    at.session_state["map_method"] = "PCA"  # instant; UMAP is the page's default
    at.session_state["k"] = 4
    visit(at, "map.py")
    data = chart(at)["data"]
    by_name = {d.get("name"): d for d in data}
    passages = [d for d in data if d.get("legendgroup") == "topics"]
    assert all(d["type"] == "scattergl" for d in passages)
    assert sum(len(values(d["x"])) for d in passages) == len(catalog.load_named("wiki", _encoder()).passages)
    assert "People" in by_name  # coloured by the corpus topic
    hover = [t for d in passages for t in values(d["text"])]
    assert all("<script" not in t for t in hover)
    # the question's marker, K numbered rings, and K lines from the question to them
    q = by_name["question"]
    assert len(values(q["x"])) == 1 and q["marker"]["symbol"] == "star"
    rings = by_name["top-4 (rings)"]
    assert rings["text"] == ["1", "2", "3", "4"] and rings["marker"]["symbol"] == "circle-open"
    lines = by_name["query → top-K"]
    assert sum(v is None for v in values(lines["x"])) == 4
    # the rings sit on the retriever's true top-K passages, and the lines start at the question
    ring_x = values(rings["x"])
    assert [x for i, x in enumerate(values(lines["x"])) if i % 3 == 1] == pytest.approx(ring_x)
    assert values(lines["x"])[0] == pytest.approx(values(q["x"])[0])
    assert any("not* the retriever's ranking" in c.value for c in at.caption)
    table = at.dataframe[0].value
    assert list(table["rank (by s(z))"]) == [1, 2, 3, 4]

    # 3-D: the same content, as WebGL scatter3d
    at.radio(key="map_dims").set_value("3-D").run()
    assert not at.exception
    data3 = chart(at)["data"]
    assert {d["type"] for d in data3} == {"scatter3d"}
    assert any(d.get("name") == "top-4 (rings)" and len(d["text"]) == 4 for d in data3)


def test_map_page_thins_a_large_cloud_to_its_cap(monkeypatch):
    from rag_core.maps import map_layout

    monkeypatch.setattr(map_layout, "DRAW_CAP", 3000)  # the wiki index (12,324 passages) is then "large"
    at = AppTest.from_file(str(ROOT / "app/main.py"), default_timeout=600)
    at.session_state["index_name"] = "wiki"
    at.session_state["map_method"] = "PCA"
    at.session_state["k"] = 4
    visit(at, "map.py")
    data = chart(at)["data"]
    cloud = [d for d in data if d.get("legendgroup") == "topics"]
    assert all(d["type"] == "scattergl" for d in cloud) and sum(len(values(d["x"])) for d in cloud) == 3000
    rings = next(d for d in data if d.get("name") == "top-4 (rings)")
    assert rings["text"] == ["1", "2", "3", "4"]
    drawn = set(zip((x for d in cloud for x in values(d["x"])), (y for d in cloud for y in values(d["y"]))))
    assert (
        set(zip(values(rings["x"]), values(rings["y"]))) <= drawn
    )  # the top-K stay in the cloud, however thinned
    assert any(
        "Drawn: 3,000 of the 12,324 passages" in c.value and "1,500 nearest the question" in c.value
        for c in at.caption
    )


def _encoder():
    from rag_core.config import DEFAULT_ENCODER
    from rag_core.models.sources import pick_device
    from rag_core.retrieval.encoders import load_encoder

    if not hasattr(_encoder, "cached"):
        _encoder.cached = load_encoder(DEFAULT_ENCODER, None, pick_device("cpu"))
    return _encoder.cached


NOTES = (
    "\n".join(
        json.dumps(d)
        for d in [
            {
                "id": "lh",
                "title": "Zorblax lighthouse",
                "text": "The Zorblax lighthouse was designed by the engineer Mirela Quansah "
                "and first lit in 1911.",
            },
            {
                "title": "Quansah",
                "text": "Mirela Quansah was an engineer who designed lighthouses along the northern coast.",
            },
            {"title": "Harbour", "text": "The harbour of Zorblax handles fishing boats and a weekly ferry."},
            {"title": "Bakery", "text": "The oldest bakery of Zorblax sells rye bread made with sea salt."},
            "not an object",
            {"title": "Empty"},
        ]
    ).encode()
    + b"\n{broken json\n"
)


@pytest.fixture
def user_cache(tmp_path, monkeypatch):
    """User indexes in a temp folder; the converted models are shared with the real cache
    (no reconversion)."""
    models = cache_dir() / "models"
    models.mkdir(parents=True, exist_ok=True)
    monkeypatch.setenv("RAG_LOUPE_CACHE", str(tmp_path))
    (tmp_path / "models").symlink_to(models, target_is_directory=True)
    return tmp_path


@pytest.mark.slow
def test_corpus_build_then_ask_on_the_new_index(user_cache):
    ferry = b"# Ferry\n\nThe Zorblax ferry leaves on Sundays."
    up = actions.parse_uploads(
        [
            ("notes.jsonl", NOTES),
            ("ferry.md", ferry),
            ("bad.csv", b"title,body\nx,y\n"),
            ("blank.txt", b"  \n"),
        ]
    )
    assert len(up.parsed.passages) == 5 and up.parsed.skipped == 3 and up.parsed.documents == 5
    assert len(up.errors) == 2 and "bad.csv" in up.errors[0] and "blank.txt" in up.errors[1]
    steps = []
    idx = actions.build_user_index(
        up.parsed.passages, _encoder(), "pytest-notes", progress=lambda msg, frac: steps.append(frac)
    )
    assert len(idx) == 5 and steps and steps[-1] == 1.0
    assert "pytest-notes" in catalog.available_indexes()
    assert actions.user_indexes() == [
        {
            "name": "pytest-notes",
            "passages": 5,
            "encoder": idx.manifest["encoder"],
            "built": idx.manifest["built_at"].replace("T", " "),
        }
    ]
    # a taken name is a clear error unless "replace" is ticked; bad names too
    with pytest.raises(CorpusError, match="already exists"):
        actions.build_user_index(up.parsed.passages, _encoder(), "pytest-notes")
    for bad in ("", "wiki", "../x", "a b"):
        with pytest.raises(CorpusError):
            actions.check_name(bad)
    actions.build_user_index(up.parsed.passages, _encoder(), "pytest-notes", replace=True)
    assert [p.name for p in (user_cache / "user-indexes").iterdir()] == [
        "pytest-notes"
    ]  # no temp folders left

    # the app answers on it: the sidebar lists it, the Ask page retrieves from it
    at = AppTest.from_file(str(ROOT / "app/main.py"), default_timeout=600)
    at.session_state["index_name"] = "pytest-notes"
    at.session_state["question"] = "Who designed the Zorblax lighthouse?"
    at.session_state["max_new_tokens"] = 8
    at.run()
    assert not at.exception, [e.value for e in at.exception]
    assert "pytest-notes" in at.sidebar.selectbox(key="index_name").options
    assert {m.label for m in at.metric} == {"RAG-Token", "RAG-Sequence", STUFFED_CARD}
    table = at.dataframe[0].value
    assert table["title"].iloc[0] == "Zorblax lighthouse"
    assert set(table["title"]) <= {"Zorblax lighthouse", "Quansah", "Harbour", "Bakery", "ferry"}

    # every other page works on it too (a 5-passage index gets a PCA map, with a note)
    for page in ("map.py", "token_vs_sequence.py", "citations.py", "index_swap.py", "by_hand.py", "eval.py"):
        visit(at, page)
        assert at.session_state["index_name"] == "pytest-notes", page
    # the Corpus page lists it; deleting removes it from disk, from the list, and its cached maps
    visit(at, "corpus.py")
    assert "pytest-notes" in list(at.dataframe[0].value["name"])
    from rag_core.maps import projection

    # the Map page's fit above was cached on disk: fitting again loads it
    assert projection.fit_map(idx, "pca", 2).loaded_from is not None and list(
        (user_cache / "maps").glob("*.npz")
    )
    actions.delete_user_index("pytest-notes")
    assert not list((user_cache / "maps").glob("*.npz"))
    assert "pytest-notes" not in catalog.available_indexes()
    assert list((user_cache / "user-indexes").iterdir()) == []
    with pytest.raises(CorpusError):
        actions.delete_user_index("pytest-notes")
