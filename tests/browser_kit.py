"""What the real-browser tests share: a Streamlit server in a subprocess, headless Chromium, and
waits that tolerate a page still rendering. Screenshots go under test-artifacts/browser/.

Needs Debian's chromium and chromium-driver (CI installs them). Without them the browser tests are
skipped, unless RAG_LOUPE_REQUIRE_BROWSER=1 (as in CI), where a missing browser is a failure.
"""

import contextlib
import os
import shutil
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pytest

from app.eval import eval_views
from app.state import WAITING
from rag_core.analysis.evaluation import shipped_runs

from conftest import ROOT, cache_sharing

ARTIFACTS = ROOT / "test-artifacts" / "browser"
PAGES = [
    ("", "Ask"),
    ("map", "Map"),
    ("token_vs_sequence", "Token vs Sequence"),
    ("citations", "Citations"),
    ("index_swap", "Index swap"),
    ("by_hand", "By hand"),
    ("train", "Train"),
    ("corpus", "Corpus"),
    ("eval", "Eval"),
    ("replay", "Replay"),
    ("exercises", "Exercises"),
]
CHROMIUM, DRIVER = shutil.which("chromium"), shutil.which("chromedriver")
SHARED_CACHES = ("models", "indexes", "corpus-indexes", "maps")  # not the index swap's rows: a live run
# a test starts must neither read a user's complete run nor write into it

if not (CHROMIUM and DRIVER):
    if os.environ.get("RAG_LOUPE_REQUIRE_BROWSER") == "1":
        raise RuntimeError(
            "chromium and chromedriver are required for the browser test "
            "(apt-get install chromium chromium-driver)"
        )
    pytest.skip("chromium / chromedriver not installed", allow_module_level=True)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def throwaway_cache(folder: Path, source: Path | None = None) -> Path:
    """A cache folder for a test server: the converted models, the built indexes and the map fits
    that `source` (by default the real cache) holds are shared (a link each), so nothing is rebuilt;
    what a test writes (a tiny stack's index, a user index, a map fit, an eval run) stays in
    `folder` and never reaches a user's cache."""
    return cache_sharing(folder, SHARED_CACHES, source)


@contextlib.contextmanager
def running_server(cache: Path, log_name: str = "server.log", flags: tuple[str, ...] = ()):
    """A Streamlit server of the app on a free port, on the cache folder `cache`, started with the
    app's own `flags` (after `--`); yields its URL and its process (and stops it afterwards)."""
    port = free_port()
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    log = open(ARTIFACTS / log_name, "w")
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "streamlit",
            "run",
            str(ROOT / "app" / "main.py"),
            "--server.port",
            str(port),
            "--server.headless",
            "true",
            *(("--", *flags) if flags else ()),
        ],
        cwd=ROOT,
        stdout=log,
        stderr=subprocess.STDOUT,
        env=dict(os.environ, RAG_LOUPE_CACHE=str(cache)),
    )
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
    try:
        yield url, proc
    finally:
        proc.terminate()
        proc.wait(timeout=20)
        log.close()


@pytest.fixture(scope="module")
def browser():
    driver = new_browser("1280,1600")  # the width the pages are checked at
    yield driver
    driver.quit()


def new_browser(window: str = "1200,1400"):
    """A headless Chromium with no background traffic (each one is its own Streamlit session)."""
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    opts = webdriver.ChromeOptions()
    opts.binary_location = CHROMIUM
    for flag in (
        "--headless=new",
        "--no-sandbox",
        "--disable-gpu",
        "--disable-quic",
        "--no-first-run",
        "--disable-background-networking",
        "--disable-component-update",
        "--disable-sync",
        "--disable-dev-shm-usage",
        "--force-prefers-reduced-motion",
        f"--window-size={window}",
    ):
        opts.add_argument(flag)
    driver = webdriver.Chrome(service=Service(DRIVER), options=opts)
    driver.execute_cdp_cmd("Page.addScriptToEvaluateOnNewDocument", {"source": STILL})
    return driver


# No animations or transitions: a headless browser draws in software, and a spinner turning while a
# session waits for the shared models repaints its page 60 times a second. And the time the page
# last changed, the readiness signal `quiet` reads: plotly and the data grids draw after the script
# has finished, so "finished" alone can catch a page half drawn.
STILL = """
window.__changed = Date.now();
new MutationObserver(() => { window.__changed = Date.now(); })
  .observe(document, {subtree: true, childList: true, attributes: true, characterData: true});
document.addEventListener('DOMContentLoaded', () => {
  const still = document.createElement('style');
  still.textContent = '*, *::before, *::after { animation: none !important; transition: none !important; }';
  document.head.appendChild(still);
});
"""
DRAWN_MS = 400  # no change to the page for this long: what the browser draws after a script run is drawn


def quiet(driver, ms: int = DRAWN_MS) -> bool:
    """The page has not changed for `ms` milliseconds (no element, attribute or text)."""
    return driver.execute_script(f"return Date.now() - (window.__changed || 0) >= {ms}")


def drawn(driver, what: str = "the page to be drawn", timeout: float = 30) -> None:
    """Wait until the page's script has finished, its charts are drawn and nothing on it has changed
    for DRAWN_MS since now (what a rerun, a resize or a click sets off starts within that time):
    instead of a fixed sleep."""
    driver.execute_script("window.__changed = Date.now()")
    wait_for(driver, lambda: settled(driver) and charts_drawn(driver) and quiet(driver), timeout, what)


def wait_for(driver, predicate, timeout, what):
    start = time.time()
    deadline = start + timeout
    while time.time() < deadline:
        try:
            if predicate():
                _log_wait(what, time.time() - start)
                return
        except Exception:  # the page is still rendering: elements come and go
            pass
        # a quarter-second poll while a page draws; twice as slow once the wait is for the models
        time.sleep(0.25 if time.time() - start < 5 else 0.5)
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    driver.save_screenshot(str(ARTIFACTS / "timeout.png"))
    with contextlib.suppress(Exception):  # what the page showed, for the failure's reader
        (ARTIFACTS / "timeout.txt").write_text(
            f"waiting for {what}\nsettled: {settled(driver)}\n\n{body_text(driver)}"
        )
    pytest.fail(f"timed out waiting for {what}")


def _log_wait(what: str, seconds: float) -> None:
    """One line per wait in test-artifacts/browser/waits.log (test, what, seconds): where a slow
    browser test spends its time."""
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    test = os.environ.get("PYTEST_CURRENT_TEST", "?").split(" ")[0].split("::")[-1]
    with open(ARTIFACTS / "waits.log", "a", encoding="utf-8") as f:
        f.write(f"{time.strftime('%H:%M:%S')}\t{test}\t{seconds:6.1f}\t{what}\n")


def body_text(driver) -> str:
    """The page's text, one line per block as a user reads it, blank lines dropped. From the
    browser's own `innerText` (~15 ms a call): WebDriver's element text walks the whole page in
    JavaScript to decide what is visible, ~0.45 s and half a CPU second a call on these pages, and
    every wait polls this twice a second."""
    raw = driver.execute_script("return document.body.innerText")
    lines = (" ".join(line.replace("\u00a0", " ").split()) for line in raw.splitlines())
    return "\n".join(line for line in lines if line)


def settled(driver) -> bool:
    """The script run is over and drawn: the app root's script state is not running (nor a rerun
    pending), no 'Running' status widget shows, the page is not waiting for its question's turn in
    the server's line (another session's question, or this one's previous, being answered), and the
    page has not changed for QUIET_MS. (The status widget alone can be absent while a script still
    runs, which let screenshots catch pages half drawn; and the script state can say the run is over
    while its last elements wait to be drawn, which under the full suite's load let a test read a
    page without its last part.) One script call: tests poll this four times a second, and three
    lookups through the driver, one an XPath over the whole page, cost the browser a tenth of a core
    while it waited."""
    return driver.execute_script(SETTLED, WAITING, QUIET_MS)


QUIET_MS = 300  # settled: the browser draws a run's elements in batches a few milliseconds apart

# A MutationObserver (installed on the first call after a page load) notes when the page last changed.
SETTLED = """
if (!window.loupeLastChange) {
  window.loupeLastChange = performance.now();
  new MutationObserver(() => { window.loupeLastChange = performance.now(); })
    .observe(document.body, {subtree: true, childList: true, characterData: true});
}
const root = document.querySelector('[data-testid="stApp"]');
const state = root ? root.getAttribute('data-test-script-state') : 'initial';
return !['initial', 'running', 'rerunRequested'].includes(state)
  && !document.querySelector('[data-testid="stStatusWidget"]')
  && ![...document.querySelectorAll('[data-testid="stAlert"]')]
    .some(a => a.textContent.includes(arguments[0]))
  && performance.now() - window.loupeLastChange > arguments[1];
"""


def showing(driver, title: str) -> bool:
    """The page's own title is `title` (the sidebar lists every title, so body text is not enough).
    One script call: waits poll this, and WebDriver's element lookups and element text cost a round
    trip each."""
    return driver.execute_script(SHOWING, title)


SHOWING = """
return [...document.querySelectorAll('h1')]
  .some(h => h.getClientRects().length > 0 && h.innerText.trim() === arguments[0]);
"""


def text_of(driver, css: str) -> str:
    """The text of the first element matching `css`, as `body_text` reads the page's ("" if none)."""
    script = "const e = document.querySelector(arguments[0]); return e ? e.innerText : ''"
    raw = driver.execute_script(script, css)
    lines = (" ".join(line.replace("\u00a0", " ").split()) for line in raw.splitlines())
    return "\n".join(line for line in lines if line)


def ready(driver, path: str) -> bool:
    """Page-specific: the work a page shows progress for has finished (the status widget alone can
    miss a page that is still inside an `st.status`)."""
    if path == "index_swap":  # both indexes answered
        text = body_text(driver)
        return "RAG-Sequence (2018 index)" in text and "Answering on" not in text
    return True


# Tables whose columns do not all fit: the grid scrolls sideways, hiding the columns on the right.
FIND_CLIPPED_TABLES = """
return [...document.querySelectorAll('[data-testid="stDataFrame"]')]
  .filter(t => t.getBoundingClientRect().width > 0)
  .map((t, i) => { const s = t.querySelector('.dvn-scroller');
    return s && s.scrollWidth > s.clientWidth + 1 ?
      `table ${i + 1}: ${s.scrollWidth} px in ${s.clientWidth}` : null; })
  .filter(Boolean);
"""


def clipped_tables(driver) -> list[str]:
    return driver.execute_script(FIND_CLIPPED_TABLES)


# Column headers cut by their column. The grid draws its headers on a canvas, so no element holds
# them: each column's drawn width and title are read from the grid component's own props (its React
# fiber, found from the canvas) and the title is measured in the grid's header font, with the
# padding the grid draws either side of it (and its icon, if any).
FIND_CLIPPED_HEADERS = """
const out = [], ctx = document.createElement('canvas').getContext('2d');
document.querySelectorAll('[data-testid="stDataFrame"]').forEach((t, i) => {
  const c = t.querySelector('canvas[data-testid="data-grid-canvas"]');
  if (!c || t.getBoundingClientRect().width === 0) return;
  let f = c[Object.keys(c).find(k => k.startsWith('__reactFiber'))];
  const grid = p => p && p.theme && Array.isArray(p.columns);
  while (f && !grid(f.memoizedProps)) f = f.return;
  if (!f) { out.push(`table ${i + 1}: its grid's columns cannot be read`); return; }
  const {columns, theme} = f.memoizedProps, pad = theme.cellHorizontalPadding;
  ctx.font = `${theme.headerFontStyle} ${theme.fontFamily}`;
  columns.forEach(col => {
    const need = ctx.measureText(col.title).width + 2 * pad + (col.icon ? theme.headerIconSize + pad : 0);
    if (need > col.width + 0.5)
      out.push(`table ${i + 1}: "${col.title}" needs ${Math.ceil(need)} px, has ${col.width}`);
  });
});
return out;
"""


def clipped_headers(driver) -> list[str]:
    """'table 2: "closed-book" needs 89 px, has 80' for each header its column cuts (once the
    page's fonts have loaded: a fallback font measures otherwise)."""
    fonts = "return document.fonts.status"
    wait_for(driver, lambda: driver.execute_script(fonts) == "loaded", 30, "the fonts")
    return driver.execute_script(FIND_CLIPPED_HEADERS)


# Sankey node labels too faint to read: each label's colour against white and against every link
# it may lie across (the link's colour laid over white), by the WCAG contrast ratio, and its size.
FIND_FAINT_SANKEY_LABELS = """
const lum = c => c.slice(0, 3).map(v => v / 255)
  .map(v => v <= 0.03928 ? v / 12.92 : ((v + 0.055) / 1.055) ** 2.4)
  .reduce((s, v, i) => s + [0.2126, 0.7152, 0.0722][i] * v, 0);
const rgba = (css, opacity) => { const m = css.match(/[\\d.]+/g).map(Number);
  const a = (m.length > 3 ? m[3] : 1) * opacity; return m.slice(0, 3).map(v => v * a + 255 * (1 - a)); };
const ratio = (x, y) => {
  const [hi, lo] = [lum(x), lum(y)].sort((p, q) => q - p); return (hi + 0.05) / (lo + 0.05); };
const out = [];
document.querySelectorAll('.sankey').forEach(chart => {
  const grounds = [[255, 255, 255], ...[...chart.querySelectorAll('.sankey-link')].map(l => {
    const s = getComputedStyle(l); return rgba(s.fill, Number(s.fillOpacity)); })];
  chart.querySelectorAll('.node-label').forEach(t => {
    const s = getComputedStyle(t), ink = rgba(s.fill, Number(s.fillOpacity)), size = parseFloat(s.fontSize);
    const worst = Math.min(...grounds.map(g => ratio(ink, g)));
    if (worst < 4.5 || size < 13) out.push(`${t.textContent}: ${worst.toFixed(2)}:1 at ${size}px`);
  });
});
return out;
"""


def faint_sankey_labels(driver) -> list[str]:
    """'A: right: 3.80:1 at 12px' for each Sankey label under 4.5:1 contrast or 13 px."""
    return driver.execute_script(FIND_FAINT_SANKEY_LABELS)


def charts_drawn(driver) -> bool:
    """Every plotly chart on the page has drawn its SVG (one script call: waits poll this)."""
    return driver.execute_script(
        """return [...document.querySelectorAll('[data-testid="stPlotlyChart"]')]
             .every(c => c.querySelector('svg.main-svg'));"""
    )


# --------------------------------------------------------------------------- widgets, as a user uses them


def choose(driver, label: str, option: str, area: str = "main") -> None:
    """Open the select box (or multiselect) labelled `label` and click the option whose text starts
    with `option`, as a user would (the list opens in a popover outside the widget), then close it."""
    from selenium.common.exceptions import StaleElementReferenceException
    from selenium.webdriver.common.by import By
    from selenium.webdriver.common.keys import Keys

    selector, listbox = open_list(driver, label, area)
    options = [o for o in driver.find_elements(By.CSS_SELECTOR, listbox) if o.text.strip().startswith(option)]
    assert options, f"{label}: no option starting {option!r}"
    options[0].click()
    for _ in range(3):  # a multiselect stays open; the click's rerun may have drawn the box anew meanwhile
        if not driver.find_elements(By.CSS_SELECTOR, listbox):
            break
        try:
            driver.find_element(By.CSS_SELECTOR, selector).send_keys(Keys.ESCAPE)
            break
        except StaleElementReferenceException:
            continue


def options(driver, label: str, area: str = "main") -> list[str]:
    """The texts of the options the select box labelled `label` offers (opened, read, closed)."""
    from selenium.webdriver.common.by import By
    from selenium.webdriver.common.keys import Keys

    combobox, listbox = open_list(driver, label, area)
    found = [o.text.strip() for o in driver.find_elements(By.CSS_SELECTOR, listbox)]
    driver.find_element(By.CSS_SELECTOR, combobox).send_keys(Keys.ESCAPE)
    return found


def open_list(driver, label: str, area: str = "main") -> tuple[str, str]:
    """Open the list of the select box labelled `label`; returns the CSS selectors of the box and of
    its options. The box is clicked once it is drawn (a page can report its run over a moment before
    its last part is), and again every 2 s while no list shows: a redraw of the page under load can
    replace the box, or close the list a click had just opened."""
    from selenium.webdriver.common.by import By

    combobox = combobox_selector(label, area)
    listbox = f'[role="listbox"][aria-label="{label}"] [role="option"]'
    clicked = [0.0]

    def opened() -> bool:
        if driver.find_elements(By.CSS_SELECTOR, listbox):
            return True
        if time.time() - clicked[0] > 2:
            driver.find_element(By.CSS_SELECTOR, combobox).click()  # raises while the box is not drawn
            clicked[0] = time.time()
        return False

    wait_for(driver, opened, 60, f"the options of {label}")
    return combobox, listbox


def selected(driver, label: str, area: str = "main") -> str:
    """The text a select box labelled `label` shows as chosen."""
    from selenium.webdriver.common.by import By

    return driver.find_element(By.CSS_SELECTOR, combobox_selector(label, area)).get_attribute("value")


def combobox_selector(label: str, area: str = "main") -> str:
    """The CSS selector of the select box labelled `label` in the page's main area or the sidebar."""
    return f'{AREAS[area]}input[role="combobox"][aria-label="{label}"]'


def chips(driver, label: str) -> list[str]:
    """The chosen items of the multiselect labelled `label`."""
    from selenium.webdriver.common.by import By

    return [
        c.get_attribute("aria-label")
        for c in driver.find_elements(
            By.XPATH, f'//div[@data-testid="stMultiSelect"][.//input[@aria-label="{label}"]]//span[@data-tag]'
        )
    ]


AREAS = {"main": '[data-testid="stMain"] ', "sidebar": '[data-testid="stSidebar"] '}


def field(driver, label: str, area: str = "main"):
    """The text or number input labelled `label` in the page's main area or the sidebar (the
    sidebar and a page can both have a "Retriever scale")."""
    from selenium.webdriver.common.by import By

    return driver.find_element(
        By.CSS_SELECTOR, f'{AREAS[area]}input[aria-label="{label}"]:not([role="combobox"])'
    )


def type_into(driver, label: str, text: str, area: str = "main") -> None:
    """Replace what the input labelled `label` holds with `text` and press Enter, once the page shows
    the input (a page can report its script finished a moment before its last part is drawn)."""
    from selenium.webdriver.common.keys import Keys

    wait_for(driver, lambda: field(driver, label, area), 60, f"the input {label!r}")
    box = field(driver, label, area)
    box.send_keys(Keys.CONTROL, "a")
    box.send_keys(text)
    box.send_keys(Keys.ENTER)


def fill(driver, label: str, text: str, area: str = "main") -> None:
    """Type `text` into the empty input labelled `label` and leave it (Tab), as a user does before
    clicking a form's button: the input sets its value when it loses focus, not on Enter."""
    from selenium.webdriver.common.keys import Keys

    wait_for(driver, lambda: field(driver, label, area), 60, f"the input {label!r}")
    field(driver, label, area).send_keys(text, Keys.TAB)


def click_when_shown(driver, xpath: str, what: str) -> None:
    """Click the element at `xpath` once the page shows it (a rerun can briefly remove it)."""
    from selenium.webdriver.common.by import By

    wait_for(driver, lambda: driver.find_elements(By.XPATH, xpath), 60, what)
    driver.find_element(By.XPATH, xpath).click()


def press(driver, text: str) -> None:
    """Click the button whose caption is `text`."""
    click_when_shown(driver, f'//button[.//p[normalize-space()="{text}"]]', f"the button {text!r}")


def flip(driver, label: str) -> None:
    """Click the toggle labelled `label`."""
    click_when_shown(
        driver, f'//*[@data-testid="stCheckbox"][.//p[normalize-space()="{label}"]]', f"the toggle {label!r}"
    )


def toggled(driver, label: str) -> bool:
    """The toggle labelled `label` is on."""
    return driver.find_element(
        "xpath", f'//*[@data-testid="stCheckbox"][.//p[normalize-space()="{label}"]]//input'
    ).is_selected()


def expand(driver, label: str) -> None:
    """Open the expander labelled `label` if it is closed (the page may open it by itself: on a
    server with no saved runs, say)."""
    details = f'//details[.//summary//p[normalize-space()="{label}"]]'
    wait_for(driver, lambda: driver.find_elements("xpath", details), 60, f"the expander {label!r}")
    if driver.find_element("xpath", details).get_attribute("open") is None:
        driver.find_element("xpath", details + "/summary").click()
        wait_for(
            driver, lambda: driver.find_element("xpath", details).get_attribute("open") is not None, 30, label
        )


def choose_shipped_run(driver) -> str:
    """On Eval, select the first shipped run the Run box offers and return its label: a shared
    server's own runs come first once it has some, and a test that reads a shipped run's numbers or
    its first question must not take whichever run is newest."""
    shipped = {eval_views.run_label(p) for p in shipped_runs.current_runs()}
    label = next(o for o in options(driver, "Run") if o in shipped)
    if selected(driver, "Run") != label:
        choose(driver, "Run", label)
        wait_for(driver, lambda: settled(driver) and selected(driver, "Run") == label, 120, "the shipped run")
    return label


def open_page(driver, path: str, title: str) -> None:
    """Go to another page by its sidebar link, as a user does (a new URL would start a new session)."""
    from selenium.webdriver.common.by import By

    driver.find_element(By.XPATH, f'//a[@data-testid="stSidebarNavLink"][contains(@href, "/{path}")]').click()
    wait_for(
        driver,
        lambda: showing(driver, title) and settled(driver) and charts_drawn(driver),
        300,
        f"the {title} page",
    )
    drawn(driver, f"the {title} page drawn")


# Each metric's delta as the browser draws it: its text and the arrow icon drawn beside it (or none).
READ_DELTAS = """
return [...document.querySelectorAll('[data-testid="stMetricDelta"]')].map(d => {
  const icon = d.querySelector('[data-testid^="stMetricDeltaIcon"]');
  return [d.innerText.trim(), icon ? icon.getAttribute('data-testid').replace('stMetricDeltaIcon-', '') : '',
          getComputedStyle(d).color];
});
"""


def metric_deltas(driver) -> list[tuple[str, str, str]]:
    """(text, "Up" / "Down" / "", css colour) of every metric delta on the page."""
    return [tuple(x) for x in driver.execute_script(READ_DELTAS)]


def reddish(css: str) -> bool:
    """'rgba(255, 43, 43, 1)' is red: its red channel well above green and blue."""
    r, g, b = (float(x) for x in css[css.index("(") + 1 :].rstrip(")").split(",")[:3])
    return r > 150 and r > 1.6 * g and r > 1.6 * b
