"""What is on screen is what the user chose: an example picked is the question answered, a typed
question is no longer the example, every trace page names its question and index. The stack is the
default retriever with a tiny random generator (`on_tiny_generator` in conftest): what the pages
show of a question does not depend on the model that answers it."""

import pytest
from streamlit.testing.v1 import AppTest

from app.ui.safe_text import md_text
from rag_core.config import AnswerSettings, StackSpec

from conftest import ROOT, visit

pytestmark = pytest.mark.usefixtures("on_tiny_generator")


@pytest.fixture(scope="module")
def same_stack(on_tiny_generator):
    """The pages' stack loaded afresh, for recomputing what they show."""
    from rag_core.pipeline import load_pipeline

    return load_pipeline(StackSpec(generator=str(on_tiny_generator)))


def ask_app() -> AppTest:
    at = AppTest.from_file(str(ROOT / "app/main.py"), default_timeout=600)
    at.session_state["max_new_tokens"] = 8
    at.run()
    assert not at.exception, [e.value for e in at.exception]
    return at


def shown_answers(at) -> list[str]:
    """The two answer cards at the top of the Ask page (the Diagnose panel's counterfactuals come later)."""
    return [m.value for m in at.metric if m.label in ("RAG-Token", "RAG-Sequence")][:2]


def about_line(at) -> str:
    (line,) = [m.value for m in at.markdown if m.value.startswith("**Question:**")]
    return line


@pytest.mark.slow
def test_picking_an_example_answers_it_and_typing_leaves_the_example(same_stack, on_tiny_generator):
    at = ask_app()
    assert "Moby" in about_line(at)
    folder = f"{on_tiny_generator.parent.name}/{on_tiny_generator.name}"  # the stack in words, escaped
    words = md_text(f"MiniLM-L6 retriever · {folder} (command line)")
    assert [c.value for c in at.caption if c.value.startswith("**Model:**")] == [f"**Model:** {words}"]
    before = shown_answers(at)
    at.selectbox(key="example").set_value("In which city is the Taj Mahal?").run()
    assert not at.exception, [e.value for e in at.exception]
    assert at.session_state["question"] == "In which city is the Taj Mahal?"
    assert "Taj Mahal" in about_line(at) and "Moby" not in about_line(at)  # no stale answer
    want = same_stack.run("In which city is the Taj Mahal?", AnswerSettings(max_new_tokens=8))
    assert (
        shown_answers(at) == [want.answer("rag-token").answer, want.answer("rag-sequence").answer] != before
    )
    assert at.text_input(key="diag_expected").value == "Agra"  # its expected answer, not Moby-Dick's
    at.text_input(key="question_box").input("Who painted the Mona Lisa?")
    next(b for b in at.button if b.label == "Answer").click().run()
    assert at.session_state["question"] == "Who painted the Mona Lisa?"
    assert at.selectbox(key="example").value == "(type your own)"  # the picker no longer claims the example
    assert at.text_input(key="diag_expected").value != "Agra"


@pytest.mark.slow  # over 5 s on 2 cores
def test_every_trace_page_names_its_question_and_index():
    at = ask_app()
    for page in ("map.py", "token_vs_sequence.py", "citations.py"):
        visit(at, page)
        line = about_line(at)
        assert "Moby" in line and f"**index** {at.session_state['index_name']}" in line, (page, line)


def test_by_hand_shows_the_frankenstein_case_and_the_normalised_priors():
    at = AppTest.from_file(str(ROOT / "app/main.py"), default_timeout=600)
    at.switch_page(str(ROOT / "pages" / "by_hand.py"))
    at.run()
    assert not at.exception, [e.value for e in at.exception]
    assert any("p(z1|x) = 0.7 · p(z2|x) = 0.3" in c.value for c in at.caption)  # as used, after normalising
    assert not [w for w in at.warning if "Frankenstein" in w.value]  # the default preset: both agree
    at.radio(key="hand_preset").set_value("A Frankenstein answer").run()
    assert not at.exception, [e.value for e in at.exception]
    (frank,) = [w.value for w in at.warning if w.value.startswith("Frankenstein")]
    assert "Chicago Hawaii" in frank and "Chicago Illinois" in frank and "word(s) 2" in frank


def _failure_picker_app():
    """The Index swap page's failure picker alone, over the failing rows in session state."""
    import pandas as pd
    import streamlit as st

    from app.index_swap import index_swap_views

    fails = pd.DataFrame(
        st.session_state["rows"], columns=["position", "index", "answer", "question", "decoding"]
    )
    index_swap_views.failure_actions(fails, fails["decoding"].iloc[0], {}, "pages/index_swap.py")


def test_the_failure_picked_stays_picked_when_a_live_run_adds_rows():
    """A live run adds failing rows between two reruns: the pick is the failure the user chose (by its
    label), so "Explain this failure" opens that question on that index, not whatever now sits at
    the same position in the list."""
    row = {
        "a": ("France", "2016", "Obama", "Who is the President of France?", "rag-token"),
        "b": ("Mexico", "2018", "Obama", "Who is the President of Mexico?", "rag-token"),
        "c": ("Chile", "2016", "Obama", "Who is the President of Chile?", "rag-token"),
    }
    at = AppTest.from_function(_failure_picker_app, default_timeout=60)
    at.session_state["rows"] = [row["a"], row["b"]]
    at.run()
    at.selectbox(key="swap_fail").select_index(1).run()
    assert at.selectbox(key="swap_fail").value == "Mexico · 2018 index → Obama"
    at.session_state["rows"] = [row["c"], row["a"], row["b"]]  # a new failure sorts first
    at.run()
    assert not at.exception, [e.value for e in at.exception]
    assert at.selectbox(key="swap_fail").value == "Mexico · 2018 index → Obama"
    next(b for b in at.button if b.label == "Explain this failure").click().run()
    assert at.session_state["question"] == "Who is the President of Mexico?"
    assert at.session_state["index_name"] == "2018"
    assert at.session_state["swap_goto"] == "token_vs_sequence.py"  # a marginal's answer, stepped


def test_a_stuffed_failure_is_explained_on_citations():
    """A failure of the experiment in the stuffed reading opens Citations (what each passage is worth
    to the stuffed reading), never Token vs Sequence's marginal answers."""
    at = AppTest.from_function(_failure_picker_app, default_timeout=60)
    at.session_state["rows"] = [("Mexico", "2018", "Obama", "Who is the President of Mexico?", "stuffed")]
    at.run()
    button = next(b for b in at.button if b.label == "Explain this failure")
    assert button.help.startswith("Citations on this question and index")
    button.click().run()
    assert not at.exception, [e.value for e in at.exception]
    assert at.session_state["swap_goto"] == "citations.py"
    assert at.session_state["question"] == "Who is the President of Mexico?"
    assert "tvs_answer" not in at.session_state


@pytest.mark.slow  # the Ask page
def test_the_stacks_on_offer_are_read_once_a_page_run(monkeypatch):
    """Every state function asks for the session's stack; reading the training cache and the
    command line each time held a class's server for long. Once per full page run now (a page may
    rerun itself, so runs are counted where each begins; the test's own reads of a widget's label
    happen outside a run)."""
    from streamlit.runtime.scriptrunner import get_script_run_ctx

    from app import stack

    reads, runs = [], []
    real_read, real_begin = stack._offered, stack.begin_run

    def read():
        if get_script_run_ctx(suppress_warning=True) is not None:
            reads.append(1)
        return real_read()

    monkeypatch.setattr(stack, "_offered", read)
    monkeypatch.setattr(stack, "begin_run", lambda: runs.append(1) or real_begin())
    at = ask_app()
    visit(at, "by_hand.py")
    visit(at, "citations.py")
    assert len(runs) >= 3 and len(reads) == len(runs), (len(reads), len(runs))
