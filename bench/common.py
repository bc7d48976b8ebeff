"""Helpers shared by the benchmark scripts: timing and the JSON line each script prints."""

from __future__ import annotations

import json
import statistics
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent

QUESTIONS = [
    "Who wrote Moby-Dick?",
    "In which city is the Taj Mahal?",
    "Who painted the Mona Lisa?",
    "In what year did the Berlin Wall fall?",
    "Who was the Command Module Pilot of Apollo 11?",
    "Which river flows through Baghdad?",
]


def timed(fn, *args, **kwargs):
    t = time.perf_counter()
    out = fn(*args, **kwargs)
    return time.perf_counter() - t, out


def alternate(rounds: int, first, second) -> tuple[list[float], list[float]]:
    """Seconds of each call of `first` and `second`, called in turn `rounds` times, so a drift of the
    machine's speed touches both alike."""
    times: tuple[list[float], list[float]] = ([], [])
    for _ in range(rounds):
        for spent, call in zip(times, (first, second)):
            spent.append(timed(call)[0])
    return times


def median(xs):
    return float(statistics.median(xs))


def emit(result: dict) -> None:
    """Each script's last stdout line is its JSON result (the runner reads that line)."""
    print(json.dumps(result), flush=True)
