"""Every page at the two widths a laptop shows it (1280 and 1400 px): no table header is cut by its
column, and the Sankey's labels read against the links they lie across. Screenshots of each page
at each width go under test-artifacts/browser/layout-*.png."""

import pytest

from browser_kit import (  # noqa: F401
    ARTIFACTS,
    PAGES,
    body_text,
    browser,
    charts_drawn,
    clipped_headers,
    clipped_tables,
    drawn,
    faint_sankey_labels,
    flip,
    ready,
    settled,
    showing,
    toggled,
    wait_for,
)

# a real server and Chromium: every test here takes over 5 s on 2 cores (measured with --durations)
pytestmark = pytest.mark.slow

WIDTHS = (1280, 1400)
SENTENCES = "Read it with each sentence left out (one batch)"  # Citations' table drawn on demand


def test_no_table_header_is_cut_and_the_sankey_reads_at_1280_and_1400_px(server, browser):
    from selenium.webdriver.common.by import By

    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    browser.get(server + "/")
    wait_for(
        browser,
        lambda: "Herman Melville" in body_text(browser) and settled(browser),
        300,
        "the default answer",
    )
    cut, faint, sankey = {}, {}, []
    for path, title in PAGES:
        if path:  # the sidebar link, as a user goes (a new URL would start a new session)
            browser.find_element(
                By.XPATH, f'//a[@data-testid="stSidebarNavLink"][contains(@href, "/{path}")]'
            ).click()
        wait_for(
            browser,
            lambda: showing(browser, title) and settled(browser) and ready(browser, path),
            300,
            f"the {title} page",
        )
        if path == "citations":  # its sentence table is drawn on demand: drawn here, to be measured too
            flip(browser, SENTENCES)
            wait_for(browser, lambda: toggled(browser, SENTENCES) and settled(browser), 120, "the sentences")
        for width in WIDTHS:
            browser.set_window_size(width, 1600)
            drawn(browser, f"{title} at {width} px", 60)  # grids and charts lay out again at the width
            browser.save_screenshot(str(ARTIFACTS / f"layout-{path or 'ask'}-{width}.png"))
            cut[(title, width)] = clipped_headers(browser) + clipped_tables(browser)  # and no sideways scroll
            faint[(title, width)] = faint_sankey_labels(browser)
        if path == "eval":  # the check saw the Sankey at all: Eval compares two runs from the first start
            sankey = browser.find_elements(
                By.CSS_SELECTOR, '[data-testid="stPlotlyChart"] .sankey .node-label'
            )
        browser.set_window_size(WIDTHS[0], 1600)
    found = {
        "cut headers": {k: v for k, v in cut.items() if v},
        "faint labels": {k: v for k, v in faint.items() if v},
    }
    assert found == {"cut headers": {}, "faint labels": {}}
    assert sankey
