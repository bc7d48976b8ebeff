"""A class on one server: `SESSIONS` sessions at once against a real `streamlit run` server (three
headless Chromium browsers, the rest light websocket sessions each opening a link with a different
test-split question), beside a background evaluation and the index swap. It runs the test that
checks every answer (tests/test_classroom.py) with more sessions and reads the figures it writes:
times to answer (p50, p95) against one question's time (the mean of questions asked alone
before the burst, none of them in it), page loads while the line is full, the
server's peak RSS while one session asks and while the class does, errors."""

import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

from common import ROOT, emit

SESSIONS = 30


def main():
    report = Path(tempfile.mkdtemp()) / "classroom.json"
    env = dict(
        os.environ,
        RAG_LOUPE_CLASS_REPORT=str(report),
        RAG_LOUPE_CLASS_SESSIONS=str(SESSIONS),
        RAG_LOUPE_REQUIRE_BROWSER="1",
        RAG_LOUPE_CLASS_STACK="trained",  # the test runs the tiny generator unless told
    )
    out = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "tests/test_classroom.py"],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
    )
    if not report.exists():
        raise SystemExit(f"the class run failed: {(out.stdout + out.stderr).strip().splitlines()[-1]}")
    r = json.loads(report.read_text())
    emit(
        {
            "classroom_sessions": r["sessions"],
            "classroom_passed": out.returncode == 0,
            "classroom_one_question_s": r.get("one_question_s"),
            "classroom_alone_questions": len(r.get("alone_s", [])),
            "classroom_answer_p50_s": r.get("answer_p50_s"),
            "classroom_answer_p95_s": r.get("answer_p95_s"),
            # nobody waits longer than the line itself needs: p95 over (sessions x one question), the
            # goal's measure; the burst holds the students' questions, the asker's and an evaluation
            "classroom_p95_vs_line": round(r["answer_p95_s"] / (r["sessions"] * r["one_question_s"]), 3)
            if "answer_p95_s" in r
            else None,
            # the stricter reading: over the students' questions alone
            "classroom_p95_vs_students": round(
                r["answer_p95_s"] / ((r["sessions"] - 3) * r["one_question_s"]), 3
            )
            if "answer_p95_s" in r
            else None,
            "classroom_page_load_p95_s": r.get("page_load_p95_s"),
            "classroom_rss_one_mb": r.get("rss_one_session_mb"),  # its peak while one session asks
            "classroom_rss_one_after_mb": r.get("rss_one_session_after_mb"),  # once it has its answers
            "classroom_rss_peak_mb": r.get("peak_rss_mb"),
            "classroom_rss_ratio": round(r["peak_rss_mb"] / r["rss_one_session_mb"], 3)
            if "peak_rss_mb" in r
            else None,
            "classroom_errors": r.get("errors"),
            # the server's share of the CPU time every process used during the burst (the clients
            # run on the same cores here, unlike a class's own laptops)
            "classroom_server_cpu_share": r.get("server_cpu_share"),
        }
    )


if __name__ == "__main__":
    main()
