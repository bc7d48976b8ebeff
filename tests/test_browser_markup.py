"""Text is text, in a real browser: a corpus whose titles and passages hold Markdown links and
images, HTML tags, formula-like cells, right-to-left and zero-width characters and very long
words is uploaded on the Corpus page, built into an index, asked about, and every page is opened.
The DOM must hold none of that markup as live elements, and nothing may overflow its column.

The server is the worker's tiny-generator server (`tiny_served` in conftest: the default retriever
with a tiny random Llama, on a throw-away cache, so the uploaded index never reaches a user's
cache): what a page does with text does not depend on a trained model, and the tiny one answers in
a blink.
"""

import csv
import json

import pytest

from browser_kit import (
    ARTIFACTS,
    PAGES,
    body_text,
    charts_drawn,
    new_browser,
    ready,
    selected,
    settled,
    showing,
    wait_for,
)

# a real server and Chromium: every test here takes over 5 s on 2 cores (measured with --durations)
pytestmark = pytest.mark.slow

EVIL = "evil.example"
LONG_WORD = "Zorblaxfjordpneumonoultramicroscopicsilicovolcanoconiosis" * 6  # 348 letters, no break
ROWS = [
    {
        "title": f"Zorblax fjord [click me](http://{EVIL}/a) ![pic](http://{EVIL}/p.png)",
        "text": f'The Zorblax fjord ferry is run by Mirela Quansah. <b id="inj-b">bold</b> <i>it</i> '
        f'<script>window.injected=1</script> <img id="inj-img" src="http://{EVIL}/x.png"> **strong** '
        f'[a link](http://{EVIL}/b) <https://{EVIL}/auto> <a href="http://{EVIL}/c">anchor</a> $x^2$ '
        ':red[red] <span style="color:red">styled</span> %{x} {{template}}',
    },
    {
        "title": "Zorblax ferry \u05e9\u05dc\u05d5\u05dd \u202eroverride\u202c",
        "text": "The Zorblax fjord ferry sails daily. \u05d4\u05de\u05e2\u05d1\u05d5\u05e8\u05ea "
        "\u05e9\u05dc "
        "\u05d6\u05d5\u05e8\u05d1\u05dc\u05e7\u05e1 zero\u200bwidth\u200djoiner\ufeffbom " + LONG_WORD,
    },
    {
        "title": "<h1>Fjord heading</h1> & 'quotes'",
        "text": "# Not a heading\n\n> not a quote\n\n- not a list. The Zorblax fjord is deep.",
    },
]
CSV_ROWS = [
    {
        "title": '=HYPERLINK("http://evil.example","formula")',
        "text": "=1+1 @SUM(A1) +cmd -2 The Zorblax fjord tolls.",
    }
]
QUESTION = "Who runs the Zorblax fjord ferry?"

# Every live element the text above could have produced, and every element wider than its column.
FIND_MARKUP = f"""
const bad = [];
const href = e => e.getAttribute('href') || e.getAttribute('xlink:href') || '';
document.querySelectorAll('a').forEach(a => {{
  if (href(a).includes('{EVIL}')) bad.push('link ' + href(a)); }});
document.querySelectorAll('img, image').forEach(i => {{
  const src = i.getAttribute('src') || href(i); if (src.includes('{EVIL}')) bad.push('image ' + src); }});
['inj-b', 'inj-img'].forEach(id => {{ if (document.getElementById(id)) bad.push('tag #' + id); }});
if (window.injected) bad.push('script ran');
document.querySelectorAll('strong, b, em, i, h1, h2, blockquote, li, span').forEach(e => {{
  const t = e.textContent.trim();
  if (['bold', 'it', 'strong', 'Fjord heading', 'not a quote', 'not a list. The Zorblax fjord is deep.',
       'styled', 'red']
      .includes(t)) bad.push(e.tagName.toLowerCase() + ' ' + t); }});
document.querySelectorAll('svg text').forEach(t => {{  // escaped twice: an entity shown as text
  if (/&(quot|amp|lt|gt|#\\d+|#x[0-9a-f]+);/i.test(t.textContent))
    bad.push('entity ' + t.textContent.slice(0, 40)); }});
document.querySelectorAll('.katex, mjx-container')
  .forEach(e => bad.push('formula ' + e.textContent.slice(0, 30)));
return bad;
"""
FIND_OVERFLOW = """
const out = [];
if (document.scrollingElement.scrollWidth > window.innerWidth + 1)
  out.push('page ' + document.scrollingElement.scrollWidth);
document.querySelectorAll('[data-testid="stColumn"], [data-testid="stMainBlockContainer"], '
                          + '[data-testid="stSidebarContent"]')
  .forEach(c => { c.querySelectorAll('[data-testid="stText"], [data-testid="stMarkdownContainer"], '
                                     + '[data-testid="stCaptionContainer"], [data-testid="stMetric"], '
                                     + '[data-testid="stAlert"]')
    .forEach(e => { const r = e.getBoundingClientRect(), b = c.getBoundingClientRect();
      if (r.width > 0 && (r.right > b.right + 2 || e.scrollWidth > e.clientWidth + 2))
        out.push((e.parentElement.closest('[data-testid]') || e).getAttribute('data-testid') + ' > '
                 + e.getAttribute('data-testid') + ': ' + e.textContent.slice(0, 40)); }); });
return out;
"""


@pytest.fixture(scope="module")
def corpus_files(tmp_path_factory):
    folder = tmp_path_factory.mktemp("markup")
    jsonl = folder / "markup.jsonl"
    jsonl.write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in ROWS), encoding="utf-8")
    sheet = folder / "formulas.csv"
    with open(sheet, "w", newline="", encoding="utf-8") as f:
        w = csv.DictWriter(f, fieldnames=["title", "text"])
        w.writeheader()
        w.writerows(CSV_ROWS)
    return [jsonl, sheet]


@pytest.fixture(scope="module")
def throwaway_server(tiny_served):
    return tiny_served[0]


def check_page(driver, name: str) -> None:
    from selenium.webdriver.common.by import By

    driver.save_screenshot(str(ARTIFACTS / f"markup-{name}.png"))
    assert not driver.find_elements(By.CSS_SELECTOR, '[data-testid="stException"]'), name
    assert driver.execute_script(FIND_MARKUP) == [], name
    assert driver.execute_script(FIND_OVERFLOW) == [], (name, driver.execute_script(FIND_OVERFLOW))


def test_markup_in_a_corpus_stays_text_on_every_page(throwaway_server, corpus_files):
    from selenium.webdriver.common.by import By
    from selenium.webdriver.common.keys import Keys

    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    d = new_browser("1280,1600")
    try:
        d.get(throwaway_server + "/corpus")
        wait_for(
            d,
            lambda: (
                showing(d, "Corpus") and settled(d) and d.find_elements(By.CSS_SELECTOR, 'input[type="file"]')
            ),
            300,
            "the Corpus page",
        )
        d.find_element(By.CSS_SELECTOR, 'input[type="file"]').send_keys("\n".join(map(str, corpus_files)))
        wait_for(d, lambda: "All 4 passages" in body_text(d) and settled(d), 120, "the upload preview")
        check_page(d, "corpus-preview")
        name = d.find_element(By.CSS_SELECTOR, 'input[aria-label="Index name"]')
        name.send_keys("markup-test")
        d.find_element(By.XPATH, '//button[.//p[text()="Build the index"]]').click()
        wait_for(
            d, lambda: "Built index 'markup-test'" in body_text(d) and settled(d), 240, "the background build"
        )
        use = '//button[.//p[text()="Use markup-test now"]]'
        wait_for(d, lambda: d.find_elements(By.XPATH, use), 60, "the new index in the list")
        d.find_element(By.XPATH, use).click()
        wait_for(
            d, lambda: settled(d) and selected(d, "Index", "sidebar") == "markup-test", 60, "the index switch"
        )

        d.find_element(By.XPATH, '//a[@data-testid="stSidebarNavLink"][contains(., "Ask")]').click()
        # the page's question answered on the new index: answers copied from these passages are text too
        wait_for(
            d,
            lambda: (
                showing(d, "Ask")
                and settled(d)
                and "index markup-test" in body_text(d)
                and "The 4 passages" in body_text(d)
            ),
            300,
            "the Ask page on the new index",
        )
        check_page(d, "ask-first")
        box = d.find_element(By.CSS_SELECTOR, 'input[aria-label="Question"]')
        box.send_keys(Keys.CONTROL, "a")
        box.send_keys(QUESTION)
        box.send_keys(Keys.ENTER)
        wait_for(
            d,
            lambda: (
                settled(d) and f"Question: “{QUESTION}”" in body_text(d) and "The 4 passages" in body_text(d)
            ),
            300,
            "the passages retrieved",
        )
        check_page(d, "ask")
        for path, title in PAGES[1:]:
            d.find_element(
                By.XPATH, f'//a[@data-testid="stSidebarNavLink"][contains(@href, "/{path}")]'
            ).click()
            wait_for(d, lambda: showing(d, title) and settled(d) and ready(d, path), 300, f"the {title} page")
            wait_for(d, lambda: charts_drawn(d), 60, f"the charts of {title}")
            check_page(d, path)
    finally:
        d.quit()
