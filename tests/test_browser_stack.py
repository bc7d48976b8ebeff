"""The tiny random DPR + BART stack on the real server's command line (`streamlit run app/main.py
-- --question-encoder DIR ...`), in headless Chromium: Ask, Map, Token vs Sequence and Citations
render with no exception and each names the stack in its first line, as a user reads it."""

import pytest

from rag_core.toys.tiny_models import build_tiny_stack

from browser_kit import (
    ARTIFACTS,
    PAGES,
    body_text,
    drawn,
    new_browser,
    running_server,
    settled,
    showing,
    throwaway_cache,
    wait_for,
)

# a real server and Chromium: every test here takes over 5 s on 2 cores (measured with --durations)
pytestmark = pytest.mark.slow

SEEN = ("map", "token_vs_sequence", "citations")


@pytest.fixture(scope="module")
def tiny_server(tmp_path_factory):
    """A server of its own on the tiny random DPR + BART stack (`toys.tiny_models`) and its small
    corpus, on a throw-away cache: the paper's code path behind the pages."""
    tiny = build_tiny_stack(tmp_path_factory.mktemp("tiny-browser"))
    flags = (
        *("--question-encoder", str(tiny["dpr_q"]), "--ctx-encoder", str(tiny["dpr_ctx"])),
        *("--generator", str(tiny["bart"]), "--corpus", str(tiny["corpus"])),
    )
    cache = throwaway_cache(tmp_path_factory.mktemp("tiny-stack-cache"))
    with running_server(cache, "server-tiny-stack.log", flags) as (url, _):
        yield url


def test_the_pages_name_the_stack_of_the_command_line(tiny_server):
    from selenium.webdriver.common.by import By

    driver = new_browser("1280,1600")
    try:
        driver.get(tiny_server + "/")
        wait_for(
            driver,
            lambda: "RAG-Sequence" in body_text(driver) and settled(driver),
            300,
            "the tiny stack's answer",
        )
        named = "Model: tiny-browser0/dpr_q retriever · tiny-browser0/bart (command line)"  # in words
        for path, title in [("", "Ask")] + [p for p in PAGES if p[0] in SEEN]:
            if path:
                driver.find_element(
                    By.XPATH, f'//a[@data-testid="stSidebarNavLink"][contains(@href, "/{path}")]'
                ).click()
                wait_for(driver, lambda: showing(driver, title) and settled(driver), 300, f"the {title} page")
                drawn(driver, f"the charts of {title}", 60)
            main = driver.find_element(By.CSS_SELECTOR, '[data-testid="stMain"]')
            first = main.text.strip().splitlines()[0]
            assert first == named, (title, first)
            errors = driver.find_elements(By.CSS_SELECTOR, '[data-testid="stException"]')
            assert not errors, f"{title}: {errors[0].text[:300]}"
            driver.save_screenshot(str(ARTIFACTS / f"tiny-{path or 'ask'}.png"))
    finally:
        driver.quit()
