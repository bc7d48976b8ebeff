"""`python -m rag_core eval --compare RUN_A RUN_B [--csv FILE]`: two saved evaluation runs compared
question by question, from the stored runs alone (no model loads, no model call).

A run is a saved run's file (`.json`, as `eval` writes it) or its name in the eval cache folder
(`latest`, `run-20261201-120000`). The output: both runs' settings, EM in each over the paired
questions, the verdict transitions from A to B, and every question whose verdict changed.
"""

from __future__ import annotations

import argparse
from pathlib import Path

from rag_core.analysis.evaluation.run_compare import Comparison, compare_results
from rag_core.analysis.evaluation.runs import EvalRun, eval_folder, load_run
from rag_core.cli.common import CliError
from rag_core.trace import neutralise

SETTINGS_SHOWN = ("file", "index", "k", "scale", "beams", "rescore", "generator")


def resolve_run(name: str) -> EvalRun:
    path = Path(name)
    if not path.is_file():
        path = eval_folder() / f"{name}.json"
    run = load_run(path) if path.is_file() else None
    if run is None:
        raise CliError(
            f"no saved evaluation run {name!r}: give a run's .json file or the name of one in {eval_folder()}"
        )
    return run


def describe(run: EvalRun) -> str:
    """One line of a run's settings: 'file dev.jsonl · index wiki · k 1 · …'."""
    s = run.settings
    return (
        " · ".join(f"{key} {s[key]}" for key in SETTINGS_SHOWN if s.get(key) not in (None, ""))
        + f" · {len(run.results)} questions"
    )


def comparison_text(cmp: Comparison, a: EvalRun, b: EvalRun) -> str:
    em_a, em_b = cmp.em()
    c = cmp.counts()
    lines = [
        f"A: {describe(a)}",
        f"B: {describe(b)}",
        "",
        f"{cmp.mode} EM over {len(cmp.rows)} paired questions: A {100 * em_a:.1f}% -> B {100 * em_b:.1f}%"
        f" · fixed {c['fixed']} · broken {c['broken']} · unchanged {c['same']}",
    ]
    if c["only in A"] or c["only in B"]:
        lines.append(f"not paired: {c['only in A']} questions only in A, {c['only in B']} only in B")
    trans = cmp.transitions()
    lines += ["", "verdict transitions (A -> B):", trans.to_string(index=False) if len(trans) else "(none)"]
    diff = cmp.frame()
    changed = diff[diff.outcome_a != diff.outcome_b]
    lines += ["", f"questions whose verdict changed ({len(changed)}):"]
    if len(changed):
        lines.append(
            changed[["question", "answer_a", "answer_b", "outcome_a", "outcome_b"]].to_string(index=False)
        )
    else:
        lines.append("(none)")
    return "\n".join(lines)


def run_compare(args: argparse.Namespace) -> int:
    if args.csv:
        out = Path(args.csv)
        if out.is_dir() or not out.parent.exists():
            raise CliError(f"cannot write the CSV to {args.csv}: no such folder")
    a, b = (resolve_run(name) for name in args.compare)
    cmp = compare_results(a.results, b.results, args.mode)
    if not cmp.rows:
        raise CliError(f"the two runs share no question answered under {args.mode}")
    if args.csv:
        frame = cmp.frame()
        for col in frame.select_dtypes("object"):  # answers and questions a spreadsheet must not run
            frame[col] = frame[col].map(neutralise)
        frame.to_csv(args.csv, index=False)
    print(comparison_text(cmp, a, b))
    return 0
