"""A real browser end to end: start the server, ask a question in headless Chromium, open every
page, save a screenshot of each under test-artifacts/browser/; and eight sessions at once."""
import time
import urllib.request

from browser_kit import (ARTIFACTS, PAGES, body_text, browser, charts_drawn, new_browser, ready, server,  # noqa: F401
                         settled, showing, wait_for)


def test_ask_and_visit_every_page(server, browser):
    from selenium.webdriver.common.by import By
    from selenium.webdriver.common.keys import Keys

    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    browser.get(server + "/")
    # the default question is answered on first load (models load on a cold server: allow time)
    wait_for(browser, lambda: "Herman Melville" in body_text(browser) and settled(browser), 300, "the default answer")
    box = browser.find_element(By.CSS_SELECTOR, 'input[aria-label="Question"]')
    box.send_keys(Keys.CONTROL, "a")
    box.send_keys("Who painted the Mona Lisa?")
    box.send_keys(Keys.ENTER)
    wait_for(browser, lambda: "Leonardo" in body_text(browser) and settled(browser), 240, "the new answer")
    browser.save_screenshot(str(ARTIFACTS / "ask.png"))
    assert not browser.find_elements(By.CSS_SELECTOR, '[data-testid="stException"]')

    for path, title in PAGES[1:]:
        # click the sidebar link (a new URL would start a new session and forget the question)
        link = browser.find_element(By.XPATH, f'//a[@data-testid="stSidebarNavLink"][contains(@href, "/{path}")]')
        link.click()
        wait_for(browser, lambda: showing(browser, title) and settled(browser) and ready(browser, path), 300,
                 f"the {title} page")
        time.sleep(1.5)  # charts are drawn by the browser after the script has finished
        wait_for(browser, lambda: charts_drawn(browser), 60, f"the charts of {title}")
        browser.save_screenshot(str(ARTIFACTS / f"{path}.png"))
        errors = browser.find_elements(By.CSS_SELECTOR, '[data-testid="stException"]')
        assert not errors, f"{title}: {errors[0].text[:300]}"


# ---------------------------------------------------------------------------------- concurrent sessions

SESSION_QUESTIONS = ["Who painted the Mona Lisa?", "In which city is the Taj Mahal?", "In what year did the Berlin Wall fall?",
                     "How many keys does a modern piano have?", "Who created the video game Tetris?",
                     "In what year did the Chernobyl nuclear disaster occur?", "Who wrote Pride and Prejudice?",
                     "What is the capital of Australia?"]


def answer_shown(driver) -> str:
    """The RAG-Token answer as the Ask page shows it (the first metric's value)."""
    from selenium.webdriver.common.by import By

    values = driver.find_elements(By.CSS_SELECTOR, '[data-testid="stMetricValue"]')
    return values[0].text.strip() if values else ""


def test_eight_sessions_at_once(server, default_pipeline):
    """Eight browser sessions ask eight different questions at the same moment; each gets the answer
    the engine gives to its own question (no cross-talk), and the server stays up."""
    from selenium.webdriver.common.by import By
    from selenium.webdriver.common.keys import Keys

    expected = [default_pipeline.run(q).answer("rag-token").answer or "(empty)" for q in SESSION_QUESTIONS]
    assert len(set(expected)) == len(expected), expected  # distinct, so a mix-up would show
    drivers = [new_browser() for _ in SESSION_QUESTIONS]
    try:
        for d in drivers:
            d.get(server + "/")
        for d in drivers:  # every session has its own first answer before the burst
            wait_for(d, lambda d=d: "Herman Melville" in body_text(d) and settled(d), 300, "the default answer")
        for d, q in zip(drivers, SESSION_QUESTIONS):  # the burst: eight questions submitted back to back
            box = d.find_element(By.CSS_SELECTOR, 'input[aria-label="Question"]')
            box.send_keys(Keys.CONTROL, "a")
            box.send_keys(q)
            box.send_keys(Keys.ENTER)
        for i, (d, q, want) in enumerate(zip(drivers, SESSION_QUESTIONS, expected)):
            wait_for(d, lambda d=d, want=want: answer_shown(d) == want and settled(d), 400, f"session {i}'s answer {want!r}")
            shown = body_text(d)
            assert q in d.find_element(By.CSS_SELECTOR, 'input[aria-label="Question"]').get_attribute("value")
            others = [w for w in expected if w != want and w not in want]
            assert not [w for w in others if f"\n{w}\n" in f"\n{shown}\n"], (i, q)
            assert not d.find_elements(By.CSS_SELECTOR, '[data-testid="stException"]')
        d0 = drivers[0]
        d0.save_screenshot(str(ARTIFACTS / "session-0.png"))
        assert urllib.request.urlopen(server + "/_stcore/health", timeout=5).read() == b"ok"
    finally:
        for d in drivers:
            d.quit()
