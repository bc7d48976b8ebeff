"""Long work off the request path: one background thread per named job, shared by every session.

A page starts a job and returns at once; the job's progress and result live here, so switching
pages, reloading or a second session neither interrupts the work nor starts it twice. A page shows
progress with a fragment that polls `get(name)`.
"""
from __future__ import annotations

import threading
from dataclasses import dataclass, field
from typing import Any, Callable

import streamlit as st

from rag_core.config import Progress


@dataclass
class Job:
    name: str
    message: str = "Starting…"
    fraction: float = 0.0
    result: Any = None
    error: str | None = None  # one line a user can read, when the work failed
    thread: threading.Thread | None = field(default=None, repr=False)

    @property
    def running(self) -> bool:
        return self.thread is not None and self.thread.is_alive()

    def report(self, message: str, fraction: float) -> None:
        self.message, self.fraction = message, min(1.0, max(0.0, float(fraction)))


@st.cache_resource(show_spinner=False)
def _registry() -> tuple[dict[str, Job], threading.Lock]:
    return {}, threading.Lock()


def get(name: str) -> Job | None:
    return _registry()[0].get(name)


def start(name: str, work: Callable[[Progress], Any]) -> Job:
    """Run `work(progress)` in a background thread unless a job of that name is already running."""
    jobs, lock = _registry()
    with lock:
        job = jobs.get(name)
        if job is not None and job.running:
            return job
        job = Job(name)

        def run() -> None:
            try:
                job.result = work(job.report)
                job.report("done", 1.0)
            except Exception as e:  # shown on the page as one line; the partial work stays cached
                job.error = (str(e).splitlines() or [type(e).__name__])[0]

        job.thread = threading.Thread(target=run, name=f"rag-loupe-{name}", daemon=True)
        jobs[name] = job
        job.thread.start()
    return job
