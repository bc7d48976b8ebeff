"""Background jobs: started once, cancellable, errors as one line, and the Eval page's run off the
request path (its new run selected, and kept selected through the next interaction)."""

import threading
import time

import pytest
from streamlit.testing.v1 import AppTest

from app import state
from app.eval import eval_job
from app.ui import jobs
from rag_core.analysis.evaluation import shipped_runs
from rag_core.config import cache_dir

from conftest import ROOT


def wait_until(predicate, timeout=600.0, what="the condition"):
    deadline = time.time() + timeout
    while not predicate():
        assert time.time() < deadline, f"timed out waiting for {what}"
        time.sleep(0.05)


def test_an_eval_job_records_the_stack_of_the_session_that_started_it(monkeypatch):
    """The job's thread has no session: the stack its run is filed under is read when the page
    starts the job, not when the thread runs it."""
    recorded = {}

    def run_eval(pipe, questions, settings, step, resume, extra):
        recorded.update(extra)
        return "run"

    monkeypatch.setattr(eval_job.ev, "run_eval", run_eval)
    monkeypatch.setattr(eval_job.ev, "save_run", lambda run, name: f"saved {run}")
    monkeypatch.setattr(state, "stack_key", lambda: "the session's stack")
    work = eval_job.eval_work(None, [], None, "dev.jsonl", 0)
    monkeypatch.setattr(state, "stack_key", lambda: "the default stack")  # what a thread would read
    thread = threading.Thread(target=lambda: recorded.update(out=work(lambda *a: None)))
    thread.start()
    thread.join(timeout=60)
    assert recorded == {"file": "dev.jsonl", "skipped": 0, "stack": "the session's stack", "out": "saved run"}


def test_a_job_runs_once_reports_progress_and_stops_when_cancelled():
    gate = threading.Event()
    calls = []

    def work(progress):
        for i in range(10_000):
            progress(f"step {i}", i / 10_000)
            calls.append(i)
            gate.wait(0.01)
        return "finished"

    job = jobs.start("pytest-loop", work, label="A loop")
    assert (
        jobs.start("pytest-loop", lambda p: "a second start") is job
    )  # a second press joins the running job
    wait_until(lambda: len(calls) > 3, what="progress")
    assert job.running and job.message.startswith("step ") and 0 < job.fraction < 1
    assert job in jobs.running()
    job.cancel()
    wait_until(lambda: not job.running, timeout=5, what="the cancel")
    assert job.cancelled and job.error is None and job.result is None and len(calls) < 10_000
    again = jobs.start("pytest-loop", lambda p: "resumed")  # a finished job's name can start again
    wait_until(lambda: not again.running, timeout=5, what="the second job")
    assert again is not job and again.result == "resumed" and not again.cancelled


def test_a_failed_job_keeps_one_readable_line():
    def work(progress):
        raise ValueError("the index was deleted meanwhile\nTraceback (most recent call last): ...")

    job = jobs.start("pytest-fail", work)
    wait_until(lambda: not job.running, timeout=5, what="the failure")
    assert job.error == "the index was deleted meanwhile" and not job.cancelled


@pytest.fixture
def eval_cache(tmp_path, monkeypatch):
    """Saved eval runs in a temp folder; models and indexes shared with the real cache."""
    for kind in ("models", "indexes", "corpus-indexes"):
        (cache_dir() / kind).mkdir(parents=True, exist_ok=True)
        (tmp_path / kind).symlink_to(cache_dir() / kind, target_is_directory=True)
    monkeypatch.setenv("RAG_LOUPE_CACHE", str(tmp_path))
    return tmp_path


@pytest.mark.slow
def test_the_eval_page_runs_in_the_background_and_keeps_the_new_run_selected(eval_cache):
    at = AppTest.from_file(str(ROOT / "app/main.py"), default_timeout=600)
    at.switch_page(str(ROOT / "pages" / "eval.py"))
    at.run()
    assert not at.exception, [e.value for e in at.exception]
    shipped = shipped_runs.current_runs()
    assert run_selector(at).value == shipped[0]  # a fresh cache opens on the shipped reference run
    at.slider(key="eval_n").set_value(1)
    at.sidebar.slider(key="max_new_tokens").set_value(6)
    first = run_on_page(at)
    assert run_selector(at).value == first
    assert at.dataframe[0].value["questions"].tolist() == [1, 1, 1]
    second = run_on_page(at)  # the first run stays listed; the new one is the one selected and shown
    assert second != first
    assert len(run_selector(at).options) == 2 + len(shipped)  # both runs, then the shipped ones
    assert run_selector(at).value == second
    at.toggle(key="eval_wrong").set_value(True)  # the next interaction keeps it
    at.run()
    assert run_selector(at).value == second
    assert not list((eval_cache / "eval" / "partial").glob("*.json"))  # the finished run's checkpoint is gone


def run_selector(at):
    (selector,) = [s for s in at.selectbox if s.label == "Run"]
    return selector


def run_on_page(at):
    """Press Run, wait for the background job, rerun the page; the path of the saved run."""
    at.button(key="eval_run").click()
    at.run()
    assert not at.exception, [e.value for e in at.exception]
    job = jobs.get("eval")
    assert (
        job is not None and job.label == "Evaluation run · default"
    )  # every session sees it: it names its stack
    wait_until(lambda: not job.running, what="the eval job")
    assert job.error is None and job.result is not None
    at.run()
    assert not at.exception, [e.value for e in at.exception]
    return job.result
