"""The Eval page's small run, as a background job: evaluate, save the run, file it under the stack
of the session that started it."""

from __future__ import annotations

import time

from app import state
from rag_core.loupe.evaluation import runs as ev


def eval_work(pipe, questions: list, settings, name: str, skipped: int):
    """The background job: evaluate, save the run, return its path. The session's stack is read
    here, on the page's thread: the job's thread has no session to read it from."""
    stack = state.stack_key()

    def work(progress):
        def step(done, total, result):
            progress(f"{done} / {total} · {result.question[:60]}", done / total)

        run = ev.run_eval(
            pipe,
            questions,
            settings,
            step,
            resume=True,
            extra={"file": name, "skipped": skipped, "stack": stack},
        )
        return ev.save_run(run, time.strftime("app-%Y%m%d-%H%M%S"))

    return work
