"""`python -m rag_core toy NAME`: a hand-made example (obama, softmax, posterior, frankenstein)
or a toy JSON file, printed with the numbers one can work out by hand from its tables."""

from __future__ import annotations

import argparse

from rag_core.cli.common import CliError
from rag_core.toys.examples import run_toy, summary_lines

HELP = "run a hand-made example (obama, softmax, posterior, frankenstein) or a toy JSON file"


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("name")
    p.add_argument("--csv", default=None)


def run(args: argparse.Namespace) -> int:
    result = run_toy(args.name)
    for line in summary_lines(result):
        print(line)
    if args.csv:
        if result.trace is None:
            raise CliError(f"toy {args.name} has no generator tables, so it has no token trace to write")
        result.trace.to_csv(args.csv)
    return 0
