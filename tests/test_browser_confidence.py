"""In a real browser: an answer the model is guessing at reads as a guess (smaller grey type, a
"Low confidence" badge, the reason in words) and a confident one does not; the token strips name
their categories for what they measure, with one line of explanation under each strip, and Token
vs Sequence says whether its two strips agree. (Its own module, so it runs on its own server.)"""

from app.source_views import share_line
from rag_core.analysis.confidence import candidate_confidence
from rag_core.analysis.token_sources import KNOWN, LABELS, MEANINGS, candidate_sources, kind, passage_texts
from rag_core.config import Config

from browser_kit import ARTIFACTS, body_text, browser, open_page, served, server, settled, type_into, wait_for  # noqa: F401

CONFIDENT = "Who wrote Moby-Dick?"  # the default question: "Herman Melville", p well above one half
GUESS = "Which HTML tag makes text bold?"  # the default stack's RAG-Token answer is at p ≈ 0.02


def answered(driver, question: str) -> bool:
    return f"Question: “{question}”" in body_text(driver) and settled(driver)


def cards(driver, state: str) -> list:
    """The Ask page's answer cards drawn as `state` ("guess" or "sure")."""
    return driver.find_elements("css selector", f'[class*="st-key-{state}-ask-"]')


def value_style(card) -> tuple[float, str]:
    """(font size in px, colour) of a card's answer as the browser draws it."""
    value = card.find_element("css selector", '[data-testid="stMetricValue"]')
    size = float(value.value_of_css_property("font-size").removesuffix("px"))
    return size, value.value_of_css_property("color")


def engine(pipeline, question: str, decoding: str):
    """The rule and the token sources recomputed from a fresh trace and a fresh closed-book row."""
    trace = pipeline.run(question, Config())
    c = trace.answer(decoding)
    closed = pipeline.closed_book_scores(trace.query, [c.token_ids])[0]
    found = candidate_sources(trace.log_prior, c, closed, passage_texts(trace))
    return candidate_confidence(trace, c, closed), found


def test_a_guess_reads_as_a_guess_and_a_confident_answer_does_not(server, browser, default_pipeline):
    browser.get(server + "/")
    wait_for(
        browser,
        lambda: answered(browser, CONFIDENT) and "Herman Melville" in body_text(browser),
        300,
        "the default answer",
    )
    sure_conf, _ = engine(default_pipeline, CONFIDENT, "rag-token")
    assert not sure_conf.low, sure_conf
    assert len(cards(browser, "sure")) == 2 and not cards(browser, "guess")
    assert "Low confidence" not in body_text(browser)
    sure_size, sure_colour = value_style(cards(browser, "sure")[0])
    browser.save_screenshot(str(ARTIFACTS / "confidence-sure.png"))

    type_into(browser, "Question", GUESS)
    wait_for(browser, lambda: answered(browser, GUESS) and cards(browser, "guess"), 240, "the guessed answer")
    browser.save_screenshot(str(ARTIFACTS / "confidence-guess.png"))
    conf, _ = engine(default_pipeline, GUESS, "rag-token")
    assert conf.low, conf  # the question is one the model guesses at, by the engine's own rule
    card = next(c for c in cards(browser, "guess") if "RAG-Token" in c.text)
    text = " ".join(card.text.split())
    assert "Low confidence" in text
    reason = conf.summary()
    assert reason[:1].upper() + reason[1:] + "." in text, (text, reason)  # the engine's words, the engine's p
    assert f"p = {conf.p:.3g}" in text
    size, colour = value_style(card)
    assert size < 0.8 * sure_size, (size, sure_size)  # smaller type, not only another colour
    assert colour != sure_colour


def test_token_sources_are_named_for_what_they_measure(server, browser, default_pipeline):
    """ "1989" is in the top passage and already known to the model: the strip says so in words, and
    the line under it explains each category it shows; Token vs Sequence says how its strips relate."""
    question = "In what year did the Berlin Wall fall?"
    browser.get(server + "/")
    wait_for(browser, lambda: answered(browser, CONFIDENT), 300, "the default answer")
    type_into(browser, "Question", question)
    wait_for(
        browser,
        lambda: answered(browser, question) and "RAG-Token: " in body_text(browser),
        240,
        "the Berlin Wall answer",
    )
    _, found = engine(default_pipeline, question, "rag-token")
    text = body_text(browser)
    assert f"RAG-Token: {share_line(found)}" in text
    shown = {kind(s) for s in found} & set(MEANINGS)
    assert KNOWN in shown, found  # the user's case: in the top passage, and the model knew it already
    for k in shown:
        assert f"{LABELS[k].capitalize()}: {MEANINGS[k]}" in text, k
    assert "from the model's weights" not in text
    browser.save_screenshot(str(ARTIFACTS / "token-sources-named.png"))
    open_page(browser, "token_vs_sequence", "Token vs Sequence")
    note = "Both strips credit a token by the same responsibility r_i(z)"
    wait_for(browser, lambda: note in body_text(browser), 120, "the note on the two strips")
