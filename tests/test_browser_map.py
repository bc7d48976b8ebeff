"""The Map page in a real browser: the rank numbers of the top-K stay clear of the question's star,
the status line says what was done (which layout; shipped, loaded from the cache or fitted), a click
moves the query (the rings follow it, the zoom frames it and is kept across pages), and the Train
page after such a click still starts from the question's own query unless asked, its log p(y|x)
chart drawing a negligible change as a flat line. Screenshots go under test-artifacts/browser/.
(The rank numbers and the moved query read the retriever alone, so those tests run on the worker's
tiny-generator server, `tiny_served`; the others on its trained one, `served`.)"""

import re

import pytest

from browser_kit import (  # noqa: F401
    ARTIFACTS,
    body_text,
    browser,
    charts_drawn,
    choose,
    click_when_shown,
    drawn,
    flip,
    new_browser,
    open_page,
    running_server,
    settled,
    showing,
    throwaway_cache,
    toggled,
    wait_for,
)

# a real server and Chromium: every test here takes over 5 s on 2 cores (measured with --durations)
pytestmark = pytest.mark.slow

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
    click_when_shown(
        driver, f'//*[@data-testid="stRadio"]//label[.//p[normalize-space()="{name}"]]', f"the {name} choice"
    )


def zoomed_marks(driver) -> dict:
    """Turn "Zoom to the question" on (it is kept across pages, so it may be on already) and read the
    marks once the zoomed map is drawn."""
    if not toggled(driver, "Zoom to the question"):
        flip(driver, "Zoom to the question")
    wait_for(
        driver,
        lambda: toggled(driver, "Zoom to the question") and settled(driver) and charts_drawn(driver),
        120,
        "the zoomed map",
    )
    drawn(driver, "the zoomed map drawn")
    return driver.execute_script(READ_MARKS)


def test_rank_numbers_stay_clear_of_the_question_with_the_zoom_on(tiny_served, browser):
    """With "Zoom to the question" on, the passages nearest the question sit close to its star: every
    rank number is drawn, inside the plot, none under the star and none on another (they used to
    sit centred on their rings, and ranks 1-3 hid under the star). Two questions: the default one,
    then an example picked on the Ask page."""
    browser.get(tiny_served[0] + "/")
    wait_for(
        browser,
        lambda: "Question: “Who wrote Moby-Dick?”" in body_text(browser) and settled(browser),
        300,
        "the default answer",
    )
    for question in ("Who wrote Moby-Dick?", "Who created the video game Tetris?"):
        if question != "Who wrote Moby-Dick?":
            open_page(browser, "", "Ask")
            choose(browser, "Example questions", question)
            wait_for(
                browser,
                lambda: f"Question: “{question}”" in body_text(browser) and settled(browser),
                240,
                "the example's answer",
            )
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
        outside = [
            t
            for t, b in labels.items()
            if b[0] < plot[0] - 1 or b[2] > plot[2] + 1 or b[1] < plot[1] - 1 or b[3] > plot[3] + 1
        ]
        assert not outside, f"{question}: rank numbers {outside} cut off by the zoom: {labels}, plot {plot}"


def test_the_status_names_the_layout_and_what_was_done(
    server, served_cache, browser, tmp_path, tiny_generator
):
    """The map's status line says which layout it shows (PCA is not called UMAP) and what happened:
    the `wiki` index's UMAP map is "the shipped base layout" (never "fitted in 0.0 s"), its PCA map is
    made once, and a new server process on a cache that shares the first one's finds it there:
    "loaded from the cache".
    The line shows while a map is prepared, so the test opens maps no other test of the module
    opens."""
    browser.get(server + "/map")
    wait_for(browser, lambda: map_drawn(browser), 300, "the map")
    choose(browser, "Index", "wiki", "sidebar")
    wait_for(
        browser, lambda: settled(browser) and "UMAP map of" in body_text(browser), 300, "the wiki index's map"
    )
    text = body_text(browser)
    assert "the shipped base layout" in text and "fitted in 0.0 s" not in text, text
    pick_layout(browser, "PCA")
    # the status line once the map is made and saved, not "Preparing the PCA map of …": the second
    # server below links what this server's cache holds at that moment
    fitted = re.compile(r"PCA map of [\d,]+ passages: (fitted in|loaded from the cache)")
    wait_for(browser, lambda: settled(browser) and fitted.search(body_text(browser)), 120, "the PCA map")
    browser.save_screenshot(str(ARTIFACTS / "journey-map-pca.png"))
    assert "UMAP map of" not in body_text(browser)

    # A new process has none of the first one's memory: the PCA map comes from the cache folder.
    # It shares what the first server's cache holds now, the PCA fit just made among it. A map is
    # the retriever's alone, so the second server runs the tiny generator (`--generator`): its
    # answers cost nothing and its map is the same.
    second_cache = throwaway_cache(tmp_path / "second-cache", served_cache)
    with running_server(second_cache, "server-2.log", ("--generator", str(tiny_generator))) as (url, _):
        second = new_browser("1280,1400")
        try:
            second.get(url + "/map")
            wait_for(second, lambda: map_drawn(second), 300, "the second server's map")
            choose(second, "Index", "wiki", "sidebar")
            wait_for(
                second, lambda: settled(second) and "UMAP map of" in body_text(second), 300, "its wiki map"
            )
            pick_layout(second, "PCA")
            wait_for(
                second, lambda: settled(second) and "PCA map of" in body_text(second), 120, "its PCA map"
            )
            second.save_screenshot(str(ARTIFACTS / "journey-map-loaded.png"))
            line = next(t for t in body_text(second).splitlines() if "PCA map of" in t)
            assert line.endswith("loaded from the cache"), line
        finally:
            second.quit()


# The map's marks as the browser holds them (typed arrays made plain) and the axis ranges it shows.
READ_MAP = """
const gd = document.querySelector('.st-key-passage-map .js-plotly-plot');
const named = n => gd._fullData.find(t => t.name && t.name.startsWith(n));
const pick = n => { const t = named(n); if (!t) return null;
  return {x: Array.from(t.x), y: Array.from(t.y), hover: t.hovertext ? Array.from(t.hovertext) : []}; };
return {rings: pick('top-'), lines: pick('query → top-K'), moved: pick('moved query'),
        x: Array.from(gd._fullLayout.xaxis.range), y: Array.from(gd._fullLayout.yaxis.range)};
"""

# The page position of a drawn dot (away from the plot's edges) ranked by its map distance from the
# question's star: `share` 1 is the farthest, 0.5 the median one.
DOT_AT = """
const share = arguments[0];
const gd = document.querySelector('.st-key-passage-map .js-plotly-plot');
gd.scrollIntoView({block: 'center'});
const xa = gd._fullLayout.xaxis, ya = gd._fullLayout.yaxis;
const q = gd._fullData.find(t => t.name === 'question');
const dots = [];
for (const t of gd._fullData.filter(t => t.legendgroup === 'topics')) {
  for (let i = 0; i < t.x.length; i++) {
    const px = xa.l2p(t.x[i]), py = ya.l2p(t.y[i]);
    if (px < 60 || px > xa._length - 60 || py < 60 || py > ya._length - 60) continue;
    dots.push({d: Math.hypot(t.x[i] - q.x[0], t.y[i] - q.y[0]), px, py});
  }
}
dots.sort((a, b) => a.d - b.d);
const dot = dots[Math.round(share * (dots.length - 1))];
const r = gd.querySelector('.nsewdrag').getBoundingClientRect();
return [r.left + dot.px, r.top + dot.py];
"""

# The Train page's walk: log p(y|x) per step and the range its axis shows.
READ_WALK = """
const gd = document.querySelector('.st-key-train_lines .js-plotly-plot');
return {y: Array.from(gd._fullData[0].y), range: Array.from(gd._fullLayout.yaxis.range)};
"""
FROM_MOVED = "Start from the query you moved on the Map"


def titles(marks: dict) -> list[str]:
    """The passage titles of the numbered rings, in rank order (from their hover text)."""
    return [h.split("<br>")[1] for h in marks["rings"]["hover"]]


def inside(x: float, y: float, marks: dict) -> bool:
    return marks["x"][0] < x < marks["x"][1] and marks["y"][0] < y < marks["y"][1]


def move_the_query(driver, share: float) -> None:
    """Click a dot, as a user moving the query by hand: the one at `share` of the way from the nearest
    to the farthest from the question's star (`DOT_AT`)."""
    from selenium.webdriver.common.actions.action_builder import ActionBuilder

    x, y = driver.execute_script(DOT_AT, share)
    action = ActionBuilder(driver)
    action.pointer_action.move_to_location(int(x), int(y))
    action.pointer_action.pause(0.5)  # plotly finds the point under the pointer as it hovers
    action.pointer_action.click()
    action.perform()
    wait_for(
        driver,
        lambda: "The query, moved by hand" in body_text(driver) and map_drawn(driver),
        120,
        "the moved query",
    )
    drawn(driver, "the moved query drawn")


def train_drawn(driver) -> bool:
    return showing(driver, "Train") and settled(driver) and charts_drawn(driver)


def test_the_rings_follow_a_moved_query_the_zoom_frames_it_and_stays_on(tiny_served, browser):
    """Click a dot far from the question: the numbered rings leave the question's top-K for the moved
    query's and its lines start at the open star (the rings used to stay on the question's); "Zoom to
    the question" then frames the open star and its rings (it used to frame only the question's, the
    star left outside); after a visit to the Train page the zoom is still on (it used to reset)."""
    browser.get(tiny_served[0] + "/map")
    wait_for(browser, lambda: map_drawn(browser), 300, "the map")
    drawn(browser, "the map drawn")
    assert not toggled(browser, "Zoom to the question")
    before = browser.execute_script(READ_MAP)
    move_the_query(browser, 1.0)
    after = browser.execute_script(READ_MAP)
    star = (after["moved"]["x"][0], after["moved"]["y"][0])
    assert titles(after) != titles(before), titles(after)
    assert after["lines"]["x"][0::3] == [star[0]] * len(titles(after))  # each segment: star, ring, gap
    assert after["lines"]["y"][0::3] == [star[1]] * len(titles(after))

    flip(browser, "Zoom to the question")
    for visit in ("zoomed", "back from the Train page"):
        wait_for(
            browser,
            lambda: toggled(browser, "Zoom to the question") and map_drawn(browser),
            120,
            f"the zoomed map, {visit}",
        )
        drawn(browser, f"the zoomed map drawn, {visit}")
        zoomed = browser.execute_script(READ_MAP)
        browser.save_screenshot(str(ARTIFACTS / f"map-moved-{visit.split()[0]}.png"))
        assert (zoomed["moved"]["x"][0], zoomed["moved"]["y"][0]) == star
        assert titles(zoomed) == titles(after)
        assert inside(*star, zoomed), f"{visit}: the open star at {star} is outside the view {zoomed}"
        out = [
            t
            for t, x, y in zip(titles(zoomed), zoomed["rings"]["x"], zoomed["rings"]["y"])
            if not inside(x, y, zoomed)
        ]
        assert not out, f"{visit}: rings outside the view: {out}"
        if visit == "zoomed":
            open_page(browser, "train", "Train")
            open_page(browser, "map", "Map")


def test_train_starts_from_the_question_after_a_click_on_the_map(server, browser):
    """A click on the Map leaves the Train page's walk where it was: from the question's own query,
    with "Start from the query you moved on the Map" off (it used to be on after any click, so the
    walk started where nothing pulls). Turned on, from a dot halfway out, log p(y|x) moves by less than 0.01:
    the page says "No measurable change" and the chart's axis spans at least 0.5, so the line is flat
    (it used to stretch a 0.001 change over the whole height). The choice is kept across a visit."""
    browser.get(server + "/train")
    wait_for(browser, lambda: train_drawn(browser), 600, "the Train page")
    drawn(browser, "the Train page drawn")
    own = browser.execute_script(READ_WALK)
    assert FROM_MOVED not in body_text(browser)
    assert "No measurable change" not in body_text(browser)
    assert max(own["y"]) - min(own["y"]) > 0.01, own  # the question's own query climbs

    open_page(browser, "map", "Map")
    move_the_query(browser, 0.5)  # a dot halfway out, where the top K is all of one unrelated subject
    open_page(browser, "train", "Train")
    assert FROM_MOVED in body_text(browser)
    assert not toggled(browser, FROM_MOVED)
    assert browser.execute_script(READ_WALK)["y"] == own["y"]

    flip(browser, FROM_MOVED)
    for visit in ("turned on", "back from the Map"):
        wait_for(
            browser,
            lambda: toggled(browser, FROM_MOVED) and train_drawn(browser),
            600,
            f"the walk from the moved query, {visit}",
        )
        drawn(browser, f"the walk drawn, {visit}")
        walk = browser.execute_script(READ_WALK)
        browser.save_screenshot(str(ARTIFACTS / f"train-from-moved-{visit.split()[0]}.png"))
        assert walk["y"] != own["y"]
        assert max(abs(v - walk["y"][0]) for v in walk["y"]) < 0.01, walk  # there, nothing pulls
        assert "No measurable change" in body_text(browser)
        lo, hi = walk["range"]
        assert hi - lo >= 0.5 - 1e-9, walk["range"]
        assert lo < min(walk["y"]) and max(walk["y"]) < hi, walk
        if visit == "turned on":
            open_page(browser, "map", "Map")
            open_page(browser, "train", "Train")
