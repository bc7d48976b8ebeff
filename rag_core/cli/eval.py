"""`python -m rag_core eval QUESTIONS.jsonl`: exact match, answer-contained and answer-recall@K for
closed-book, RAG-Token and RAG-Sequence, with the diagnosis verdict counts of the wrong answers,
the retrieval metrics (hit@1, MRR, nDCG), the split of answers by whether a passage held the answer,
and, per answer, the share of its tokens that came from the model's weights, averaged over the right
and over the wrong answers. `--compare RUN_A RUN_B` compares two saved runs instead (`eval_compare`);
`--choose-rule RUN` chooses the low-confidence rule on one (`eval_rule`).

Every run is also saved under `cache_dir()/eval/` (JSON + CSV) for the app's Eval page.
User errors (missing or empty file, no usable line, bad flag) exit 2 with one `error:` line;
malformed lines are skipped and counted.
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
from pathlib import Path

from rag_core.analysis.evaluation import eval_checkpoint, shipped_runs
from rag_core.analysis.evaluation.eval_summary import (
    distractor_line,
    distractor_picks,
    em_by_kind,
    kind_table,
)
from rag_core.analysis.evaluation.questions import read_questions
from rag_core.analysis.evaluation.runs import run_eval, save_run
from rag_core.analysis.evaluation.sweep import load_traces, stored_traces, sweep
from rag_core.cli.common import (
    CliError,
    add_batch_arg,
    add_decoding_args,
    add_index_args,
    add_model_args,
    decoding_fields,
    positive_float,
    positive_int,
    progress_bar,
    stack_from,
)
from rag_core.cli.eval_compare import run_compare
from rag_core.cli.eval_rule import run_choose_rule
from rag_core.config import RAG_SEQUENCE, AnswerSettings, StackSpec
from rag_core.models.presets import PRESETS
from rag_core.otlp import trace_otlp
from rag_core.pipeline import load_pipeline
from rag_core.stacks import fingerprint

HELP = "exact match on a questions JSONL under all three modes"


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("questions", nargs="?", help='JSONL: {"question": str, "answers": [str, ...]} per line')
    p.add_argument(
        "--compare",
        nargs=2,
        metavar=("RUN_A", "RUN_B"),
        default=None,
        help="compare two saved runs question by question (a run's .json file or its saved name, e.g. "
        "latest); no model call",
    )
    p.add_argument(
        "--choose-rule",
        metavar="RUN",
        default=None,
        help="choose the low-confidence rule's threshold and compared readings on a saved run (run it "
        "on dev, made with --stuffed); no model call",
    )
    p.add_argument(
        "--mode",
        choices=["rag-token", "rag-sequence", "closed-book", "stuffed"],
        default=RAG_SEQUENCE,
        help="with --compare: the mode whose answers are compared",
    )
    add_index_args(p)
    add_decoding_args(p, decode=False)
    p.add_argument("--csv", default=None, help="write one row per (question, mode) here")
    p.add_argument("--parquet", default=None, help="the same rows as Parquet")
    p.add_argument("--jsonl", default=None, help="the same rows as JSON Lines")
    p.add_argument("--json", action="store_true", help="print the summary as JSON instead of a table")
    p.add_argument("--limit", type=positive_int, default=None, help="evaluate only the first N questions")
    p.add_argument("--no-diagnose", action="store_true", help="skip the verdicts of wrong answers")
    p.add_argument(
        "--stuffed",
        action="store_true",
        help="also read the K passages together in one prompt (the stuffed reading): a fourth mode, with "
        "the passage its exact leave-one-out leans on beside the one the mixture cites",
    )
    p.add_argument("--no-save", action="store_true", help="do not save the run for the app's Eval page")
    p.add_argument(
        "--restart",
        action="store_true",
        help="start afresh instead of continuing an interrupted run of the same inputs",
    )
    p.add_argument(
        "--traces",
        default=None,
        metavar="DIR",
        help=(
            "also store each question's trace in DIR as JSON (for --sweep: counterfactuals over K and scale)"
        ),
    )
    p.add_argument(
        "--otlp",
        default=None,
        metavar="DIR",
        help="also write each question as OpenTelemetry spans (OTLP JSON, OpenInference conventions) to "
        "DIR/NNNN.json, for trace tools",
    )
    p.add_argument(
        "--ship",
        default=None,
        metavar="NAME",
        help="also store the run as the shipped reference assets/eval/runs/NAME.json, which the Eval page "
        "opens on (the whole file, default models, a named index, with the verdicts)",
    )
    p.add_argument(
        "--sweep",
        action="store_true",
        help=(
            "with --traces DIR of an earlier run: EM over K and the scale from the stored traces, "
            "no model call"
        ),
    )
    p.add_argument("--sweep-k", type=positive_int, nargs="+", default=[1, 2, 3, 4, 5], metavar="K")
    p.add_argument(
        "--sweep-scale", type=positive_float, nargs="+", default=[5.0, 10.0, 20.0, 40.0], metavar="S"
    )
    add_model_args(p)
    add_batch_arg(p)


def run_sweep(args: argparse.Namespace) -> int:
    if not args.traces:
        raise CliError("--sweep needs --traces DIR (the folder an earlier eval --traces run wrote)")
    frame = sweep(load_traces(args.traces), args.sweep_k, args.sweep_scale)
    if args.csv:
        frame.to_csv(args.csv, index=False)
    print(frame.to_string(index=False, float_format=lambda x: f"{x:.3f}"))
    return 0


def write_outputs(args: argparse.Namespace, stack: StackSpec, settings: AnswerSettings, result) -> None:
    """A finished run's files: the rows (--csv, --parquet, --jsonl), the run saved for the app, the
    shipped reference (--ship)."""
    if args.csv:
        result.to_csv(args.csv)
    for fmt in ("parquet", "jsonl"):
        if getattr(args, fmt):
            result.export(getattr(args, fmt), fmt)
    if not args.no_save:
        try:
            save_run(result)
        except OSError as e:  # a read-only cache must not lose the printed result
            print(f"note: could not save the run for the app ({e})", file=sys.stderr)
    if args.ship:
        print(
            f"shipped as {shipped_runs.ship(result, stack, settings, Path(args.questions), args.ship)}",
            file=sys.stderr,
        )


def write_otlp(trace_dir: Path, out: Path, total: int) -> None:
    """One OTLP JSON file per question (`otlp.trace_otlp`), named as its stored trace: 0000.json,
    0001.json, …; a resumed run's questions taken from its checkpoint have no trace, and are named."""
    out.mkdir(parents=True, exist_ok=True)
    ours = {f"{i:04d}.json.gz" for i in range(total)}  # an older run's traces in the folder stay out
    written = 0
    for path, _, trace in stored_traces(trace_dir, ours):
        (out / path.name.removesuffix(".gz")).write_text(trace_otlp(trace), encoding="utf-8")
        written += 1
    if written < total:
        print(
            f"note: {total - written} questions were taken from an interrupted run's checkpoint and have "
            "no trace to write as OTLP (--restart evaluates them again)",
            file=sys.stderr,
        )


def check_shippable(args: argparse.Namespace, stack: StackSpec, settings: AnswerSettings) -> None:
    """A shipped run is the whole question file on a named index with the default models, so that
    the Eval page and its test can recompute it (`shipped_runs`)."""
    if args.limit or args.no_diagnose or args.corpus:
        raise CliError("--ship stores a whole run: drop --limit, --no-diagnose and --corpus")
    shippable = [
        shipped_runs.models_of(StackSpec(**PRESETS[name])) for name in shipped_runs.SHIPPABLE_PRESETS
    ]
    if shipped_runs.models_of(stack) not in shippable:
        raise CliError(
            "--ship is for the default models or --preset base (a shipped run is checked against them)"
        )
    try:
        shipped_runs.fingerprint(stack, settings, Path(args.questions))
    except ValueError as e:
        raise CliError(str(e)) from None


def run(args: argparse.Namespace) -> int:
    if args.compare:
        return run_compare(args)
    if args.choose_rule:
        return run_choose_rule(args)
    if not args.questions:
        raise CliError("the following arguments are required: questions")
    if args.sweep:
        return run_sweep(args)
    stack = stack_from(args, args.batch_questions)
    settings = AnswerSettings(
        **decoding_fields(args, decode="all" if args.stuffed else "both"), index=args.index
    ).validate()
    questions, skipped = read_questions(args.questions)  # user errors surface before any model loads
    if args.limit:
        questions = questions[: args.limit]
    for name in ("csv", "parquet", "jsonl"):
        out = getattr(args, name)
        if out and (Path(out).is_dir() or not Path(out).parent.exists()):
            what = {"csv": "CSV", "parquet": "Parquet file", "jsonl": "JSON Lines"}[name]
            raise CliError(f"cannot write the {what} to {out}: no such folder")
    if args.ship:
        check_shippable(args, stack, settings)
    if skipped:
        print(
            f"skipped {skipped} malformed line{'s' if skipped != 1 else ''} of {args.questions}",
            file=sys.stderr,
        )
    with progress_bar() as progress:
        pipe = load_pipeline(stack, settings, progress, corpus=args.corpus)

        def step(done, total, result):
            rs = result.modes.get(RAG_SEQUENCE)
            progress(f"eval {done}/{total}: {(rs.answer if rs else '')[:30]}", done / total)

        key = eval_checkpoint.run_key(pipe, questions, settings, not args.no_diagnose)
        resume = eval_checkpoint.default_path(key)
        if args.restart:
            eval_checkpoint.discard(resume)
        elif done := len(eval_checkpoint.load(resume, key)[1]):
            print(
                f"continuing an interrupted run: {done} of {len(questions)} questions already evaluated "
                "(--restart starts afresh)",
                file=sys.stderr,
            )
        with tempfile.TemporaryDirectory() as scratch:  # the traces OTLP is written from, unless kept
            trace_dir = Path(args.traces) if args.traces else (Path(scratch) if args.otlp else None)
            result = run_eval(
                pipe,
                questions,
                settings,
                step,
                diagnose=not args.no_diagnose,
                extra={"file": str(args.questions), "skipped": skipped, "stack": fingerprint(stack)},
                trace_dir=trace_dir,
                resume=resume,
            )
            if args.otlp:
                write_otlp(trace_dir, Path(args.otlp), len(questions))
    write_outputs(args, stack, settings, result)
    by_kind = em_by_kind(result.results, {q.question: q.kind for q in questions})
    picks = distractor_picks(result.results, {q.question: q.distractors for q in questions})
    if args.json:
        summary = result.summary() | ({"by_kind": by_kind} if by_kind else {})
        summary |= {"distractor_picks": picks} if picks else {}
        print(json.dumps({"settings": result.settings, "summary": summary}, indent=1, ensure_ascii=False))
    else:
        print(result.table_text())
        for table in (kind_table(by_kind), distractor_line(picks)):
            if table:
                print("\n" + table)
    return 0
