"""`python -m rag_core <command>`: the engine's command line (DESIGN.md §4).

Errors a user can cause exit with code 2 and one line on stderr starting with `error:`.
"""
from __future__ import annotations

import argparse
import json
import math
import os
import sys
from pathlib import Path

from .config import Config

USER_ERRORS: tuple[type[BaseException], ...] = ()


EXTRA_COMMANDS = {"leaders": "the 2016/2018 index hot-swap experiment", "eval": "exact match on a questions JSONL",
                  "bench": "the performance figures"}


class CliError(Exception):
    """A user error found by the CLI itself."""


class _Parser(argparse.ArgumentParser):
    def error(self, message):  # argparse's own errors follow the same one-line rule
        raise CliError(message)


def _user_errors() -> tuple[type[BaseException], ...]:
    from .corpus import CorpusError
    from .index import IndexLoadError
    from .pipeline import QuestionError
    from .sources import ModelSourceError
    from .toys import ToyError

    return (CliError, CorpusError, IndexLoadError, QuestionError, ModelSourceError, ToyError, FileNotFoundError,
            IsADirectoryError, PermissionError, UnicodeDecodeError)


def _positive_int(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a whole number, got {text!r}") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be at least 1, got {value}")
    return value


def _positive_float(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a number, got {text!r}") from None
    if not (math.isfinite(value) and value > 0):
        raise argparse.ArgumentTypeError(f"must be a positive number, got {text!r}")
    return value


def _model_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("--question-encoder", default=None, help="query encoder: packaged id, folder or hub id")
    p.add_argument("--ctx-encoder", default=None, help="passage encoder (DPR); default: the question encoder")
    p.add_argument("--generator", default=None, help="generator: packaged id, folder, hub id or RAG checkpoint")
    p.add_argument("--preset", choices=sorted(PRESETS), default=None, help="a named model stack")
    p.add_argument("--device", choices=["auto", "cpu", "cuda"], default="auto")
    p.add_argument("--threads", type=_positive_int, default=None, help="torch CPU threads (default: all cores)")
    p.add_argument("--allow-downloads", action="store_true", help="let hub ids download (off by default)")


PRESETS = {
    "default": {},
    "paper-token": {"question_encoder": "facebook/rag-token-nq", "generator": "facebook/rag-token-nq",
                    "ctx_encoder": "facebook/dpr-ctx_encoder-multiset-base"},
    "paper-sequence": {"question_encoder": "facebook/rag-sequence-nq", "generator": "facebook/rag-sequence-nq",
                       "ctx_encoder": "facebook/dpr-ctx_encoder-multiset-base"},
}


def build_parser() -> argparse.ArgumentParser:
    parser = _Parser(prog="python -m rag_core", description="RAG Loupe: the RAG latent-variable model, made visible.")
    sub = parser.add_subparsers(dest="command", required=True, parser_class=_Parser)

    ask = sub.add_parser("ask", help="answer a question with RAG-Token and RAG-Sequence")
    ask.add_argument("question")
    ask.add_argument("--index", default=None, help="wiki, 2016, 2018, a user index name or a folder")
    ask.add_argument("-k", type=_positive_int, default=5)
    ask.add_argument("--decode", choices=["token", "sequence", "both"], default="both")
    ask.add_argument("--beams", type=_positive_int, default=1)
    ask.add_argument("--length-penalty", type=float, default=1.0,
                    help="beam search: finished beams rank by sum log p / T ** this (default 1.0)")
    ask.add_argument("--max-new-tokens", type=_positive_int, default=16)
    ask.add_argument("--rescore", choices=["thorough", "fast"], default="thorough")
    ask.add_argument("--scale", type=_positive_float, default=None, help="retriever scale (default: the encoder's)")
    ask.add_argument("--csv", default=None, help="write the trace CSV here")
    ask.add_argument("--json", action="store_true", help="print a JSON summary instead of text")
    ask.add_argument("--corpus", default=None, help="a JSONL corpus to index and search instead")
    ask.add_argument("--closed-book", action="store_true", help="also answer with no passage")
    _model_args(ask)

    toy = sub.add_parser("toy", help="run a hand-made example (obama, softmax, posterior) or a toy JSON file")
    toy.add_argument("name")
    toy.add_argument("--csv", default=None)

    build = sub.add_parser("build-index", help="encode a JSONL corpus into a FAISS index folder")
    build.add_argument("corpus")
    build.add_argument("--out", required=True, help="a new folder, or an existing index (with --force)")
    build.add_argument("--force", action="store_true", help="replace the existing index at --out")
    build.add_argument("--factory", default="Flat", help="FAISS factory string: Flat (exact), HNSW32, IVF1024,Flat ...")
    _model_args(build)

    for name, helptext in EXTRA_COMMANDS.items():
        extra = sub.add_parser(name, help=helptext)
        extra.add_argument("rest", nargs=argparse.REMAINDER)
    return parser


def _config(args) -> Config:
    preset = PRESETS[args.preset or "default"]
    fields = {
        "question_encoder": args.question_encoder or preset.get("question_encoder") or Config.question_encoder,
        "ctx_encoder": args.ctx_encoder or preset.get("ctx_encoder"),
        "generator": args.generator or preset.get("generator") or Config.generator,
        "device": args.device,
        "threads": args.threads,
        "allow_downloads": args.allow_downloads,
    }
    for name in ("k", "decode", "beams", "max_new_tokens", "length_penalty", "rescore", "scale", "index", "corpus"):
        if hasattr(args, name):
            fields[name] = getattr(args, name)
    return Config(**fields).validate()


def _progress_bar():
    """A tqdm bar on stderr driven by (message, fraction) callbacks."""
    from tqdm import tqdm

    bar = tqdm(total=100, file=sys.stderr, leave=False, bar_format="{desc} {percentage:3.0f}%|{bar}|",
               disable=not sys.stderr.isatty() and os.environ.get("RAG_LOUPE_PROGRESS") != "1")

    def update(message: str, fraction: float) -> None:
        bar.set_description_str(message[:60])
        bar.n = int(100 * max(0.0, min(1.0, fraction)))
        bar.refresh()

    return bar, update


def cmd_ask(args) -> int:
    from .pipeline import load_pipeline
    from .report import ask_json, ask_text

    from .pipeline import clean_question

    cfg = _config(args)
    clean_question(args.question)  # a bad question fails now, not after a model load
    bar, progress = _progress_bar()
    try:
        pipe = load_pipeline(cfg, progress)
    finally:
        bar.close()
    trace = pipe.run(args.question, cfg)
    closed = pipe.closed_book(args.question, cfg) if args.closed_book else None
    trace.closed_book = closed
    if args.csv:
        trace.to_csv(args.csv)
    print(json.dumps(ask_json(trace), indent=1, ensure_ascii=False) if args.json else ask_text(trace))
    return 0


def cmd_toy(args) -> int:
    from .toys import run_toy, summary_lines

    result = run_toy(args.name)
    for line in summary_lines(result):
        print(line)
    if args.csv:
        if result.trace is None:
            raise CliError(f"toy {args.name} has no generator tables, so it has no token trace to write")
        result.trace.to_csv(args.csv)
    return 0


def cmd_build_index(args) -> int:
    from .catalog import build_corpus_index
    from .corpus import read_corpus_file
    from .index import check_output_folder

    cfg = _config(args)
    out = check_output_folder(args.out, args.force)  # refuse a non-index folder before any work
    parsed = read_corpus_file(args.corpus)
    if parsed.skipped:
        print(f"skipped {parsed.skipped} unreadable rows", file=sys.stderr)
    from .encoders import load_encoder
    from .sources import pick_device, set_threads

    set_threads(cfg.threads)
    encoder = load_encoder(cfg.question_encoder, cfg.ctx_encoder, pick_device(cfg.device), cfg.allow_downloads)
    bar, progress = _progress_bar()
    try:
        idx = build_corpus_index(parsed.passages, encoder, out, factory=args.factory, progress=progress)
    finally:
        bar.close()
    print(f"built {args.out}: {len(idx)} passages, dim {idx.dim}, {idx.manifest['factory']}, encoder {encoder.id}")
    return 0


def _dispatch_extra(name: str, rest: list[str]) -> int:
    import importlib

    try:
        module = importlib.import_module(f".{name}_cli", __package__)
    except ModuleNotFoundError:
        raise CliError(f"the {name} command is not available in this version") from None
    return module.main(rest)


def main(argv: list[str] | None = None) -> int:
    global USER_ERRORS
    USER_ERRORS = _user_errors()
    try:
        argv = list(sys.argv[1:] if argv is None else argv)
        if argv and argv[0] in EXTRA_COMMANDS:  # these parse their own flags
            return _dispatch_extra(argv[0], argv[1:])
        args = build_parser().parse_args(argv)
        if args.command == "ask":
            return cmd_ask(args)
        if args.command == "toy":
            return cmd_toy(args)
        if args.command == "build-index":
            return cmd_build_index(args)
        return _dispatch_extra(args.command, args.rest)
    except USER_ERRORS as e:
        print(f"error: {str(e).splitlines()[0] if str(e) else type(e).__name__}", file=sys.stderr)
        return 2
    except ValueError as e:  # config validation and other bad values a user gave
        print(f"error: {str(e).splitlines()[0]}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("error: interrupted", file=sys.stderr)
        return 130
