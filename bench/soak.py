"""Memory over 100 queries in one process: RSS after a warm-up query, then after 100 more
(distinct questions and K values, so nothing is served from a cache)."""

import json

import psutil
from common import ROOT, emit

from rag_core.config import AnswerSettings
from rag_core.pipeline import load_pipeline


def main():
    rows = [
        json.loads(l) for l in (ROOT / "assets" / "eval" / "dev.jsonl").read_text().splitlines() if l.strip()
    ]
    questions = [r["question"] for r in rows]
    pipe = load_pipeline(settings=AnswerSettings(index="wiki"))
    proc = psutil.Process()
    pipe.run(questions[0], AnswerSettings(index="wiki"))
    before = proc.memory_info().rss
    samples = []
    for i in range(100):
        pipe.run(questions[i % len(questions)], AnswerSettings(index="wiki", k=3 + i % 6)).to_frame()
        if i % 25 == 24:
            samples.append(round(proc.memory_info().rss / 2**20))
    after = proc.memory_info().rss
    emit(
        {
            "soak_queries": 100,
            "rss_before_mb": round(before / 2**20),
            "rss_after_mb": round(after / 2**20),
            "rss_growth_mb": round((after - before) / 2**20, 1),
            "rss_every_25_mb": samples,
        }
    )


if __name__ == "__main__":
    main()
