"""Every page on the two year indexes (the wiki index and a user index are covered in
test_app_pages_a/b): no exception, no error box, the page's own elements, and the passages the
page works on come from the chosen year. The stack is the default retriever with a tiny random
generator (`tiny_generator` in conftest): what is checked is the pages and the passages the real
retriever finds, not what the trained model answers."""

import sys
from pathlib import Path

import pytest
from streamlit.testing.v1 import AppTest

STUFFED_CARD = "Stuffed (the 5 passages in one prompt)"  # the third card, on Ask

ROOT = Path(__file__).resolve().parent.parent
PAGES = [
    "ask.py",
    "map.py",
    "token_vs_sequence.py",
    "citations.py",
    "index_swap.py",
    "by_hand.py",
    "corpus.py",
    "eval.py",
    "exercises.py",
]
QUESTION = "Who is the President of France?"


@pytest.mark.slow
@pytest.mark.parametrize("year", ["2016", "2018"])
def test_every_page_on_a_year_index(year, tiny_generator, monkeypatch):
    monkeypatch.setattr(sys, "argv", [str(ROOT / "app/main.py"), "--generator", str(tiny_generator)])
    at = AppTest.from_file(str(ROOT / "app/main.py"), default_timeout=600)
    at.session_state["index_name"] = year
    at.session_state["question"] = QUESTION
    at.session_state["map_method"] = "PCA"  # the UMAP layout of the year indexes is tested in test_projection
    at.run()
    assert at.session_state["stack"] == "cli", [e.value for e in at.error]  # the tiny generator's stack
    for page in PAGES:
        at.switch_page(str(ROOT / "pages" / page))
        at.run()
        assert not at.exception, (page, [e.value for e in at.exception])
        assert not at.error, (page, [e.value for e in at.error])
        assert at.session_state["index_name"] == year, page  # no page resets the shared setting
        if page == "ask.py":
            assert {m.label for m in at.metric} == {"RAG-Token", "RAG-Sequence", STUFFED_CARD}
            texts = " ".join(at.dataframe[0].value["text"])
            assert "President of France" in set(at.dataframe[0].value["title"])
            # the 2016 snapshot knows nothing of the 2017 election; the 2018 one names the winner
            assert ("Emmanuel Macron" in texts) == (year == "2018")
        if page in ("map.py", "token_vs_sequence.py", "citations.py"):
            assert at.get("plotly_chart"), page
