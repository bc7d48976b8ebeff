"""The line in a real browser: a question that waits behind another session's shows its place and a
Cancel button; Cancel takes it out of the line (the page says so, and the server answers the other
question only), and "Ask it again" puts it back and shows its answer. (On the test worker's
tiny-generator server, `tiny_served`: the line does not depend on the model. The other sessions are
light websocket clients whose links ask at K = 10 with four beams of up to 48 tokens, so that their
questions hold the line for some seconds even on the tiny generator.)"""

import json
from urllib.parse import urlencode

import pytest
from light_session import LightSession

from app.state import WAITING
from rag_core.config import ASSETS

from browser_kit import (  # noqa: F401
    ARTIFACTS,
    body_text,
    browser,
    press,
    settled,
    type_into,
    wait_for,
)

# a real server and Chromium: over 5 s on 2 cores
pytestmark = pytest.mark.slow

DEV = [json.loads(line) for line in (ASSETS / "eval" / "dev.jsonl").read_text(encoding="utf-8").splitlines()]
AHEAD, MINE = DEV[-4:-2], DEV[-2]  # dev questions no other test asks: each is computed here
SLOW = {"k": 10, "beams": 4, "max_new_tokens": 48}  # about 7 s a question on the tiny generator
ANSWERED = "The 5 passages"  # the Ask page's heading below the answers (K = 5)


def test_a_waiting_question_can_be_cancelled_and_asked_again(tiny_served, browser):
    server = tiny_served[0]
    browser.get(server)  # the Ask page on its default question, answered before the others come
    wait_for(browser, lambda: settled(browser) and ANSWERED in body_text(browser).splitlines(), 300, "Ask")
    others = [LightSession(server, "", urlencode({"q": q["question"], **SLOW})) for q in AHEAD]
    try:
        for other in others:  # each page drawn: its question is in the line
            other.wait_for(lambda text: "Ask" in text.splitlines(), 120)
        type_into(browser, "Question", MINE["question"])
        wait_for(browser, lambda: WAITING in body_text(browser), 60, "the waiting notice")
        assert "in line" in body_text(browser)
        press(browser, "Cancel")
        wait_for(browser, lambda: "You cancelled this question" in body_text(browser), 60, "the cancel")
        browser.save_screenshot(str(ARTIFACTS / "line-cancelled.png"))
        for other in others:
            other.wait_for(lambda text: f"The {SLOW['k']} passages" in text.splitlines(), 300)
        assert WAITING not in body_text(browser) and ANSWERED not in body_text(browser).splitlines()

        press(browser, "Ask it again")
        wait_for(
            browser,
            lambda: settled(browser) and ANSWERED in body_text(browser).splitlines(),
            300,
            "the answer after asking again",
        )
    finally:
        for other in others:
            other.close()
