"""The Index swap page's detours and picker, on the default retriever and the year indexes with
the tiny random generator (`on_tiny_generator`): the failures come from a made-up result, the one
question's answers from whatever model the app runs, so what is checked here (which failure a button
opens, where the page lands and how it comes back, what the picker shows) holds for any model. The
page's answers and tables on the trained default: tests/test_index_swap.py."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from rag_core.config import STUFFED
from rag_core.index_swap import judge, results, store

ROOT = Path(__file__).resolve().parent.parent

pytestmark = pytest.mark.usefixtures("on_tiny_generator")


@pytest.fixture(scope="module")
def swap_app(on_tiny_generator):
    from streamlit.testing.v1 import AppTest

    at = AppTest.from_file(str(ROOT / "app/main.py"), default_timeout=600)
    at.session_state["k"] = 3
    at.session_state["max_new_tokens"] = 8
    return at


def _fake_result(
    question: str, wrong_2018: str | None = None, decodings: tuple[str, ...] = results.DECODINGS
) -> results.ExperimentResult:
    """A cached-looking result with one failure on the 2016 index, for the page's table and button
    (and, with `wrong_2018`, that RAG-Token answer on the 2018 index: a second failure), in the
    readings `decodings` (the stuffed one fails where RAG-Token does)."""
    rows = []
    for idx in results.YEARS:
        for dec in decodings:
            answer = "Donald Trump" if idx == "2018" or dec == "rag-sequence" else "Hillary Clinton"
            if idx == "2018" and dec == "rag-token" and wrong_2018:
                answer = wrong_2018
            c16, c18, both = judge.judge(answer, "Barack Obama", "Donald Trump")
            rows.append(
                {
                    "ambiguous": both,
                    "position": "President of the United States",
                    "country": "United States",
                    "holder_2016": "Barack Obama",
                    "holder_2018": "Donald Trump",
                    "question": question,
                    "index": idx,
                    "decoding": dec,
                    "answer": answer,
                    "correct_2016": c16,
                    "correct_2018": c18,
                    "p_answer": 0.5,
                    "closed_book": "Barack Obama",
                    "passages_name_2016": 2,
                    "passages_name_2018": 2,
                    "top_passage": "President of the United States",
                    "passages": [],
                }
            )
    closed = [
        {
            "position": "President of the United States",
            "answer": "Barack Obama",
            "correct_2016": True,
            "correct_2018": False,
        }
    ]
    return results.ExperimentResult(rows, closed, {}, "fake", 60.0, complete=True)


SWAP_QUESTION = "Who is the President of the United States?"


def open_swap_page_on_a_failure(at, monkeypatch):
    """The Index swap page over a one-position result whose 2016 RAG-Token answer is wrong."""
    monkeypatch.setattr(store, "cached_result", lambda *a, **k: _fake_result(SWAP_QUESTION))
    at.switch_page(str(ROOT / "pages/index_swap.py"))
    at.run()
    assert not at.exception, [e.value for e in at.exception]


def test_index_swap_explain_failure_switches_page(swap_app, monkeypatch):
    at, question = swap_app, SWAP_QUESTION
    open_swap_page_on_a_failure(at, monkeypatch)
    shown = [d.value for d in at.dataframe if "paper 2016" in d.value.columns]
    assert shown and re.match(r"\d+%", str(shown[0]["leaders 2016"].iloc[0]))
    at.toggle(key="swap_fail_only").set_value(True).run()
    failures = [d.value for d in at.dataframe if "correct_2016" in d.value.columns]
    assert failures and list(failures[0]["answer"]) == ["Hillary Clinton"]
    next(b for b in at.button if b.label == "Explain this failure").click().run()
    assert not at.exception, [e.value for e in at.exception]
    assert at.session_state["question"] == question and at.session_state["index_name"] == "2016"
    assert at.title[0].value == "Token vs Sequence"
    # the landing page says what changed and offers the way back; the step starts at the first token
    assert any("Opened from Index swap" in i.value and "2016" in i.value for i in at.info), [
        i.value for i in at.info
    ]
    assert at.session_state["tvs_step"] == 0 and at.session_state["tvs_answer"] == ("rag-token", 0)
    next(b for b in at.button if b.label == "Back to Index swap, as it was").click().run()
    assert not at.exception, [e.value for e in at.exception]
    # AppTest reruns the page it was itself switched to (Index swap) whatever the script switched to,
    # so this title cannot tell whether Back really switches: the browser test checks that
    # (tests/test_browser.py: test_index_swap_wrong_year_in_red_and_both_detours_go_back)
    assert at.title[0].value == "Index swap"
    assert "question" not in at.session_state  # it had none before the detour
    assert at.session_state["index_name"] == "2018" and "detour" not in at.session_state


def test_a_detour_from_the_stuffed_reading_comes_back_to_it(swap_app, monkeypatch):
    """Reading "stuffed", a failure explained on Citations, then "Back": the page comes back in the
    stuffed reading with that failure still picked (a page switch drops a widget's state unless it
    is kept)."""
    at = swap_app
    fake = _fake_result(SWAP_QUESTION, decodings=(STUFFED,))
    monkeypatch.setattr(store, "cached_result", lambda *a, **k: fake)
    at.switch_page(str(ROOT / "pages/index_swap.py"))
    at.run()
    at.radio(key="swap_reading").set_value("stuffed").run()
    at.toggle(key="swap_fail_only").set_value(True).run()
    picked = at.selectbox(key="swap_fail").value
    assert picked == "President of the United States · 2016 index → Hillary Clinton"
    next(b for b in at.button if b.label == "Explain this failure").click().run()
    assert not at.exception, [e.value for e in at.exception]
    assert at.title[0].value == "Citations"
    next(b for b in at.button if b.label == "Back to Index swap, as it was").click().run()
    assert not at.exception, [e.value for e in at.exception]
    assert at.radio(key="swap_reading").value == "stuffed"
    assert at.selectbox(key="swap_fail").value == picked
    at.radio(key="swap_reading").set_value("both").run()  # back to the paper's readings for the next tests
    at.toggle(key="swap_fail_only").set_value(False).run()


@pytest.mark.parametrize(
    "button, page", [("Explain this failure", "Token vs Sequence"), ("Diagnose this", "Ask")]
)
def test_a_failure_picked_just_before_the_click_is_the_one_opened(monkeypatch, button, page):
    """A user picks another failure and clicks at once, before the pick's own rerun: the button
    opens the failure picked then (here the 2018 one), not the one the page was drawn with."""
    from streamlit.testing.v1 import AppTest

    at = AppTest.from_file(str(ROOT / "app/main.py"), default_timeout=600)  # a session of its own
    at.session_state["index_name"] = "2016"  # so that opening the 2018 failure changes the index
    at.session_state["k"], at.session_state["max_new_tokens"] = 3, 8
    monkeypatch.setattr(
        store, "cached_result", lambda *a, **k: _fake_result(SWAP_QUESTION, wrong_2018="Mike Pence")
    )
    at.switch_page(str(ROOT / "pages/index_swap.py"))
    at.run()
    at.toggle(key="swap_fail_only").set_value(True).run()
    picker = at.selectbox(key="swap_fail")
    later = next(o for o in picker.options if " · 2018 index → Mike Pence" in o)
    assert picker.value != later  # the page was drawn with the 2016 failure picked
    picker.set_value(later)
    next(b for b in at.button if b.label == button).click().run()  # one rerun carries the pick and the click
    assert not at.exception, [e.value for e in at.exception]
    assert at.title[0].value == page and at.session_state["index_name"] == "2018"
    notice = [i.value for i in at.info if i.value.startswith("Opened from Index swap")]
    assert notice and "the sidebar index set to “2018” (was “2016”)" in notice[0], notice
    if page == "Ask":
        assert at.text_input(key="diag_expected").value == "Donald Trump"  # the 2018 index's holder


def test_index_swap_diagnose_this_prefills_the_holder(swap_app, monkeypatch):
    at = swap_app
    open_swap_page_on_a_failure(at, monkeypatch)
    at.toggle(key="swap_fail_only").set_value(True).run()
    next(b for b in at.button if b.label == "Diagnose this").click().run()
    assert not at.exception, [e.value for e in at.exception]
    assert at.title[0].value == "Ask" and at.session_state["index_name"] == "2016"
    assert at.text_input(key="diag_expected").value == "Barack Obama"  # the 2016 index's holder
    assert any("Opened from Index swap" in i.value for i in at.info)


def test_index_swap_picker_follows_the_typed_question(swap_app):
    at = swap_app
    at.switch_page(str(ROOT / "pages/index_swap.py"))
    at.run()
    at.selectbox(key="swap_pick").set_value("Who is the President of France?").run()
    assert at.text_input(key="swap_text").value == "Who is the President of France?"
    at.text_input(key="swap_text").input("Who wrote Moby-Dick?")
    next(b for b in at.button if b.label == "Answer on both indexes").click().run()
    assert not at.exception, [e.value for e in at.exception]
    assert at.selectbox(key="swap_pick").value == "(a question of your own)"  # not the old position
