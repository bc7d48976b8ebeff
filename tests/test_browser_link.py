"""A link is a question, in a real browser: a question asked on Ask is in the address bar and in the
Copy link box; that link opened in a fresh browser (another session) shows the same question with
equal numbers; a link with a bad value says which value it left out. On the worker's tiny-generator
server (`tiny_served`): what a link carries does not depend on the model that answers."""

from urllib.parse import parse_qs, urlparse

import pytest

from browser_kit import (  # noqa: F401
    body_text,
    drawn,
    new_browser,
    press,
    settled,
    type_into,
    wait_for,
)

# a server and Chromium: over 5 s on 2 cores
pytestmark = pytest.mark.slow

QUESTION = "Who painted the Mona Lisa?"


def answers(driver) -> list[str]:
    """Every answer card as drawn: its label, answer and probability."""
    from selenium.webdriver.common.by import By

    return [m.text for m in driver.find_elements(By.CSS_SELECTOR, '[data-testid="stMetric"]')]


def answered(driver, question: str) -> bool:
    return f"Question: “{question}”" in body_text(driver) and settled(driver) and bool(answers(driver))


@pytest.fixture(scope="module")
def server(tiny_served):
    return tiny_served[0]


def test_a_link_opens_the_same_question_with_equal_numbers_in_a_fresh_browser(server):
    from selenium.webdriver.common.by import By

    first, second = new_browser(), new_browser()
    try:
        first.get(server + "/")
        wait_for(first, lambda: answered(first, "Who wrote Moby-Dick?"), 300, "the default answer")
        type_into(first, "Question", QUESTION)
        wait_for(first, lambda: answered(first, QUESTION), 300, "the answer to the typed question")
        drawn(first, "the answer drawn")
        assert "q=Who+painted+the+Mona+Lisa%3F" in first.current_url  # the address bar is the link
        press(first, "Copy link")
        code = '[data-testid="stPopoverBody"] code'
        wait_for(first, lambda: first.find_elements(By.CSS_SELECTOR, code), 30, "the link in its box")
        shared = first.find_element(By.CSS_SELECTOR, code).text.strip()
        assert shared.startswith(server) and "q=Who+painted+the+Mona+Lisa%3F" in shared
        second.get(shared)
        wait_for(second, lambda: answered(second, QUESTION), 300, "the linked question's answer")
        drawn(second, "the linked answer drawn")
        assert answers(second) == answers(first)
        assert "could not be used" not in body_text(second)
    finally:
        first.quit()
        second.quit()


def test_a_link_with_a_bad_value_names_it_and_opens_the_defaults(server):
    driver = new_browser()
    try:
        driver.get(server + "/?k=many&beams=2")
        wait_for(
            driver, lambda: "could not be used" in body_text(driver) and settled(driver), 300, "the notice"
        )
        text = body_text(driver)
        assert "“k=many”" in text and "beams" not in text.split("could not be used")[0]
        shown = parse_qs(urlparse(driver.current_url).query)  # the link as it is now
        assert shown["beams"] == ["2"] and "k" not in shown
    finally:
        driver.quit()
