"""The app's first answer on a fresh start: an empty cache folder, a new Streamlit server, and a
headless Chromium that opens the Ask page; the figure is the time from launching the server until
the default question's answer is on screen (model conversion and index build included).

Needs Debian's chromium and chromium-driver (as the browser test); prints an `app_cold_error` key
without them.
"""

import os
import shutil
import socket
import subprocess
import sys
import tempfile
import time

from common import ROOT, emit

ANSWER = "Herman Melville"


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def browser():
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    opts = webdriver.ChromeOptions()
    opts.binary_location = shutil.which("chromium")
    for flag in (
        "--headless=new",
        "--no-sandbox",
        "--disable-gpu",
        "--disable-dev-shm-usage",
        "--no-first-run",
        "--disable-background-networking",
    ):
        opts.add_argument(flag)
    return webdriver.Chrome(service=Service(shutil.which("chromedriver")), options=opts)


def first_answer_seconds(cache: str) -> float:
    from selenium.webdriver.common.by import By

    port = free_port()
    env = dict(os.environ, RAG_LOUPE_CACHE=cache)
    t0 = time.perf_counter()
    server = subprocess.Popen(
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
        ],
        cwd=ROOT,
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    driver = browser()
    try:
        deadline = time.time() + 600
        while time.time() < deadline:
            try:
                driver.get(f"http://127.0.0.1:{port}/")
                break
            except Exception:  # the server is not listening yet
                time.sleep(0.5)
        while time.time() < deadline:
            try:
                if ANSWER in driver.find_element(By.TAG_NAME, "body").text:
                    return time.perf_counter() - t0
            except Exception:
                pass
            time.sleep(0.25)
        raise SystemExit("no answer within 600 s")
    finally:
        driver.quit()
        server.terminate()
        server.wait(timeout=30)


def main():
    if not (shutil.which("chromium") and shutil.which("chromedriver")):
        emit(
            {
                "app_cold_error": "chromium and chromedriver are needed "
                "(apt-get install chromium chromium-driver)"
            }
        )
        return
    with tempfile.TemporaryDirectory() as cache:
        cold = first_answer_seconds(cache)
        warm = first_answer_seconds(cache)  # a restart: everything converted and built is on disk
    emit({"app_first_answer_cold_cache_s": round(cold, 1), "app_first_answer_warm_cache_s": round(warm, 1)})


if __name__ == "__main__":
    main()
