"""`python -m rag_core train QUESTIONS.jsonl --out DIR`: fine-tune RAG end to end, as the paper does.

`--part query` tunes the query encoder through the prior (document encoder and index frozen),
`--part generator` the generator through LoRA adapters, `--part both` the two at once, maximising
the RAG-Sequence or RAG-Token likelihood of each question's first gold answer over the top K.
`--eval HELD_OUT.jsonl` measures EM, answer-recall@1/@K and the retrieval-collapse monitor before
and after. A first Ctrl-C stops at the end of the current step with a checkpoint (`--resume`
continues it); `--out` follows the never-destroy rule of `training.output`.
"""

from __future__ import annotations

import argparse
import json
import signal
import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager

from rag_core.cli.common import (
    INDEX_HELP,
    add_model_args,
    positive_float,
    positive_int,
    progress_bar,
    stack_from,
)
from rag_core.config import AnswerSettings
from rag_core.generators.causal import PROMPT_STYLES
from rag_core.training import heldout
from rag_core.training.gradient import MARGINALS
from rag_core.training.loop import PARTS, TrainSettings
from rag_core.training.session import fine_tune

HELP = "fine-tune the query encoder and/or the generator (LoRA) on a questions JSONL"


def add_arguments(p: argparse.ArgumentParser) -> None:
    d = TrainSettings()
    p.add_argument(
        "questions",
        nargs="+",
        help='training JSONL file(s): {"question": str, "answers": [str, ...], '
        '"index": optional index name} per line',
    )
    p.add_argument(
        "--out", required=True, help="a new folder, or an earlier training output (--resume / --force)"
    )
    p.add_argument("--force", action="store_true", help="replace the training output at --out")
    p.add_argument(
        "--resume", action="store_true", help="continue the stopped run at --out from its checkpoint"
    )
    p.add_argument("--part", choices=PARTS, default=d.part, help="what trains (default: the query encoder)")
    p.add_argument(
        "--marginal", choices=MARGINALS, default=d.marginal, help="RAG-Sequence or RAG-Token likelihood"
    )
    p.add_argument("-k", type=positive_int, default=d.k, help="passages retrieved per question")
    p.add_argument("--steps", type=positive_int, default=d.steps, help="optimiser steps")
    p.add_argument("--batch", type=positive_int, default=d.batch, help="questions per step")
    p.add_argument(
        "--lr",
        type=positive_float,
        default=None,
        help="learning rate (default: 1e-5 for the query encoder, 3e-4 for the LoRA adapters)",
    )
    p.add_argument("--lora-rank", type=positive_int, default=d.lora_rank)
    p.add_argument(
        "--prompt",
        choices=PROMPT_STYLES,
        default=None,
        help="the prompt the generator trains on (default: its own; 'plain' has no worked examples)",
    )
    p.add_argument(
        "--unlikelihood",
        type=float,
        default=d.unlikelihood,
        metavar="W",
        help="add W times -log(1 - p(d|x)) for each distractor d a question records (default 0: off)",
    )
    p.add_argument("--seed", type=int, default=d.seed)
    p.add_argument("--checkpoint-every", type=positive_int, default=d.checkpoint_every, metavar="N")
    p.add_argument(
        "--scale", type=positive_float, default=None, help="retriever scale (default: the encoder's)"
    )
    p.add_argument(
        "--eval", default=None, metavar="HELD_OUT.jsonl", help="held-out questions measured before and after"
    )
    p.add_argument("--index", default=None, help=INDEX_HELP)
    p.add_argument("--corpus", default=None, help="a JSONL corpus to index and train on instead")
    p.add_argument("--json", action="store_true", help="print the training manifest as JSON")
    add_model_args(p)


@contextmanager
def graceful_stop() -> Iterator[Callable[[], bool]]:
    """A first Ctrl-C asks the loop to stop at the end of its step; a second one aborts."""
    asked = []

    def on_interrupt(signum, frame):
        if asked:
            raise KeyboardInterrupt
        asked.append(True)
        print("\nstopping after this step (Ctrl-C again to abort)", file=sys.stderr)

    previous = signal.signal(signal.SIGINT, on_interrupt)
    try:
        yield lambda: bool(asked)
    finally:
        signal.signal(signal.SIGINT, previous)


def run(args: argparse.Namespace) -> int:
    settings = TrainSettings(
        args.part,
        args.marginal,
        args.k,
        args.steps,
        args.batch,
        args.lr,
        args.lora_rank,
        args.seed,
        args.checkpoint_every,
        args.scale,
        args.prompt,
        args.unlikelihood,
    ).validate()
    stack = stack_from(args)
    answering = AnswerSettings(k=args.k, index=args.index, scale=args.scale).validate()
    with progress_bar() as progress, graceful_stop() as should_stop:
        manifest = fine_tune(
            stack,
            answering,
            settings,
            args.questions,
            args.out,
            args.eval,
            args.force,
            args.resume,
            progress,
            should_stop,
            corpus=args.corpus,
        )
    print(json.dumps(manifest, indent=1) if args.json else report(manifest, str(args.out)))
    return 130 if manifest["status"] == "stopped" else 0


def report(m: dict, out: str) -> str:
    loss = m["loss"]
    lines = [
        f"trained {m['part']} on {m['data']['questions']} questions ({m['data']['file']}): "
        f"{m['steps_done']}/{m['steps']} steps of {m['batch']}, rag-{m['marginal']}, K={m['k']}, "
        f"lr {', '.join(f'{p} {lr:g}' for p, lr in m['lr'].items())}, {m['seconds']:.0f} s on {m['device']}"
        + (f", unlikelihood weight {m['unlikelihood']:g} on distractors" if m.get("unlikelihood") else "")
    ]
    if loss.get("steps"):
        lines.append(
            f"loss {loss['first']:.3f} -> {loss['last']:.3f} over {loss['steps']} steps "
            f"(mean of the first and last {loss['window']}: {loss['first_mean']:.3f} -> "
            f"{loss['last_mean']:.3f}; min {loss['min']:.3f})"
        )
    for part, folder in m["outputs"].items():
        lines.append(f"wrote {out}/{folder}: load it with --{part.replace('_', '-')} {out}/{folder}")
    if m.get("note"):
        lines.append(f"note: {m['note']}")
    if m["status"] == "stopped":
        lines.append(f"stopped at step {m['steps_done']}: continue with --resume --out {out}")
    if "heldout" in m:
        lines += heldout_table(m["heldout"])
    return "\n".join(lines)


def heldout_table(h: dict) -> list[str]:
    def cell(v) -> str:
        return "" if v is None else f"{v:>8d}" if isinstance(v, int) else f"{v:8.3f}"

    lines = [
        f"{'held-out ' + h['file'] + ' (' + str(h['before']['n']) + ' questions)':<30}"
        f"{'before':>8} {'after':>8}"
    ]
    return lines + [f"  {name:<28}{cell(b)} {cell(a)}" for name, b, a in heldout.comparison_rows(h)]
