"""Eight browser sessions on one server, one of them running a background evaluation, for several
rounds of questions: the server's RSS after each phase. It runs the browser test that checks the
answers (tests/test_browser.py::test_eight_sessions_at_once) with more rounds, and reads the samples
it writes; so the figure comes from the same steps the test asserts on."""

import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

from common import ROOT, emit

ROUNDS = 4


def main():
    report = Path(tempfile.mkdtemp()) / "load.json"
    env = dict(
        os.environ,
        RAG_LOUPE_LOAD_REPORT=str(report),
        RAG_LOUPE_LOAD_ROUNDS=str(ROUNDS),
        RAG_LOUPE_REQUIRE_BROWSER="1",
    )
    out = subprocess.run(
        [
            sys.executable,
            "-m",
            "pytest",
            "-q",
            "-p",
            "no:cacheprovider",
            "tests/test_browser.py::test_eight_sessions_at_once",
        ],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
    )
    if out.returncode != 0:
        raise SystemExit(f"the load run failed: {(out.stdout + out.stderr).strip().splitlines()[-1]}")
    rss = json.loads(report.read_text())["rss_mb"]
    after_job, last = rss["after the background run"], list(rss.values())[-1]
    emit(
        {
            "load_sessions": 8,
            "load_rounds": ROUNDS,
            "load_rss_mb": rss,
            "load_rss_growth_after_first_round_mb": last - after_job,
        }
    )


if __name__ == "__main__":
    main()
