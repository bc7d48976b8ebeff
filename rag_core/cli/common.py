"""What every command shares: the parser that turns argparse errors into the one error rule, the
model and decoding flags (declared once), the Config they make, the user errors, one progress bar.

>>> positive_int("3"), positive_float("2.5")
(3, 2.5)
"""
from __future__ import annotations

import argparse
import math
import os
import sys
from contextlib import contextmanager
from typing import Iterator

from tqdm import tqdm

from ..analysis.questions import EvalDataError
from ..config import Config, Progress
from ..corpus import CorpusError
from ..index import IndexLoadError
from ..pipeline import QuestionError
from ..presets import PRESETS
from ..sources import ModelSourceError
from ..toys import ToyError


class CliError(Exception):
    """A user error found by the command line itself."""


# Errors a user can cause: each exits 2 with one `error:` line (ValueError covers Config.validate).
USER_ERRORS: tuple[type[BaseException], ...] = (
    CliError, CorpusError, IndexLoadError, QuestionError, ModelSourceError, ToyError, EvalDataError,
    FileNotFoundError, IsADirectoryError, PermissionError, UnicodeDecodeError, ValueError)



INDEX_HELP = ("wiki, 2016, 2018, a user index name, a folder, or hf-dataset:DIR[:INDEX_FILE]: a Hugging Face "
              "datasets folder (save_to_disk, with title, text and embeddings columns) and its FAISS index "
              "(default DIR/embeddings.faiss), e.g. the paper's psgs_w100")


class Parser(argparse.ArgumentParser):
    def error(self, message):  # argparse's own errors follow the same one-line rule
        raise CliError(message)


def error_line(e: BaseException) -> str:
    """The one line a user error prints."""
    text = str(e).splitlines()[0] if str(e) else type(e).__name__
    return f"error: {text}"


def positive_int(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a whole number, got {text!r}") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be at least 1, got {value}")
    return value


def positive_float(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a number, got {text!r}") from None
    if not (math.isfinite(value) and value > 0):
        raise argparse.ArgumentTypeError(f"must be a positive number, got {text!r}")
    return value


def add_model_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("--question-encoder", default=None, help="query encoder: packaged id, folder or hub id")
    p.add_argument("--ctx-encoder", default=None, help="passage encoder (DPR); default: the question encoder")
    p.add_argument("--generator", default=None, help="generator: packaged id, folder, hub id or RAG checkpoint")
    p.add_argument("--preset", choices=sorted(PRESETS), default=None, help="a named model stack")
    p.add_argument("--device", choices=["auto", "cpu", "cuda"], default="auto")
    p.add_argument("--threads", type=positive_int, default=None, help="torch CPU threads (default: all cores)")
    p.add_argument("--allow-downloads", action="store_true", help="let hub ids download (off by default)")


def add_decoding_args(p: argparse.ArgumentParser, decode: bool = True) -> None:
    """-k, --beams, --length-penalty, --max-new-tokens, --rescore, --scale (and --decode)."""
    d = Config()
    p.add_argument("-k", type=positive_int, default=d.k, help="passages retrieved per question")
    if decode:
        p.add_argument("--decode", choices=["token", "sequence", "both"], default=d.decode)
    p.add_argument("--beams", type=positive_int, default=d.beams)
    p.add_argument("--length-penalty", type=float, default=d.length_penalty,
                   help="beam search: finished beams rank by sum log p / T ** this (default 1.0)")
    p.add_argument("--max-new-tokens", type=positive_int, default=d.max_new_tokens)
    p.add_argument("--rescore", choices=["thorough", "fast"], default=d.rescore)
    p.add_argument("--scale", type=positive_float, default=d.scale, help="retriever scale (default: the encoder's)")


def add_batch_arg(p: argparse.ArgumentParser) -> None:
    p.add_argument("--batch-questions", type=positive_int, default=None, metavar="N",
                   help="questions decoded together (default: by device, 1 on CPU, 32 on a GPU); the answers do not change")


def decoding_fields(args: argparse.Namespace, decode: str | None = None) -> dict:
    """The Config fields `add_decoding_args` declared (`decode` fixes the decoding a command runs)."""
    return {"k": args.k, "decode": decode or args.decode, "beams": args.beams, "length_penalty": args.length_penalty,
            "max_new_tokens": args.max_new_tokens, "rescore": args.rescore, "scale": args.scale}


def config_from(args: argparse.Namespace, **fields) -> Config:
    """The model flags (a preset filling what is not given) plus `fields`, validated."""
    preset = PRESETS[args.preset or "default"]
    models = {
        "question_encoder": args.question_encoder or preset.get("question_encoder") or Config.question_encoder,
        "ctx_encoder": args.ctx_encoder or preset.get("ctx_encoder"),
        "generator": args.generator or preset.get("generator") or Config.generator,
        "device": args.device,
        "threads": args.threads,
        "allow_downloads": args.allow_downloads,
    }
    return Config(**models, **fields).validate()


@contextmanager
def progress_bar() -> Iterator[Progress]:
    """A bar on stderr driven by (message, fraction) reports. Shown on a terminal; RAG_LOUPE_PROGRESS=1
    shows it anywhere (a log file), RAG_LOUPE_PROGRESS=0 hides it everywhere."""
    wanted = os.environ.get("RAG_LOUPE_PROGRESS")
    shown = wanted == "1" or (wanted != "0" and sys.stderr.isatty())
    bar = tqdm(total=1000, file=sys.stderr, leave=False, mininterval=1.0, disable=not shown,
               bar_format="{desc} {percentage:3.0f}%|{bar}| {elapsed}")

    def update(message: str, fraction: float) -> None:
        bar.set_description_str(message[:70])
        bar.n = int(1000 * max(0.0, min(1.0, fraction)))
        bar.refresh()

    try:
        yield update
    finally:
        bar.close()
