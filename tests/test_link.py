"""A link is a question: a link's question and settings open the same answer the engine gives them,
the address bar is written back as the link to what is shown, a reload of that link shows equal
numbers, and a bad or unknown value is left out and named. The stack is the default retriever with a
tiny random generator (`on_tiny_generator` in conftest): a link works the same for any model."""

import pytest
from streamlit.testing.v1 import AppTest

from app.ui import link
from app.ui.safe_text import md_text
from rag_core.config import AnswerSettings, StackSpec

from conftest import ROOT

QUESTION = "Who painted the Mona Lisa?"
pytestmark = pytest.mark.usefixtures("on_tiny_generator")


@pytest.fixture(scope="module")
def same_stack(on_tiny_generator):
    """The app's stack loaded afresh, for recomputing what it shows."""
    from rag_core.pipeline import load_pipeline

    return load_pipeline(StackSpec(generator=str(on_tiny_generator)))


def opened(params: dict) -> AppTest:
    """A new session (a browser opening the link) of the app with these query parameters."""
    at = AppTest.from_file(str(ROOT / "app/main.py"), default_timeout=600)
    at.query_params.update(params)
    at.run()
    assert not at.exception, [e.value for e in at.exception]
    return at


def cards(at) -> list[tuple[str, str]]:
    """The two answer cards: (answer, its probability as shown)."""
    return [(m.value, m.delta or "") for m in at.metric if m.label in ("RAG-Token", "RAG-Sequence")][:2]


def test_a_link_reads_only_what_it_may():
    asked = [
        ("k", "3", 3),
        ("k", "21", None),
        ("k", "3.5", None),
        ("scale", "12.5", 12.5),
        ("scale", "0", None),
        ("scale", "nan", None),
        ("rescore", "thorough", "thorough"),
        ("rescore", "THOROUGH", None),
        ("q", "  ", None),
        ("q", "Who?", "Who?"),
        ("colour", "red", None),
    ]
    assert [link.parse(name, raw) for name, raw, _ in asked] == [want for _, _, want in asked]


def plain(params) -> dict:
    """Query parameters as name -> its one value."""
    return {k: (v[0] if isinstance(v, list) else v) for k, v in dict(params).items()}


@pytest.mark.slow
def test_a_link_opens_its_question_and_a_reload_shows_equal_numbers(same_stack):
    params = {"q": QUESTION, "k": "3", "max_new_tokens": "8"}
    at = opened(params)
    assert at.session_state["question"] == QUESTION
    assert at.slider(key="k").value == 3
    want = same_stack.run(QUESTION, AnswerSettings(k=3, max_new_tokens=8))
    shown = cards(at)
    assert [a for a, _ in shown] == [md_text(want.answer(d).answer) for d in ("rag-token", "rag-sequence")]
    written = dict(at.query_params)
    assert {k: (v[0] if isinstance(v, list) else v) for k, v in written.items()} == {
        **params,
        "stack": "cli",
    }  # defaults left out; the stack shown (the command line's) named
    again = opened(params)  # a reload, or the link opened in another browser
    assert cards(again) == shown
    assert not again.warning or all("link" not in w.value for w in again.warning)


@pytest.mark.slow  # over 5 s on 2 cores
def test_a_bad_or_unknown_value_is_named_and_the_default_used():
    at = opened({"k": "99", "colour": "red", "max_new_tokens": "4"})  # a short answer: a cheap one
    (warning,) = [w.value for w in at.warning if "link" in w.value]
    assert "k=99" in warning and "colour=red" in warning and "max_new_tokens" not in warning
    assert at.slider(key="k").value == 5 and at.session_state["max_new_tokens"] == 4
    assert plain(at.query_params) == {
        "max_new_tokens": "4",
        "stack": "cli",
    }  # the link as it is now: the value used (and the stack shown), the bad ones gone
