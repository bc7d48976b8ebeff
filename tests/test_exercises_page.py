"""The Exercises page (AppTest, the real default stack): a teacher's own sheet joins the shipped
ones and a bad one is named without losing the rest; a live choice exercise shows its options,
reveals the figure the door computes and is counted for the class; "See it on the … page" opens that
page on the exercise's question."""

from pathlib import Path

import pytest
from streamlit.testing.v1 import AppTest

from app.ui.safe_text import md_text
from rag_core import stacks
from rag_core.config import AnswerSettings
from rag_core.loupe import exercises as ex
from rag_core.loupe.answers import Loupe

ROOT = Path(__file__).resolve().parent.parent
EXPANDER = "Token or **Sequence** on Moby-Dick"  # a teacher's title: shown as typed, never as Markdown
pytestmark = pytest.mark.slow  # the real model stack: over 5 s on 2 cores

OWN = """
[[exercise]]
id = "teacher-moby"
page = "Ask"
title = "Token or **Sequence** on Moby-Dick"
prompt = "Do the two marginals agree?"
ask = "choice"
figure = "readings_agree"
question = "Who wrote Moby-Dick?"
explain = "One passage carries the answer."
"""


@pytest.fixture(scope="module")
def page(tmp_path_factory):
    own = tmp_path_factory.mktemp("own-exercises")
    (own / "mine.toml").write_text(OWN)
    (own / "broken.toml").write_text(OWN.replace("teacher-moby", "teacher-two").replace("ask = ", "asks = "))
    mp = pytest.MonkeyPatch()
    mp.setenv("RAG_LOUPE_EXERCISES", str(own))
    at = AppTest.from_file(str(ROOT / "app/main.py"), default_timeout=600)
    at.switch_page(str(ROOT / "pages" / "exercises.py"))
    at.run()
    yield at
    mp.undo()


def test_a_teachers_sheet_joins_and_a_bad_one_is_named(page):
    assert not page.exception, [e.value for e in page.exception]
    warnings = [w.value.replace("\\", "") for w in page.warning]  # escaped: a sheet is text
    assert len(warnings) == 1 and "broken.toml, exercise 1 ('teacher-two'): it needs 'ask'" in warnings[0]
    assert page.selectbox(key="exercise_pick").options[-1] == f"16. {EXPANDER} (Ask)"  # after the shipped


def test_a_live_choice_is_revealed_as_the_door_computes_it_and_counted(page):
    page.session_state["exercise_pick"] = "teacher-moby"
    page.run()
    assert not page.exception and not page.error, [e.value for e in page.error]
    radio = page.radio[0]
    assert list(radio.options) == list(ex.FIGURES["readings_agree"].options(None, {}))
    radio.set_value("a different answer")
    next(b for b in page.button if b.label == "Reveal the engine's answer").click().run()
    assert not page.exception, [e.value for e in page.exception]
    item = next(e for e in ex.load_exercises().exercises if e.id == "teacher-moby")
    engine = ex.LoupeEngine(Loupe(), stacks.preset_stacks()[0], AnswerSettings(index="2018"))
    figure = ex.reveal(item, engine)
    shown = {m.label: m.value for m in page.metric}
    assert shown["The engine"].replace("\\", "") == figure.shown
    done = page.session_state["exercise_progress"]["teacher-moby"]
    assert done["right"] is (figure.value == "a different answer")
    verdict = [e.value for e in page.error] + [s.value for s in page.success]
    assert verdict == ["Right."] if done["right"] else verdict == ["Not this time."]
    captions = [c.value for c in page.caption]
    assert f"{md_text(EXPANDER)}: 1 revealed, {int(done['right'])} right." in captions  # asterisks kept


def test_see_it_on_the_page_opens_it_on_the_exercise_question(page):
    page.session_state["exercise_pick"] = "teacher-moby"
    page.run()
    next(b for b in page.button if b.label == "See it on the Ask page").click().run()
    assert not page.exception, [e.value for e in page.exception]
    assert page.session_state["question"] == "Who wrote Moby-Dick?"
    assert page.title[0].value == "Ask"
