"""Long work off the request path: one background thread per named job, shared by every session.

A page starts a job and returns at once; the job's progress and result live here, so switching
pages, reloading or a second session neither interrupts the work nor starts it twice. Every page's
sidebar shows the running jobs with a Cancel button (`sidebar_panel`); a page shows its own job's
progress with `progress_panel(name)`. Cancelling takes effect at the job's next progress report:
what the work wrote until then (index-swap rows, an eval checkpoint) stays, and the next start of
the same work resumes from it.
"""

from __future__ import annotations

import itertools
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import streamlit as st

from rag_core.loupe.vocabulary import Progress

_ids = itertools.count(1)


class Cancelled(Exception):
    """Raised inside a job's work, at its next progress report, once someone pressed Cancel."""


@dataclass
class Job:
    name: str
    label: str  # what the sidebar calls it, e.g. "Index swap experiment"
    id: int = field(default_factory=lambda: next(_ids))
    message: str = "Starting…"
    fraction: float = 0.0
    result: Any = None
    error: str | None = None  # one line a user can read, when the work failed
    cancelled: bool = False
    started: float = field(default_factory=time.time)
    thread: threading.Thread | None = field(default=None, repr=False)
    _stop: threading.Event = field(default_factory=threading.Event, repr=False)

    @property
    def running(self) -> bool:
        return self.thread is not None and self.thread.is_alive()

    def report(self, message: str, fraction: float) -> None:
        """The work's progress callback; it is also where a cancel request stops the work."""
        if self._stop.is_set():
            raise Cancelled()
        self.message, self.fraction = message, min(1.0, max(0.0, float(fraction)))

    def cancel(self) -> None:
        self._stop.set()
        self.message = "Cancelling at the next step…"


@st.cache_resource(show_spinner=False)
def _registry() -> tuple[dict[str, Job], threading.Lock]:
    return {}, threading.Lock()


def get(name: str) -> Job | None:
    return _registry()[0].get(name)


def running() -> list[Job]:
    return [j for j in _registry()[0].values() if j.running]


def start(name: str, work: Callable[[Progress], Any], label: str | None = None) -> Job:
    """Run `work(progress)` in a background thread unless a job of that name is already running
    (then that job is returned: two sessions pressing the button start the work once)."""
    jobs, lock = _registry()
    with lock:
        job = jobs.get(name)
        if job is not None and job.running:
            return job
        job = Job(name, label or name)

        def run() -> None:
            try:
                job.result = work(job.report)
                job.message, job.fraction = "done", 1.0
            except Cancelled:
                job.cancelled, job.message = True, "cancelled"
            except Exception as e:  # shown on the page as one line; the partial work stays written
                job.error = (str(e).splitlines() or [type(e).__name__])[0]

        job.thread = threading.Thread(target=run, name=f"rag-loupe-{name}", daemon=True)
        jobs[name] = job
        job.thread.start()
    return job


def _elapsed(job: Job) -> str:
    s = int(time.time() - job.started)
    return f"{s // 60} min {s % 60:02d} s" if s >= 60 else f"{s} s"


def _bar(job: Job, key: str) -> None:
    st.progress(job.fraction, text=f"{job.label}: {job.message} ({_elapsed(job)})")
    st.button(
        "Cancel",
        key=f"{key}_{job.id}",
        on_click=job.cancel,
        disabled=job._stop.is_set(),
        help="Stops at the next step; what was computed is kept and a new start resumes from it.",
    )


def progress_panel(name: str, follow: bool = False) -> None:
    """A live progress bar (with Cancel) for job `name` while it runs; the page reruns when it ends.
    `follow`: the page also reruns whenever the job reports progress, so a page that shows the
    job's partial results (the Index swap tables) keeps up with it instead of waiting for a click."""
    job = get(name)
    if job is None or not job.running:
        return
    shown = f"_job_shown_{name}"
    st.session_state[shown] = (job.id, job.fraction)  # the progress this page run was drawn at

    @st.fragment(run_every=2)
    def _live() -> None:
        j = get(name)
        if j is None or not j.running or (follow and (j.id, j.fraction) != st.session_state.get(shown)):
            st.rerun()
        _bar(j, f"cancel_{name}")

    _live()


def sidebar_panel() -> None:
    """Every running job, on every page: what it is, how far it got, and Cancel. It refreshes less
    often than a page's own progress bar: every open session runs it."""
    if not running():
        return

    @st.fragment(run_every=5)
    def _live() -> None:
        jobs = running()
        if not jobs:
            st.rerun()
        st.caption("Running in the background (other pages stay usable):")
        for j in jobs:
            _bar(j, "sidebar_cancel")

    with st.sidebar:
        _live()
