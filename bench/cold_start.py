"""Time to the first answer on a fresh start with a cold cache, then the later (warm) start.

Runs the CLI in child processes with an empty cache folder: the first start converts the GGUF,
builds the index from the shipped vectors and answers; the second finds everything cached.
"""

import os
import subprocess
import sys
import tempfile
import time

from common import ROOT, emit

QUESTION = "Who wrote Moby-Dick?"


def ask(env):
    t = time.perf_counter()
    out = subprocess.run(
        [sys.executable, "-m", "rag_core", "ask", QUESTION, "--json"],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=900,
    )
    if out.returncode != 0:
        raise SystemExit(out.stderr[-500:])
    return time.perf_counter() - t


def main():
    with tempfile.TemporaryDirectory() as cache:
        env = dict(os.environ, RAG_LOUPE_CACHE=cache)
        cold = ask(env)
        warm = ask(env)
    emit({"first_answer_cold_cache_s": round(cold, 1), "first_answer_warm_cache_s": round(warm, 1)})


if __name__ == "__main__":
    main()
