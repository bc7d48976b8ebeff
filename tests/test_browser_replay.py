"""The Replay page in a real browser: a LangChain chain's trace (OTLP JSON, made by the real
instrumentation) is uploaded, replayed in the background with progress, listed in the table with
what the replay found; its findings name the generator that replayed it; and its documents open in
Citations, whose first lines say it is an imported trace. Saves a screenshot under
test-artifacts/browser/. (On the test worker's shared server, with a throw-away cache.)"""

import json

import pytest

from rag_core.otlp import otlp_json

from browser_kit import (  # noqa: F401
    ARTIFACTS,
    body_text,
    browser,
    drawn,
    new_browser,
    press,
    settled,
    showing,
    wait_for,
)
from trace_producers import ANSWER, QUESTION, corpus_passages, langchain_spans

# a real server and Chromium: over 20 s on 2 cores
pytestmark = pytest.mark.slow


def spans_trace_id(path) -> str:
    return json.loads(path.read_text())["resourceSpans"][0]["scopeSpans"][0]["spans"][0]["traceId"]


def test_an_uploaded_langchain_trace_is_replayed_and_opens_in_citations(server, browser, tmp_path):
    from selenium.webdriver.common.by import By

    passages = corpus_passages()
    path = tmp_path / "langchain.json"
    path.write_text(json.dumps(otlp_json(langchain_spans(passages))))
    browser.get(server + "/replay")
    wait_for(
        browser,
        lambda: (
            showing(browser, "Replay")
            and settled(browser)
            and "Give a trace file" in body_text(browser)
            and browser.find_elements(By.CSS_SELECTOR, 'input[type="file"]')
        ),
        300,
        "the Replay page",
    )
    browser.find_element(By.CSS_SELECTOR, 'input[type="file"]').send_keys(str(path))
    wait_for(browser, lambda: path.name in body_text(browser), 60, "the upload")
    press(browser, "Replay")
    done = "Open its documents in Citations"  # the last part drawn, once the job's result is shown
    wait_for(browser, lambda: done in body_text(browser) and settled(browser), 300, "the replay")
    drawn(browser, "the replay drawn")
    text = body_text(browser)
    assert "1 traces replayed" in text
    assert f"Imported trace (trace {spans_trace_id(path)[:12]}), replayed by" in text
    assert "the logged chat messages, in the generator's chat template" in text
    cards = text.split("Logged answer", 1)[1]
    assert cards.startswith(f"\n{ANSWER}\nReplay's answer\n{ANSWER}\nreproduced")
    browser.save_screenshot(str(ARTIFACTS / "replay.png"))

    press(browser, "Open its documents in Citations")
    wait_for(
        browser,
        lambda: (
            showing(browser, "Citations") and settled(browser) and "Opened from Replay" in body_text(browser)
        ),
        300,
        "Citations on the trace's documents",
    )
    text = body_text(browser)
    assert "an imported trace (trace " in text and "its 3 documents as an index of their own" in text
    assert f"Question: “{QUESTION}”" in text
    browser.save_screenshot(str(ARTIFACTS / "replay-citations.png"))
