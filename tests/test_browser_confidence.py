"""In a real browser: an answer the model is guessing at reads as a guess (smaller grey type, a
"Low confidence" badge, the reason in words) and a confident one does not; the token strips name
their categories for what they measure, with one line of explanation under each strip, and Token
vs Sequence says whether its two strips agree. (On the test worker's shared server, `served` in conftest.)"""

import pytest

from app.eval import eval_views
from app.ui.source_views import share_line
from rag_core.analysis.attribution import stuffed_worth
from rag_core.analysis.attribution.token_sources import (
    KNOWN,
    LABELS,
    MEANINGS,
    candidate_sources,
    kind,
    passage_texts,
)
from rag_core.analysis.diagnosis.confidence import candidate_confidence
from rag_core.analysis.evaluation import runs as ev
from rag_core.analysis.evaluation import shipped_runs
from rag_core.config import AnswerSettings
from rag_core.marginals import p_text

from browser_kit import (  # noqa: F401
    ARTIFACTS,
    body_text,
    browser,
    choose_shipped_run,
    open_page,
    selected,
    settled,
    type_into,
    wait_for,
)

# a real server and Chromium: every test here takes over 5 s on 2 cores (measured with --durations)
pytestmark = pytest.mark.slow

CONFIDENT = "Who wrote Moby-Dick?"  # the default question: "Herman Melville", p well above one half
GUESS = "Which HTML tag makes text bold?"  # the default stack: "CSS" under both marginals, the stuffed
# reading another answer, so the rule flags it


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
    """The rule and the token sources recomputed from a fresh trace (with its stuffed reading's
    answers, which the rule compares as the page does; not what each passage is worth, which the
    rule never reads) and a fresh closed-book row."""
    trace = pipeline.with_stuffed(pipeline.run(question, AnswerSettings()), explain=False)
    c = trace.answer(decoding)
    closed = pipeline.closed_book_scores(trace.question, [c.token_ids])[0]
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
    assert len(cards(browser, "sure")) == 3  # RAG-Token, RAG-Sequence and the stuffed reading
    assert not cards(browser, "guess")
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
    # the Diagnose panel's counterfactual with nothing changed: the same answer, judged the same way
    unchanged = browser.find_elements("css selector", '[class*="st-key-guess-counterfactual-rag-token"]')
    assert len(unchanged) == 1, [e.get_attribute("class") for e in cards(browser, "sure")]
    assert reason[:1].upper() + reason[1:] + "." in " ".join(unchanged[0].text.split())


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


def metrics(driver) -> list[tuple[str, str, str]]:
    """(label, value, delta) of every metric on the page, in page order."""

    def part(m, name: str) -> str:
        found = m.find_elements("css selector", f'[data-testid="stMetric{name}"]')
        return found[0].text.strip() if found else ""

    return [
        (part(m, "Label"), part(m, "Value"), part(m, "Delta"))
        for m in driver.find_elements("css selector", '[data-testid="stMetric"]')
    ]


def test_eval_says_how_often_the_model_was_guessing(server, browser):
    """Eval judges the run's answers by the rule of every answer card: for each reading, the share of
    its wrong answers and of its right ones the rule flags, as counted here from the run file the
    page shows; and the shipped run's stuffed reading, with how often it leans on the passage the
    mixture cites."""
    browser.get(server + "/")
    wait_for(browser, lambda: answered(browser, CONFIDENT), 300, "the default answer")
    open_page(browser, "eval", "Eval")
    wait_for(browser, lambda: "Wrong answers flagged" in body_text(browser), 120, "the confidence section")
    label = choose_shipped_run(browser)
    wait_for(browser, lambda: "Wrong answers flagged" in body_text(browser), 120, "its confidence section")
    path = next(p for p in shipped_runs.current_runs() if eval_views.run_label(p) == label)
    run = ev.load_run(path)
    shown = [(v, delta) for name, v, delta in metrics(browser) if name == "Wrong answers flagged"]
    readings = ("rag-token", "rag-sequence", "stuffed")
    assert len(shown) == len(readings), shown
    for (value, delta), mode in zip(shown, readings):
        judged = [r.modes[mode] for r in run.results]
        assert all(m.low_confidence is not None for m in judged), mode  # every answer was judged
        wrong, right = [m for m in judged if not m.em], [m for m in judged if m.em]
        share = [f"{100 * sum(bool(m.low_confidence) for m in ms) / len(ms):.1f}%" for ms in (wrong, right)]
        assert (value, delta) == (share[0], f"{share[1]} of the right ones"), (mode, value, delta)
    # the run was made with the stuffed reading: where it leans beside where the mixture cites
    read = [r.modes["stuffed"] for r in run.results if "stuffed" in r.modes]
    assert len(read) == len(run.results)
    same = sum(m.top_passage == m.mixture_top for m in read)
    assert f"They are the same passage in {same} of {len(read)} questions." in body_text(browser)
    heading = browser.find_element("xpath", '//h3[contains(., "Can p be trusted?")]')
    browser.execute_script("arguments[0].scrollIntoView()", heading)
    browser.save_screenshot(str(ARTIFACTS / "confidence-eval.png"))


def test_the_stuffed_reading_on_ask_token_vs_sequence_and_citations(server, browser, default_pipeline):
    """Issue 35 on the pages: the third answer card, what each passage is worth to the stuffed
    reading beside the mixture's posterior of the same answer (the finding in words, computed from
    a fresh trace), its answer stepped on Token vs Sequence, its worth token by token on Citations."""
    fresh = default_pipeline.with_stuffed(default_pipeline.run(CONFIDENT, AnswerSettings()))
    w = stuffed_worth.of(fresh)
    lean = fresh.hits[w.leans_on]
    browser.get(server + "/")
    worth = "What each passage is worth to the stuffed reading"
    wait_for(browser, lambda: answered(browser, CONFIDENT) and worth in body_text(browser), 300, "the worth")
    card = [v for name, v, _ in metrics(browser) if name == "Stuffed (the 5 passages in one prompt)"]
    assert card == [w.answer.answer], card
    said = f"The stuffed reading leans most on z{lean.rank} ({lean.passage.title})"
    assert said in body_text(browser)
    assert ("cites too" in body_text(browser)) == w.agree
    heading = browser.find_element("xpath", f'//h3[contains(., "{worth}")]')
    browser.execute_script("arguments[0].scrollIntoView()", heading)
    browser.save_screenshot(str(ARTIFACTS / "stuffed-ask.png"))
    open_page(browser, "token_vs_sequence", "Token vs Sequence")
    stepped = "The stuffed reading, step by step"
    wait_for(browser, lambda: stepped in body_text(browser), 120, "the stepped reading")
    shown = {name: v for name, v, _ in metrics(browser)}
    assert shown["p(y_i | x, all K, y_<i)"] == p_text(w.p_token[0])
    open_page(browser, "citations", "Citations")
    token = "Token by token: what taking a passage out costs the stuffed answer"
    wait_for(browser, lambda: token in body_text(browser), 120, "the token worth")
    heading = browser.find_element("xpath", f'//h3[contains(., "{token}")]')
    browser.execute_script("arguments[0].scrollIntoView()", heading)
    browser.save_screenshot(str(ARTIFACTS / "stuffed-citations.png"))
