"""The Map page in a real browser: the rank numbers of the top-K stay clear of the question's star,
and the status line says what was done (which layout; shipped, loaded from the cache or fitted).
Screenshots go under test-artifacts/browser/. (Its own module, so it runs beside the other browser
modules on its own server.)"""
import tempfile
import time
from pathlib import Path

from browser_kit import (ARTIFACTS, body_text, browser, charts_drawn, choose, click_when_shown, flip,  # noqa: F401
                         new_browser, open_page, running_server, served, server, settled, showing, throwaway_cache,
                         toggled, wait_for)

# The boxes the browser gave the map's rank numbers and the question's star (both SVG over the
# WebGL cloud), and the plot area, in page pixels.
READ_MARKS = """
const gd = document.querySelector('.st-key-passage-map .js-plotly-plot');
const uid = prefix => gd._fullData.find(t => t.name.startsWith(prefix)).uid;
const box = e => { const r = e.getBoundingClientRect(); return [r.left, r.top, r.right, r.bottom]; };
const rings = gd.querySelector('.trace' + uid('top-'));
const star = gd.querySelector('.trace' + uid('question') + ' path.point');
return {labels: [...rings.querySelectorAll('.textpoint text')].map(t => [t.textContent, box(t)]),
        star: box(star), plot: box(gd.querySelector('.nsewdrag'))};
"""


def overlap(a, b) -> bool:
    """Two boxes (left, top, right, bottom) share some area."""
    return a[0] < b[2] and b[0] < a[2] and a[1] < b[3] and b[1] < a[3]


def map_drawn(driver) -> bool:
    return showing(driver, "Map") and settled(driver) and charts_drawn(driver)


def pick_layout(driver, name: str) -> None:
    click_when_shown(driver, f'//*[@data-testid="stRadio"]//label[.//p[normalize-space()="{name}"]]', f"the {name} choice")


def zoomed_marks(driver) -> dict:
    """Turn "Zoom to the question" on (widget state goes with the page, so it may be off again)
    and read the marks once the zoomed map is drawn."""
    if not toggled(driver, "Zoom to the question"):
        flip(driver, "Zoom to the question")
    wait_for(driver, lambda: toggled(driver, "Zoom to the question") and settled(driver) and charts_drawn(driver), 120,
             "the zoomed map")
    time.sleep(1.5)  # plotly draws after the script has finished
    return driver.execute_script(READ_MARKS)


def test_rank_numbers_stay_clear_of_the_question_with_the_zoom_on(server, browser):
    """With "Zoom to the question" on, the passages nearest the question sit close to its star: every
    rank number is drawn, inside the plot, none under the star and none on another (they used to
    sit centred on their rings, and ranks 1-3 hid under the star). Two questions: the default one,
    then an example picked on the Ask page."""
    browser.get(server + "/")
    wait_for(browser, lambda: "Herman Melville" in body_text(browser) and settled(browser), 300, "the default answer")
    for question in ("Who wrote Moby-Dick?", "Who created the video game Tetris?"):
        if question != "Who wrote Moby-Dick?":
            open_page(browser, "", "Ask")
            choose(browser, "Example questions", question)
            wait_for(browser, lambda: f"Question: “{question}”" in body_text(browser) and settled(browser), 240,
                     "the example's answer")
        open_page(browser, "map", "Map")
        marks = zoomed_marks(browser)
        browser.save_screenshot(str(ARTIFACTS / f"map-zoomed-{question.split()[-1].strip('?')}.png"))
        labels = {text: b for text, b in marks["labels"]}
        assert sorted(labels, key=int) == [str(r) for r in range(1, 6)], labels
        under = [t for t, b in labels.items() if overlap(b, marks["star"])]
        assert not under, f"{question}: rank numbers {under} under the star at {marks['star']}: {labels}"
        crowded = [(a, b) for a in labels for b in labels if a < b and overlap(labels[a], labels[b])]
        assert not crowded, f"{question}: rank numbers drawn on each other: {crowded}: {labels}"
        plot = marks["plot"]
        outside = [t for t, b in labels.items() if b[0] < plot[0] - 1 or b[2] > plot[2] + 1 or b[1] < plot[1] - 1
                   or b[3] > plot[3] + 1]
        assert not outside, f"{question}: rank numbers {outside} cut off by the zoom: {labels}, plot {plot}"


def test_the_status_names_the_layout_and_what_was_done(server, browser):
    """The map's status line says which layout it shows (PCA is not called UMAP) and what happened:
    the `wiki` index's UMAP map is "the shipped base layout" (never "fitted in 0.0 s"), its PCA map is
    made once, and a new server process on the same cache finds it there: "loaded from the cache".
    The line shows while a map is prepared, so the test opens maps no other test of the module
    opens."""
    browser.get(server + "/map")
    wait_for(browser, lambda: map_drawn(browser), 300, "the map")
    choose(browser, "Index", "wiki", "sidebar")
    wait_for(browser, lambda: settled(browser) and "UMAP map of" in body_text(browser), 300, "the wiki index's map")
    text = body_text(browser)
    assert "the shipped base layout" in text and "fitted in 0.0 s" not in text, text
    pick_layout(browser, "PCA")
    wait_for(browser, lambda: settled(browser) and "PCA map of" in body_text(browser), 120, "the PCA map")
    browser.save_screenshot(str(ARTIFACTS / "journey-map-pca.png"))
    assert "UMAP map of" not in body_text(browser)

    # A new process has none of the first one's memory: the PCA map comes from the cache folder.
    with running_server(throwaway_cache(Path(tempfile.mkdtemp(prefix="browser-cache-"))), "server-2.log") as (url, _):
        second = new_browser("1280,1400")
        try:
            second.get(url + "/map")
            wait_for(second, lambda: map_drawn(second), 300, "the second server's map")
            choose(second, "Index", "wiki", "sidebar")
            wait_for(second, lambda: settled(second) and "UMAP map of" in body_text(second), 300, "its wiki map")
            pick_layout(second, "PCA")
            wait_for(second, lambda: settled(second) and "PCA map of" in body_text(second), 120, "its PCA map")
            second.save_screenshot(str(ARTIFACTS / "journey-map-loaded.png"))
            line = next(t for t in body_text(second).splitlines() if "PCA map of" in t)
            assert line.endswith("loaded from the cache"), line
        finally:
            second.quit()
