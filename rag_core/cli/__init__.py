"""`python -m rag_core <command>` (or `rag-loupe <command>`): the engine's command line (docs/design.md §4.1).

One module a command, each with `HELP`, `add_arguments(parser)` and `run(args) -> int`; the table
below is the whole list. Errors a user can cause exit with code 2 and one line on stderr starting
with `error:` (`common.USER_ERRORS`); an interrupt exits 130.
"""

from __future__ import annotations

import sys

from rag_core.cli import ask, bench, build_index, cache, index_swap, replay, toy, train
from rag_core.cli import eval as eval_command
from rag_core.cli.common import USER_ERRORS, Parser, error_line

COMMANDS = {  # name -> module, in the order `--help` lists them
    "ask": ask,
    "toy": toy,
    "build-index": build_index,
    "index-swap": index_swap,
    "eval": eval_command,
    "bench": bench,
    "train": train,
    "replay": replay,
    "cache": cache,
}
ALIASES = {"index-swap": ["leaders"]}  # the index swap's first name, kept for users' scripts


def build_parser() -> Parser:
    parser = Parser(
        prog="python -m rag_core", description="RAG Loupe: the RAG latent-variable model, made visible."
    )
    sub = parser.add_subparsers(dest="command", required=True, parser_class=Parser)
    for name, module in COMMANDS.items():
        module.add_arguments(
            sub.add_parser(name, help=module.HELP, description=module.HELP, aliases=ALIASES.get(name, []))
        )
    return parser


def main(argv: list[str] | None = None) -> int:
    try:
        args = build_parser().parse_args(list(sys.argv[1:] if argv is None else argv))
        name = next((n for n, old in ALIASES.items() if args.command in old), args.command)
        return COMMANDS[name].run(args)
    except USER_ERRORS as e:
        print(error_line(e), file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("error: interrupted", file=sys.stderr)
        return 130
