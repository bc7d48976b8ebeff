"""Exercises in a real browser: a student answers one, the page reveals the engine's figure, a
reload (a new session) finds the answer kept in the browser, and "Forget my answers" clears it for
good. A screenshot goes to test-artifacts/browser/. (On the test worker's shared server.)"""

import json

import pytest

from app.exercises import progress_store
from rag_core.exercises import figures
from rag_core.exercises.sheets import load_exercises
from rag_core.marginals import p_text

from browser_kit import (  # noqa: F401
    ARTIFACTS,
    body_text,
    browser,
    field,
    fill,
    press,
    settled,
    wait_for,
)

# a real server and Chromium: over 5 s on 2 cores
pytestmark = pytest.mark.slow

FIRST = load_exercises().exercises[0]  # the page opens on the first exercise: a toy, no model call
COUNT = len(load_exercises().exercises)


def answered(driver, n: int) -> bool:
    return f"{n} of {COUNT} answered" in body_text(driver)


def kept_in_browser(driver) -> dict:
    stored = driver.execute_script(f"return window.localStorage.getItem('{progress_store.STORAGE_KEY}')")
    return json.loads(stored or "{}")


def test_an_answer_is_revealed_and_kept_across_a_reload(server, browser):
    assert FIRST.ask == "number" and not FIRST.live
    figure = figures.FIGURES[FIRST.figure].compute(None, FIRST.params)
    mine = round(float(figure.value), 2)  # within the tolerance
    browser.get(f"{server}/exercises")
    wait_for(browser, lambda: settled(browser) and answered(browser, 0), 300, "the Exercises page")

    fill(browser, "Your answer", f"{mine}")
    press(browser, "Reveal the engine's answer")
    wait_for(browser, lambda: settled(browser) and answered(browser, 1), 120, "the reveal")
    text = body_text(browser)
    assert p_text(figure.value) in text  # the engine's own figure, as the page prints numbers
    assert "Right (within" in text
    wait_for(browser, lambda: FIRST.id in kept_in_browser(browser), 30, "the answer kept in the browser")
    assert kept_in_browser(browser)[FIRST.id]["right"] is True

    browser.refresh()  # a new session: only the browser remembers
    wait_for(browser, lambda: settled(browser) and answered(browser, 1), 120, "the kept answer")
    text = body_text(browser)
    assert "Right (within" in text and p_text(figure.value) in text
    browser.save_screenshot(str(ARTIFACTS / "exercises-kept.png"))

    press(browser, "Forget my answers")
    wait_for(browser, lambda: settled(browser) and answered(browser, 0), 60, "the answers forgotten")
    assert kept_in_browser(browser) == {}
    browser.refresh()
    wait_for(browser, lambda: settled(browser) and answered(browser, 0), 120, "the page, nothing kept")
