"""The command line on the real default stack and on toys: outputs, CSV invariants, errors."""

import json
import os
import subprocess
import sys

import pandas as pd
import pytest

from rag_core import cli as commands
from rag_core.cli import index_swap

from conftest import ROOT, check_trace_invariants, run_cli


def cli(*args):
    return run_cli(*args)


def cli_process(*args, timeout=600):
    """The command as a user runs it, in a fresh interpreter (the end-to-end check)."""
    return subprocess.run(
        [sys.executable, "-m", "rag_core", *args],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=timeout,
        env=dict(os.environ),
    )


@pytest.mark.parametrize(
    "name,expected",
    [
        ("obama", ["born Hawaii\tp_seq=0.516\tp_tok=0.449", "Chicago Hawaii\tp_seq=0.065\tp_tok=0.090"]),
        ("softmax", ["0.550 0.247 0.202"]),
        ("posterior", ["0.913 0.087"]),
    ],
)
def test_toy_prints_the_seed_numbers(name, expected):
    out = cli("toy", name)
    assert out.returncode == 0, out.stderr
    assert out.stdout.splitlines() == expected


def test_toy_csv_keeps_invariants(tmp_path):
    out = cli("toy", "obama", "--csv", str(tmp_path / "t.csv"))
    assert out.returncode == 0
    frame = pd.read_csv(tmp_path / "t.csv")
    check_trace_invariants(frame)
    assert set(frame["decoding"]) == {"rag-token", "rag-sequence"}


@pytest.mark.slow
def test_ask_answers_moby_dick_and_writes_a_valid_csv(tmp_path):
    out = cli_process("ask", "Who wrote Moby-Dick?", "--csv", str(tmp_path / "t.csv"), "--json")
    assert out.returncode == 0, out.stderr[-2000:]
    result = json.loads(out.stdout)
    assert "Melville" in result["answers"]["rag-token"][0]["answer"]
    assert "Melville" in result["answers"]["rag-sequence"][0]["answer"]
    assert len(result["passages"]) == 5
    assert sum(p["prior"] for p in result["passages"]) == pytest.approx(1.0)
    assert any(p["title"] == "Moby-Dick" for p in result["passages"])
    frame = pd.read_csv(tmp_path / "t.csv")
    check_trace_invariants(frame)
    assert frame["doc_rank"].max() == 5


@pytest.mark.parametrize(
    "args,message",
    [
        (["ask", "   "], "empty"),
        (["ask", "q", "-k", "0"], "at least 1"),
        (["ask", "q", "-k", "five"], "whole number"),
        (["ask", "q", "--index", "1999"], "unknown index"),
        (["ask", "q", "--generator", "./no/such/folder"], "not found"),
        (["ask", "q", "--scale", "-3"], "positive"),
        (["toy", "missing"], "no toy example"),
        (["bench", "--only", "nonsense"], "invalid choice"),
        (["build-index", "/no/such.jsonl", "--out", "/tmp/rag-loupe-test-no-such-index"], "not found"),
    ],
)
def test_user_errors_exit_2_with_one_line(args, message):
    out = cli(*args)
    assert out.returncode == 2
    lines = out.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error:") and message in lines[0], out.stderr
    assert "Traceback" not in out.stderr


def test_a_failed_bench_script_fails_the_run(monkeypatch, capsys):
    from rag_core import cli
    from rag_core.cli import bench

    monkeypatch.setattr(bench, "run_script", lambda name, args: {f"{name}_error": "AssertionError: boom"})
    assert cli.main(["bench", "--only", "ann"]) == 1
    assert capsys.readouterr().err.strip().splitlines()[-1] == "error: bench script(s) failed: ann"


def test_the_trace_schema_document_lists_exactly_the_exported_columns():
    import re

    from rag_core.analysis.evaluation.runs import CSV_COLUMNS
    from rag_core.trace import COLUMNS

    doc = (ROOT / "docs" / "trace-schema.md").read_text(encoding="utf-8")
    trace_part, eval_part = doc.split("## The eval rows")

    def listed(part: str) -> list[str]:
        names = []
        for cell in re.findall(r"^\| ([^|]+) \|", part, flags=re.M):
            names += [n.strip() for n in cell.split(",")]
        return [n for n in names if n not in ("column", "---")]

    assert listed(trace_part) == COLUMNS
    assert listed(eval_part) == CSV_COLUMNS


def test_the_index_swap_answers_to_its_first_name_too(monkeypatch):
    ran = []
    monkeypatch.setattr(index_swap, "run", lambda args: ran.append((args.command, args.split)) or 0)
    assert commands.main(["index-swap", "--split", "test"]) == 0
    assert commands.main(["leaders", "--split", "tune"]) == 0  # the name users' scripts know
    assert ran == [("index-swap", "test"), ("leaders", "tune")]
