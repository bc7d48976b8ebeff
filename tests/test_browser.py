"""A real browser end to end: start the server, ask a question in headless Chromium, open every
page, save a screenshot of each under test-artifacts/browser/ (a class at once: test_classroom.py)."""

import re

import pytest

from browser_kit import (  # noqa: F401
    ARTIFACTS,
    PAGES,
    body_text,
    browser,
    charts_drawn,
    clipped_tables,
    drawn,
    flip,
    new_browser,
    ready,
    selected,
    settled,
    showing,
    toggled,
    type_into,
    wait_for,
)

# a real server and Chromium: every test here takes over 5 s on 2 cores (measured with --durations)
pytestmark = pytest.mark.slow

# Text each page shows on a fresh cache (the Ask page's token sources are checked after asking).
SHOWN = {
    "token_vs_sequence": ["Where each token came from"],
    "citations": ["Which sentence carried it"],
    "train": ["The pull at the start", "Taking steps", "On the map", "Fine-tune on a question file"],
    "eval": ["shipped reference", "Compare two runs", "Summary"],
}


# Pictographs drawn as colour emoji (empty boxes where the font lacks them); the app's icons come
# from the icon font instead. (Text symbols such as ★ ✓ ↵ are in the text fonts.)
EMOJI = re.compile("[\u2705\u274c\u274e\u2753-\u2755\u2757\U0001f300-\U0001faff]")
# Expanders whose body holds no text: a user opens them onto nothing.
EMPTY_EXPANDERS = """
return [...document.querySelectorAll('[data-testid="stMain"] [data-testid="stExpander"]')]
  .filter(e => !(e.querySelector('[data-testid="stExpanderDetails"]') || e).textContent.trim())
  .map(e => e.querySelector('summary') ? e.querySelector('summary').textContent.trim() : '?');
"""


def test_ask_and_visit_every_page(server, browser):
    from selenium.webdriver.common.by import By

    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    browser.get(server + "/")
    # the default question is answered on first load (models load on a cold server: allow time)
    wait_for(
        browser,
        lambda: "Herman Melville" in body_text(browser) and settled(browser),
        300,
        "the default answer",
    )
    type_into(browser, "Question", "Who painted the Mona Lisa?")  # once the page has drawn the field
    wait_for(browser, lambda: "Leonardo" in body_text(browser) and settled(browser), 240, "the new answer")
    assert "Where each token came from" in body_text(browser)
    assert "␣ marks the space a token starts with; ↵, in a light grey box, is the line break" in body_text(
        browser
    )
    browser.save_screenshot(str(ARTIFACTS / "ask.png"))
    assert not browser.find_elements(By.CSS_SELECTOR, '[data-testid="stException"]')

    clipped = {"Ask": clipped_tables(browser)}
    index = selected(browser, "Index", "sidebar")
    for path, title in PAGES[1:]:
        # click the sidebar link (a new URL would start a new session and forget the question)
        link = browser.find_element(
            By.XPATH, f'//a[@data-testid="stSidebarNavLink"][contains(@href, "/{path}")]'
        )
        link.click()
        wait_for(
            browser,
            lambda: showing(browser, title) and settled(browser) and ready(browser, path),
            300,
            f"the {title} page",
        )
        if path == "train":  # the walk needs an expected answer: the user types one
            type_into(browser, "Expected answer y", "Leonardo da Vinci")
            wait_for(
                browser,
                lambda: "The pull at the start" in body_text(browser) and settled(browser),
                240,
                "the query walk",
            )
        drawn(browser, f"the charts of {title}", 60)
        browser.save_screenshot(str(ARTIFACTS / f"{path}.png"))
        errors = browser.find_elements(By.CSS_SELECTOR, '[data-testid="stException"]')
        assert not errors, f"{title}: {errors[0].text[:300]}"
        clipped[title] = clipped_tables(browser)
        if path in ("map", "token_vs_sequence", "citations", "train"):  # a trace page names what it shows
            assert f"Question: “Who painted the Mona Lisa?” · index {index} · K=5" in body_text(browser), (
                title
            )
        main = browser.find_element(By.CSS_SELECTOR, '[data-testid="stMain"]').text
        assert not EMOJI.findall(main), (title, EMOJI.findall(main))  # icons come from the icon font
        assert not browser.execute_script(EMPTY_EXPANDERS), (title, browser.execute_script(EMPTY_EXPANDERS))
        for part in SHOWN.get(path, ()):  # each page's own parts are there on a fresh cache
            assert part in body_text(browser), (title, part)
        if path == "eval":  # the shipped runs are compared from the first start, with the Sankey drawn
            assert browser.find_elements("css selector", '[data-testid="stPlotlyChart"] .sankey'), "no Sankey"
    assert not any(clipped.values()), clipped  # at 1280 px every table's columns fit
