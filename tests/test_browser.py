"""A real browser end to end: start the server, ask a question in headless Chromium, open every
page, save a screenshot of each under test-artifacts/browser/; and eight sessions at once."""

import json
import os
import re
import urllib.request
from pathlib import Path

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
from conftest import ROOT

# a real server and Chromium: every test here takes over 20 s on 2 cores (measured with --durations)
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
    from selenium.webdriver.common.keys import Keys

    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    browser.get(server + "/")
    # the default question is answered on first load (models load on a cold server: allow time)
    wait_for(
        browser,
        lambda: "Herman Melville" in body_text(browser) and settled(browser),
        300,
        "the default answer",
    )
    box = browser.find_element(By.CSS_SELECTOR, 'input[aria-label="Question"]')
    box.send_keys(Keys.CONTROL, "a")
    box.send_keys("Who painted the Mona Lisa?")
    box.send_keys(Keys.ENTER)
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


# ---------------------------------------------------------------------------------- concurrent sessions

ASK_QUESTIONS = [
    "Who painted the Mona Lisa?",
    "In which city is the Taj Mahal?",
    "In what year did the Berlin Wall fall?",
    "How many keys does a modern piano have?",
    "Who created the video game Tetris?",
    "Who wrote Pride and Prejudice?",
]
# `bench --only load` runs this test with more rounds and reads the RSS samples from this file.
LOAD_REPORT = os.environ.get("RAG_LOUPE_LOAD_REPORT")
LOAD_ROUNDS = int(os.environ.get("RAG_LOUPE_LOAD_ROUNDS", "1"))


def answer_shown(driver) -> str:
    """The RAG-Token answer as the Ask page shows it (the first metric's value)."""
    from selenium.webdriver.common.by import By

    values = driver.find_elements(By.CSS_SELECTOR, '[data-testid="stMetricValue"]')
    return values[0].text.strip() if values else ""


def ask(driver, question: str) -> None:
    from selenium.webdriver.common.by import By
    from selenium.webdriver.common.keys import Keys

    box = driver.find_element(By.CSS_SELECTOR, 'input[aria-label="Question"]')
    box.send_keys(Keys.CONTROL, "a")
    box.send_keys(question)
    box.send_keys(Keys.ENTER)


def input_values(driver) -> list[str]:
    return driver.execute_script("return [...document.querySelectorAll('input')].map(i => i.value)")


def start_one_question_eval(driver) -> None:
    """On the Eval page: the question slider to its minimum (1), then Run (a background job)."""
    from selenium.webdriver.common.action_chains import ActionChains
    from selenium.webdriver.common.by import By
    from selenium.webdriver.common.keys import Keys

    slider = driver.find_element(By.CSS_SELECTOR, 'input[type="range"][aria-label="Questions (the first N)"]')
    driver.execute_script(
        "arguments[0].focus()", slider
    )  # the range input is visually hidden: focus, then keys
    ActionChains(driver).send_keys(Keys.HOME).perform()
    wait_for(driver, lambda: slider.get_attribute("value") == "1" and settled(driver), 30, "the slider at 1")
    driver.find_element(By.XPATH, '//button[.//p[text()="Run"]]').click()


DEV_FIRST = json.loads((ROOT / "assets" / "eval" / "dev.jsonl").read_text().splitlines()[0])["question"]


def test_eight_sessions_at_once(served, default_pipeline):
    """Eight browser sessions on one server at once: six ask six different questions on the Ask page,
    one answers on both indexes on the Index swap page, one runs an evaluation in the background.
    Each Ask session gets the answer the engine gives to its own question (no cross-talk), the
    background run finishes and shows, every session sees it running, and the server stays up. The
    server's RSS is sampled along the way (reported, not asserted)."""
    import psutil
    from selenium.webdriver.common.by import By

    url, proc = served
    rss = []

    def sample(when: str) -> None:
        rss.append((when, round(psutil.Process(proc.pid).memory_info().rss / 2**20)))

    expected = [default_pipeline.run(q).answer("rag-token").answer or "(empty)" for q in ASK_QUESTIONS]
    assert len(set(expected)) == len(expected), expected  # distinct, so a mix-up would show
    sample("server started")
    drivers = [new_browser() for _ in range(8)]
    askers, swapper, evaluator = drivers[:6], drivers[6], drivers[7]
    try:
        for d in askers:
            d.get(url + "/")
        swapper.get(url + "/index_swap")
        evaluator.get(url + "/eval")
        for d in askers:  # every session has its own first answer before the burst
            wait_for(
                d, lambda d=d: "Herman Melville" in body_text(d) and settled(d), 300, "the default answer"
            )
        wait_for(
            swapper,
            lambda: showing(swapper, "Index swap") and settled(swapper) and ready(swapper, "index_swap"),
            300,
            "the index swap answers",
        )
        wait_for(evaluator, lambda: showing(evaluator, "Eval") and settled(evaluator), 120, "the Eval page")
        sample("8 sessions open")
        start_one_question_eval(evaluator)
        wait_for(
            evaluator, lambda: "Evaluation run" in body_text(evaluator), 60, "the background job's progress"
        )
        for d, q in zip(askers, ASK_QUESTIONS):  # the burst: six questions submitted back to back
            ask(d, q)
        for i, (d, q, want) in enumerate(zip(askers, ASK_QUESTIONS, expected)):
            wait_for(
                d,
                lambda d=d, want=want: answer_shown(d) == want and settled(d),
                400,
                f"session {i}'s answer {want!r}",
            )
            shown = body_text(d)
            assert q in d.find_element(By.CSS_SELECTOR, 'input[aria-label="Question"]').get_attribute("value")
            others = [w for w in expected if w != want and w not in want]
            assert not [w for w in others if f"\n{w}\n" in f"\n{shown}\n"], (i, q)
            assert not d.find_elements(By.CSS_SELECTOR, '[data-testid="stException"]')
        sample("after the burst")
        # the page opens on the shipped run (its Summary is there from the start): wait for the job
        # to end and the Run selector to show the new run, the one its session started
        wait_for(
            evaluator,
            lambda: (
                "Evaluation run" not in body_text(evaluator)
                and settled(evaluator)
                and "dev.jsonl · 1 questions" in selected(evaluator, "Run")
            ),
            400,
            "the finished eval run",
        )
        flip(evaluator, "Only questions RAG got wrong")  # the next interaction keeps the new run on screen
        wait_for(
            evaluator,
            lambda: toggled(evaluator, "Only questions RAG got wrong") and settled(evaluator),
            60,
            "the filtered table",
        )
        assert "dev.jsonl · 1 questions" in selected(evaluator, "Run"), input_values(
            evaluator
        )  # the new run stays
        # and so do its tables: the drill-down lists the new run's one question, not the shipped run's
        assert selected(evaluator, "Question") == DEV_FIRST, input_values(evaluator)
        assert "A shipped reference run" not in body_text(evaluator)
        sample("after the background run")
        for r in range(1, LOAD_ROUNDS):  # more rounds (the benchmark's), each session another question
            turn = ASK_QUESTIONS[r:] + ASK_QUESTIONS[:r]
            for d, q in zip(askers, turn):
                ask(d, q)
            for i, (d, q) in enumerate(zip(askers, turn)):
                want = expected[ASK_QUESTIONS.index(q)]
                wait_for(
                    d,
                    lambda d=d, want=want: answer_shown(d) == want and settled(d),
                    400,
                    f"round {r + 1}, {i}",
                )
            sample(f"after round {r + 1}")
        for d in drivers:
            assert not d.find_elements(By.CSS_SELECTOR, '[data-testid="stException"]')
        askers[0].save_screenshot(str(ARTIFACTS / "session-0.png"))
        evaluator.save_screenshot(str(ARTIFACTS / "session-eval.png"))
        assert urllib.request.urlopen(url + "/_stcore/health", timeout=5).read() == b"ok"
    finally:
        for d in drivers:
            d.quit()
        report = {"sessions": 8, "rss_mb": dict(rss)}
        (ARTIFACTS / "load.json").write_text(json.dumps(report, indent=1))
        if LOAD_REPORT:
            Path(LOAD_REPORT).write_text(json.dumps(report))
