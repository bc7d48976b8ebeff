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


ENGINE_CARD = (
    '//*[@data-testid="stMetric"][.//*[@data-testid="stMetricLabel"][normalize-space()="The engine"]]'
    '//*[@data-testid="stMetricValue"]'
)


def revealed(driver, figure) -> bool:
    """The card "The engine" shows the engine's figure as the page prints numbers (not merely
    somewhere on the page: the student's own answer is there too), and the answer is judged right."""
    cards = driver.find_elements("xpath", ENGINE_CARD)
    shown = cards[0].text.strip() if cards else ""
    return shown == p_text(figure.value) and "Right (within" in body_text(driver)


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
    # the engine's own figure, as the page prints numbers, and the verdict: waited for with the
    # count, since under load a page can report its run over a moment before its last part is drawn
    shown = lambda: settled(browser) and answered(browser, 1) and revealed(browser, figure)  # noqa: E731
    wait_for(browser, shown, 120, "the reveal")
    wait_for(browser, lambda: FIRST.id in kept_in_browser(browser), 30, "the answer kept in the browser")
    assert kept_in_browser(browser)[FIRST.id]["right"] is True

    browser.refresh()  # a new session: only the browser remembers
    wait_for(browser, shown, 120, "the kept answer")
    browser.save_screenshot(str(ARTIFACTS / "exercises-kept.png"))

    press(browser, "Forget my answers")
    wait_for(browser, lambda: settled(browser) and answered(browser, 0), 60, "the answers forgotten")
    assert kept_in_browser(browser) == {}
    browser.refresh()
    wait_for(browser, lambda: settled(browser) and answered(browser, 0), 120, "the page, nothing kept")
