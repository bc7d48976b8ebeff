"""A real browser end to end: start the server, ask a question in headless Chromium, open every
page, save a screenshot of each under test-artifacts/browser/.

Needs Debian's chromium and chromium-driver (CI installs them). Without them the test is skipped,
unless RAG_LOUPE_REQUIRE_BROWSER=1 (as in CI), where a missing browser is a failure.
"""
import os
import shutil
import socket
import subprocess
import sys
import time
import urllib.request

import pytest

from conftest import ROOT

ARTIFACTS = ROOT / "test-artifacts" / "browser"
PAGES = [("", "Ask"), ("map", "Map"), ("token_vs_sequence", "Token vs Sequence"), ("citations", "Citations"),
         ("index_swap", "Index swap"), ("by_hand", "By hand"), ("corpus", "Corpus"), ("eval", "Eval")]
CHROMIUM, DRIVER = shutil.which("chromium"), shutil.which("chromedriver")

if not (CHROMIUM and DRIVER):
    if os.environ.get("RAG_LOUPE_REQUIRE_BROWSER") == "1":
        raise RuntimeError("chromium and chromedriver are required for the browser test (apt-get install chromium chromium-driver)")
    pytest.skip("chromium / chromedriver not installed", allow_module_level=True)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture(scope="module")
def server():
    port = free_port()
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    log = open(ARTIFACTS / "server.log", "w")
    proc = subprocess.Popen([sys.executable, "-m", "streamlit", "run", str(ROOT / "app" / "main.py"),
                             "--server.port", str(port), "--server.headless", "true"],
                            cwd=ROOT, stdout=log, stderr=subprocess.STDOUT)
    url = f"http://127.0.0.1:{port}"
    deadline = time.time() + 120
    while time.time() < deadline:
        try:
            if urllib.request.urlopen(url + "/_stcore/health", timeout=2).read() == b"ok":
                break
        except OSError:
            time.sleep(0.5)
    else:
        proc.terminate()
        pytest.fail("the Streamlit server did not start")
    yield url
    proc.terminate()
    proc.wait(timeout=20)
    log.close()


@pytest.fixture(scope="module")
def browser():
    driver = new_browser("1400,1600")
    yield driver
    driver.quit()


def new_browser(window: str = "1200,1400"):
    """A headless Chromium with no background traffic (each one is its own Streamlit session)."""
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    opts = webdriver.ChromeOptions()
    opts.binary_location = CHROMIUM
    for flag in ("--headless=new", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
                 "--disable-background-networking", "--disable-component-update", "--disable-sync",
                 "--disable-dev-shm-usage", f"--window-size={window}"):
        opts.add_argument(flag)
    return webdriver.Chrome(service=Service(DRIVER), options=opts)


def wait_for(driver, predicate, timeout, what):
    deadline = time.time() + timeout
    while time.time() < deadline:
        try:
            if predicate():
                return
        except Exception:  # the page is still rendering: elements come and go
            pass
        time.sleep(0.5)
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    driver.save_screenshot(str(ARTIFACTS / "timeout.png"))
    pytest.fail(f"timed out waiting for {what}")


def body_text(driver) -> str:
    from selenium.webdriver.common.by import By

    return driver.find_element(By.TAG_NAME, "body").text


def settled(driver) -> bool:
    """Streamlit shows a status widget while a script runs; settled = no 'Running' indicator."""
    from selenium.webdriver.common.by import By

    return not driver.find_elements(By.CSS_SELECTOR, '[data-testid="stStatusWidget"]')


def showing(driver, title: str) -> bool:
    """The page's own title is `title` (the sidebar lists every title, so body text is not enough)."""
    from selenium.webdriver.common.by import By

    return any(h.text.strip() == title for h in driver.find_elements(By.TAG_NAME, "h1"))


def ready(driver, path: str) -> bool:
    """Page-specific: the work a page shows progress for has finished (the status widget alone can
    miss a page that is still inside an `st.status`)."""
    if path == "index_swap":  # both indexes answered
        text = body_text(driver)
        return "RAG-Sequence (2018 index)" in text and "Answering on" not in text
    return True


def charts_drawn(driver) -> bool:
    """Every plotly chart on the page has drawn its SVG."""
    from selenium.webdriver.common.by import By

    charts = driver.find_elements(By.CSS_SELECTOR, '[data-testid="stPlotlyChart"]')
    return all(c.find_elements(By.CSS_SELECTOR, "svg.main-svg") for c in charts)


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
