"""The Diagnose panel's counterfactual in a real browser, as a user met it: a corpus uploaded on the
Corpus page, a question asked on it, the Diagnose panel opened with nothing changed, under greedy
decoding and 2 beams. The cards must show the real answers (same text, same p), never "the best of
the known answers"; the verdicts must not read "no verdict fired" before any check ran; a change the
stored numbers cannot decide says it needs a model call, and the button makes it and shows the
answer the pipeline itself gives.
(Its own module and server: the upload goes to that server's throw-away cache.)"""

import json
import re

import pytest
from test_counterfactual_model import ROBOTICS

from browser_kit import (  # noqa: F401
    ARTIFACTS,
    body_text,
    browser,
    field,
    press,
    selected,
    settled,
    showing,
    type_into,
    wait_for,
)

# a real server and Chromium: every test here takes over 5 s on 2 cores (measured with --durations)
pytestmark = pytest.mark.slow

INDEX = "robotics-cf"
QUESTION = "Who wrote Moby-Dick?"  # the Ask page's own first question, an example with a known answer

# Every metric card: label, value, delta text, and whether it comes after the counterfactuals' heading.
READ_CARDS = """
const head = [...document.querySelectorAll('[data-testid="stMarkdownContainer"]')]
  .find(m => m.innerText.trim().startsWith('Counterfactuals'));
return [...document.querySelectorAll('[data-testid="stMain"] [data-testid="stMetric"]')].map(m => {
  const text = sel => { const e = m.querySelector(sel); return e ? e.innerText.trim() : ''; };
  return [text('[data-testid="stMetricLabel"]'), text('[data-testid="stMetricValue"]'),
          text('[data-testid="stMetricDelta"]'),
          !!head && !!(head.compareDocumentPosition(m) & Node.DOCUMENT_POSITION_FOLLOWING)];
});
"""


SHOW_CARDS = """
const head = [...document.querySelectorAll('[data-testid="stMarkdownContainer"]')]
  .find(m => m.innerText.trim().startsWith('Counterfactuals'));
if (head) head.scrollIntoView();
"""


def snapshot(driver, name: str) -> None:
    """A screenshot of the counterfactuals (scrolled into view) under test-artifacts/browser/."""
    driver.execute_script(SHOW_CARDS)
    driver.save_screenshot(str(ARTIFACTS / f"counterfactual-{name}.png"))


def cards(driver) -> tuple[dict, dict]:
    """(the Ask page's answer cards, the counterfactual cards), each label -> (value, delta)."""
    found = driver.execute_script(READ_CARDS)
    top = {}
    for label, value, delta, after in found:  # the answer cards come first (the checks' row repeats them)
        if not after:
            top.setdefault(label, (value, delta))
    what_if = {label: (value, delta) for label, value, delta, after in found if after}
    return top, what_if


def p_of(delta: str) -> str:
    """The probability a card's delta names: "p = 0.068" (an answer card) or "p = 0.068, unchanged"."""
    found = re.search(r"p = ([0-9.e+-]+)", delta)
    assert found, delta
    return found.group(1)


def p_now(delta: str) -> str:
    """The probability a counterfactual card's delta ends on: "+0.012 (p 0.068 → 0.080)" or "p = 0.080…"."""
    return delta.split("→")[-1].strip(" )") if "→" in delta else p_of(delta)


def upload_and_use(driver, url: str, folder) -> None:
    """The Corpus page: upload the corpus, build it in the background, make it the sidebar's index."""
    from selenium.webdriver.common.by import By

    corpus = folder / "robotics.jsonl"
    corpus.write_text("".join(json.dumps(r) + "\n" for r in ROBOTICS), encoding="utf-8")
    driver.get(url + "/corpus")
    wait_for(
        driver,
        lambda: (
            showing(driver, "Corpus")
            and settled(driver)
            and driver.find_elements(By.CSS_SELECTOR, 'input[type="file"]')
        ),
        300,
        "the Corpus page",
    )
    driver.find_element(By.CSS_SELECTOR, 'input[type="file"]').send_keys(str(corpus))
    wait_for(
        driver,
        lambda: f"All {len(ROBOTICS)} passages" in body_text(driver) and settled(driver),
        120,
        "the upload preview",
    )
    driver.find_element(By.CSS_SELECTOR, 'input[aria-label="Index name"]').send_keys(INDEX)
    press(driver, "Build the index")
    wait_for(
        driver, lambda: f"Built index '{INDEX}'" in body_text(driver) and settled(driver), 240, "the build"
    )
    press(driver, f"Use {INDEX} now")
    wait_for(
        driver,
        lambda: settled(driver) and selected(driver, "Index", "sidebar") == INDEX,
        60,
        "the index switch",
    )


def test_the_counterfactual_with_nothing_changed_is_the_real_answer(server, browser, tmp_path):
    from selenium.webdriver.common.by import By

    upload_and_use(browser, server, tmp_path)
    browser.find_element(By.XPATH, '//a[@data-testid="stSidebarNavLink"][contains(., "Ask")]').click()
    wait_for(
        browser,
        lambda: (
            showing(browser, "Ask")
            and settled(browser)
            and cards(browser)[1]
            and f"index {INDEX}" in body_text(browser)
            and f"Question: “{QUESTION}”" in body_text(browser)
        ),
        300,
        "the answer on the uploaded corpus and its Diagnose panel",
    )
    same_as_asked(browser, "greedy")
    # the verdicts before any check ran: those the stored numbers fire, or a neutral line; never
    # "no verdict fired". An expected answer a passage holds fires none of them before the checks.
    assert "no verdict fired" not in body_text(browser)
    type_into(browser, "Expected answer", "Nimbleworks")
    wait_for(
        browser,
        lambda: settled(browser) and "expected 'Nimbleworks'" in body_text(browser),
        120,
        "the verdicts for the typed answer",
    )
    snapshot(browser, "no-checks-yet")
    text = body_text(browser)
    assert "Verdict: No checks run yet" in text and "no verdict fired" not in text, text
    press(browser, "Run the checks (one teacher-forced pass, closed-book, deeper search)")
    wait_for(
        browser,
        lambda: settled(browser) and "Closed-book (no passage)" in body_text(browser),
        300,
        "the checks",
    )
    assert "No checks run yet" not in body_text(browser)
    # beam search (2 beams in the sidebar): the stored numbers never decide RAG-Token's beams under a
    # changed prior, but with nothing changed the answer is still the one just given
    set_slider(browser, "Beams", 2)
    wait_for(
        browser,
        lambda: settled(browser) and "· 2 beams · scale 20" in body_text(browser) and cards(browser)[1],
        300,
        "the answer with 2 beams",
    )
    same_as_asked(browser, "beams")

    # another scale: the card says it needs a model call and the button makes it; the answer it shows
    # is the one the pipeline gives when the question is asked at that scale
    type_into(browser, "Retriever scale", "15")
    wait_for(
        browser,
        lambda: (
            settled(browser)
            and field(browser, "Retriever scale").get_attribute("value") == "15.00"
            and cards(browser)[1].get("RAG-Token", ("",))[0] == "needs a model call"
        ),
        60,
        "the undecided card",
    )
    snapshot(browser, "needs-call")
    assert "the answer needs a model call" in body_text(browser)
    press(browser, "Make the model call: decode the 5 kept passages again")
    label = "RAG-Token (computed by a model call)"
    wait_for(browser, lambda: settled(browser) and label in cards(browser)[1], 240, "the computed answer")
    snapshot(browser, "computed")
    computed = cards(browser)[1][label]
    assert "computed: the generator decoded the 5 kept passages again" in body_text(browser)
    type_into(browser, "Retriever scale", "15", area="sidebar")
    wait_for(
        browser,
        lambda: (
            settled(browser)
            and "· 2 beams · scale 15" in body_text(browser)
            and cards(browser)[1].get("RAG-Token", ("",))[1].endswith(", unchanged")
        ),
        300,
        "the answer at scale 15",
    )
    top, _ = cards(browser)
    assert top["RAG-Token"][0] == computed[0], (top, computed)
    assert p_of(top["RAG-Token"][1]) == p_now(computed[1]), (top, computed)


def same_as_asked(driver, name: str) -> None:
    """Nothing changed: the counterfactual cards are the answer cards above, exactly, and say so."""
    snapshot(driver, f"unchanged-{name}")
    top, what_if = cards(driver)
    for label in ("RAG-Token", "RAG-Sequence"):
        assert label in what_if, (name, what_if)  # not "(approximate)", not "needs a model call"
        assert what_if[label][0] == top[label][0], (name, label, top, what_if)
        assert p_of(what_if[label][1]) == p_of(top[label][1]), (name, label, top, what_if)
        assert what_if[label][1].endswith(", unchanged"), (name, what_if)
    text = body_text(driver)
    assert "best of the known answers" not in text
    assert "unchanged: every passage kept at the same scale" in text


def set_slider(driver, label: str, value: int) -> None:
    """Move the sidebar slider labelled `label` to `value` with the arrow keys, as a keyboard user."""
    from selenium.webdriver.common.action_chains import ActionChains
    from selenium.webdriver.common.by import By
    from selenium.webdriver.common.keys import Keys

    where = f'[data-testid="stSidebar"] input[type="range"][aria-label="{label}"]'
    slider = driver.find_element(By.CSS_SELECTOR, where)
    driver.execute_script("arguments[0].focus()", slider)  # the range input is hidden: focus, then keys
    now = int(slider.get_attribute("value"))
    ActionChains(driver).send_keys((Keys.RIGHT if value > now else Keys.LEFT) * abs(value - now)).perform()
    wait_for(
        driver,
        lambda: slider.get_attribute("value") == str(value) and settled(driver),
        60,
        f"{label} at {value}",
    )
