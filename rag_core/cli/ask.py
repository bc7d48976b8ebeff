"""`python -m rag_core ask QUESTION`: RAG-Token and RAG-Sequence answers, their probabilities, whether
the model is guessing at each (`analysis.confidence`; `--json` key "confidence") and the retrieved
passages; `--csv` writes the per-token trace (docs/trace-schema.md). `--expected
ANSWER` adds the diagnosis of the answer, as the Ask page's Diagnose panel shows it; `--sentences`
which sentence of the cited passage carried each answer."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from rag_core import exports
from rag_core.analysis.attribution.sentences import attribute
from rag_core.analysis.diagnosis import diagnosis_report as report
from rag_core.analysis.diagnosis.confidence import answer_confidences
from rag_core.analysis.matching import normalize_answer
from rag_core.cli.common import (
    CliError,
    add_decoding_args,
    add_index_args,
    add_model_args,
    decoding_fields,
    progress_bar,
    stack_from,
)
from rag_core.cli.report import ask_json, ask_text
from rag_core.config import RAG_SEQUENCE, RAG_TOKEN, AnswerSettings
from rag_core.marginals import citation
from rag_core.otlp import trace_otlp
from rag_core.pipeline import clean_question, load_pipeline

HELP = "answer a question with RAG-Token and RAG-Sequence (and the stuffed reading: --decode all)"


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("question")
    add_index_args(p)
    add_decoding_args(p, stuffed=True)
    p.add_argument("--csv", default=None, help="write the trace CSV here")
    p.add_argument("--parquet", default=None, help="write the trace as Parquet here (same columns)")
    p.add_argument("--jsonl", default=None, help="write the trace as JSON Lines here (same columns)")
    p.add_argument("--json", action="store_true", help="print a JSON summary instead of text")
    p.add_argument(
        "--otlp",
        default=None,
        metavar="FILE",
        help="write the query as OpenTelemetry spans (OTLP JSON, OpenInference conventions) for trace tools",
    )
    p.add_argument("--closed-book", action="store_true", help="also answer with no passage")
    p.add_argument(
        "--expected",
        default=None,
        metavar="ANSWER",
        help="the right answer (aliases separated by |): diagnose the answer as the Ask page's Diagnose "
        "panel does, with the verdicts, their evidence and the counterfactuals",
    )
    p.add_argument(
        "--sentences",
        action="store_true",
        help="also leave each sentence of the cited passage out and report how much less "
        "likely each answer becomes (Δ log p per sentence)",
    )
    add_model_args(p)


def run(args: argparse.Namespace) -> int:
    stack = stack_from(args)
    settings = AnswerSettings(**decoding_fields(args), index=args.index).validate()
    for notice in clean_question(args.question)[1]:  # a bad question fails now, not after a model load
        if args.json or not sys.stdout.isatty():  # the text report on a terminal says it already
            print(f"note: {notice}", file=sys.stderr)
    expected = [a.strip() for a in (args.expected or "").split("|") if normalize_answer(a)]
    if args.expected is not None and not expected:
        raise CliError("--expected is empty: give the right answer (aliases separated by |)")
    if settings.decode == "stuffed" and (expected or args.sentences):
        raise CliError("--expected and --sentences read the two marginals' answers: use --decode all")
    with progress_bar() as progress:
        pipe = load_pipeline(stack, settings, progress, corpus=args.corpus)
    trace = pipe.run(args.question)
    trace.closed_book = pipe.closed_book(args.question) if args.closed_book else None
    if args.csv:
        trace.to_csv(args.csv)
    for fmt in ("parquet", "jsonl"):
        if getattr(args, fmt):
            Path(getattr(args, fmt)).write_bytes(exports.frame_bytes(trace.to_frame(), fmt, "trace"))
    if args.otlp:
        Path(args.otlp).write_text(trace_otlp(trace), encoding="utf-8")
    sure = answer_confidences(pipe, trace)
    out = ask_json(trace, sure) if args.json else ask_text(trace, sure)
    if expected:
        checks = report.run_checks(pipe, trace, expected)
        d = report.full_diagnosis(trace, expected, checks)
        removals = report.single_removals(trace, checks.forced)
        if args.json:
            out["diagnosis"] = report.diagnosis_json(d, checks, removals)
        else:
            out += "\n\n" + report.diagnosis_text(d, checks, removals)
    if args.sentences:
        rows = sentence_rows(pipe, trace)
        if args.json:
            out["sentences"] = rows
        else:
            out += "\n\n" + sentence_text(rows)
    print(json.dumps(out, indent=1, ensure_ascii=False) if args.json else out)
    return 0


def sentence_rows(pipe, trace) -> list[dict]:
    """Per decoding: the passage its answer cites most and each sentence's Δ log p(y|x,z)."""
    out = []
    for d in (RAG_TOKEN, RAG_SEQUENCE):
        c = trace.answer(d)
        if c is None or not c.token_ids:
            continue
        z = int(citation(trace.log_prior, c.token_logp).argmax())
        att = attribute(pipe, trace.question, trace.hits[z].passage, c.token_ids)
        out += [
            {"decoding": d, "answer": c.answer, "doc_rank": z + 1, "doc_title": att.passage.title, **r}
            for r in att.rows()
        ]
    return out


def sentence_text(rows: list[dict]) -> str:
    lines = ["which sentence carried it (Δ log p(y|x,z) with the sentence left out):"]
    for r in rows:
        lines.append(
            f"  {r['decoding']:<13} #{r['doc_rank']} s{r['sentence']} rank {r['rank']}  "
            f"Δ {r['delta_logp']:+.3f}  {r['text'][:90]}"
        )
    return "\n".join(lines)
