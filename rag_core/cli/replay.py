"""`python -m rag_core replay FILE`: another RAG system's traces (OTLP JSON or protobuf with the
OpenInference conventions, Arize Phoenix's spans saved as Parquet, or plain JSON Lines), each
replayed exactly on our generator (the default, or `--generator DIR`): whether the logged answer is
reproduced, its probability, what each document is worth to it, the verdicts and the confidence.
`--expected` reads the lines `eval` reads and matches them to traces by question text."""

from __future__ import annotations

import argparse
import dataclasses
import json
import re
import sys
from pathlib import Path

from rag_core.analysis.evaluation.questions import read_questions
from rag_core.cli.common import CliError, add_model_args, positive_int, progress_bar, stack_from
from rag_core.pipeline import load_models
from rag_core.replay.batch import replay_all
from rag_core.replay.records import Imported, ReplayFileError
from rag_core.replay.report import findings_otlp, replay_frame, summary
from rag_core.replay.sources import read_traces
from rag_core.storage.files import write_text_atomic
from rag_core.trace import write_csv

HELP = "replay another RAG system's traces exactly and say why each answer is what it is"


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("file", metavar="FILE", help="a trace file or a folder of them")
    add_model_args(p)
    p.add_argument(
        "--expected", default=None, metavar="FILE.jsonl", help="expected answers, as eval reads them"
    )
    p.add_argument("--limit", type=positive_int, default=None, help="replay the first N traces only")
    p.add_argument("--orders", action="store_true", help="also read every trace in other document orders")
    p.add_argument(
        "--json", default=None, metavar="OUT", help="one JSON object per trace (JSON Lines; - prints)"
    )
    p.add_argument("--csv", default=None, metavar="OUT", help="one row per trace and document")
    p.add_argument(
        "--otlp", default=None, metavar="DIR", help="the findings as OpenInference spans, a file a trace"
    )


def question_key(text: str) -> str:
    """How a trace's question meets an expected answer's: case and spacing aside.

    >>> question_key("  Who wrote\\n Moby-Dick? ") == question_key("who wrote moby-dick?")
    True
    """
    return re.sub(r"\s+", " ", text).strip().casefold()


def with_expected(imported: Imported, path: str) -> Imported:
    questions, _ = read_questions(path)
    answers = {question_key(q.question): q.answers for q in questions}
    traces = [
        dataclasses.replace(t, expected=answers.get(question_key(t.question), t.expected))
        for t in imported.traces
    ]
    return Imported(traces, imported.skipped)


def run(args: argparse.Namespace) -> int:
    if not (args.json or args.csv or args.otlp):
        raise CliError("say where the findings go: --json OUT, --csv OUT or --otlp DIR")
    try:
        imported = read_traces(args.file)
    except ReplayFileError as e:
        raise CliError(str(e)) from None
    if args.expected:
        imported = with_expected(imported, args.expected)
    for s in imported.skipped:
        print(f"skipped {s.message()}", file=sys.stderr)
    if not imported.traces:
        raise CliError(f"{Path(args.file).name}: no trace that can be replayed")
    models = load_models(stack_from(args))
    store = Path(args.json) if args.json and args.json != "-" else None
    with progress_bar() as bar:
        objects = replay_all(models.generator, imported, store, args.orders, args.limit, bar)
    if store is not None:  # the run's own lines, in trace order (resumed ones included)
        write_text_atomic(store, "".join(json.dumps(o, ensure_ascii=False) + "\n" for o in objects))
    elif args.json == "-":
        for o in objects:
            print(json.dumps(o, ensure_ascii=False))
    if args.csv:
        write_csv(replay_frame(objects), args.csv)
    if args.otlp:
        folder = Path(args.otlp)
        folder.mkdir(parents=True, exist_ok=True)
        for n, o in enumerate(x for x in objects if not x.get("skipped")):
            write_text_atomic(folder / f"{n:04d}.json", json.dumps(findings_otlp(o), ensure_ascii=False))
    print(summary(objects), file=sys.stderr)
    return 0
