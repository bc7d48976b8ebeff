"""`python -m rag_core eval QUESTIONS.jsonl`: exact match, answer-contained and answer-recall@K for
closed-book, RAG-Token and RAG-Sequence, with the diagnosis verdict counts of the wrong answers.

Every run is also saved under `cache_dir()/eval/` (JSON + CSV) for the app's Eval page.
User errors (missing or empty file, no usable line, bad flag) exit 2 with one `error:` line;
malformed lines are skipped and counted.
"""
from __future__ import annotations

import json
import sys
from pathlib import Path

from .cli import CliError, _config, _model_args, _Parser, _positive_float, _positive_int


def build_parser() -> _Parser:
    p = _Parser(prog="python -m rag_core eval", description="Evaluate a questions JSONL under all three modes.")
    p.add_argument("questions", help='JSONL: {"question": str, "answers": [str, ...]} per line')
    p.add_argument("--index", default=None, help="wiki, 2016, 2018, a user index name or a folder")
    p.add_argument("-k", type=_positive_int, default=5, help="passages retrieved per question")
    p.add_argument("--beams", type=_positive_int, default=1)
    p.add_argument("--length-penalty", type=float, default=1.0,
                    help="beam search: finished beams rank by sum log p / T ** this (default 1.0)")
    p.add_argument("--max-new-tokens", type=_positive_int, default=16)
    p.add_argument("--rescore", choices=["thorough", "fast"], default="thorough")
    p.add_argument("--scale", type=_positive_float, default=None, help="retriever scale (default: the encoder's)")
    p.add_argument("--corpus", default=None, help="a JSONL corpus to index and search instead")
    p.add_argument("--csv", default=None, help="write one row per (question, mode) here")
    p.add_argument("--json", action="store_true", help="print the summary as JSON instead of a table")
    p.add_argument("--limit", type=_positive_int, default=None, help="evaluate only the first N questions")
    p.add_argument("--no-diagnose", action="store_true", help="skip the verdicts of wrong answers")
    p.add_argument("--no-save", action="store_true", help="do not save the run for the app's Eval page")
    p.add_argument("--traces", default=None, metavar="DIR",
                   help="also store each question's trace in DIR as JSON (for --sweep: counterfactuals over K and scale)")
    p.add_argument("--sweep", action="store_true",
                   help="with --traces DIR of an earlier run: EM over K and the scale from the stored traces, no model call")
    p.add_argument("--sweep-k", type=_positive_int, nargs="+", default=[1, 2, 3, 4, 5], metavar="K")
    p.add_argument("--sweep-scale", type=_positive_float, nargs="+", default=[5.0, 10.0, 20.0, 40.0], metavar="S")
    _model_args(p)
    return p


def run_sweep(args) -> int:
    from .eval_sweep import load_traces, sweep

    if not args.traces:
        raise CliError("--sweep needs --traces DIR (the folder an earlier eval --traces run wrote)")
    frame = sweep(load_traces(args.traces), args.sweep_k, args.sweep_scale)
    if args.csv:
        frame.to_csv(args.csv, index=False)
    print(frame.to_string(index=False, float_format=lambda x: f"{x:.3f}"))
    return 0


def run(argv: list[str]) -> int:
    from .evaluation import read_questions, run_eval, save_run

    args = build_parser().parse_args(argv)
    if args.sweep:
        return run_sweep(args)
    args.decode = "both"
    cfg = _config(args)
    questions, skipped = read_questions(args.questions)  # user errors surface before any model loads
    if args.limit:
        questions = questions[: args.limit]
    if args.csv:
        out = Path(args.csv)
        if out.is_dir() or not out.parent.exists():
            raise CliError(f"cannot write the CSV to {args.csv}: no such folder")
    if skipped:
        print(f"skipped {skipped} malformed line{'s' if skipped != 1 else ''} of {args.questions}", file=sys.stderr)

    from tqdm import tqdm

    from .cli import _progress_bar
    from .pipeline import load_pipeline

    bar, progress = _progress_bar()
    try:
        pipe = load_pipeline(cfg, progress)
    finally:
        bar.close()
    with tqdm(total=len(questions), file=sys.stderr, desc="eval", unit="q", dynamic_ncols=True) as qbar:
        def step(done, total, result):
            qbar.update(1)
            rs = result.modes.get("rag-sequence")
            qbar.set_postfix_str((rs.answer if rs else "")[:30])

        result = run_eval(pipe, questions, cfg, step, diagnose=not args.no_diagnose,
                          settings={"file": str(args.questions), "skipped": skipped},
                          trace_dir=Path(args.traces) if args.traces else None)
    if args.csv:
        result.to_csv(args.csv)
    if not args.no_save:
        try:
            save_run(result)
        except OSError as e:  # a read-only cache must not lose the printed result
            print(f"note: could not save the run for the app ({e})", file=sys.stderr)
    if args.json:
        print(json.dumps({"settings": result.settings, "summary": result.summary()}, indent=1, ensure_ascii=False))
    else:
        print(result.table_text())
    return 0


def main(argv: list[str]) -> int:
    """Entry point for `python -m rag_core eval ...` (also callable on its own)."""
    from . import cli
    from .evaluation import EvalDataError

    errors = cli._user_errors() + (EvalDataError,)
    try:
        return run(list(argv))
    except errors as e:
        print(f"error: {str(e).splitlines()[0] if str(e) else type(e).__name__}", file=sys.stderr)
        return 2
    except ValueError as e:
        print(f"error: {str(e).splitlines()[0]}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("error: interrupted", file=sys.stderr)
        return 130
