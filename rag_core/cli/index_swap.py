"""`python -m rag_core index-swap`: the 2016/2018 index hot-swap experiment (paper §4.5).

    python -m rag_core index-swap [--csv FILE] [--decode token|sequence|both|stuffed|all] [--limit N]
                               [--split tune|test] [-k K] [--scale S] [--also K[:SCALE] ...] [--no-cache]
                               [--json] [--ship]

Prints the 2×2 accuracy table (index year × leaders year) per decoding beside the paper's numbers,
and the closed-book accuracy against both years. Results are cached (see `experiments`), so a
second run, or the app's Index swap page, shows the table without recomputing.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import sys

from rag_core.cli.common import (
    CliError,
    add_batch_arg,
    add_decoding_args,
    add_model_args,
    decoding_fields,
    positive_int,
    progress_bar,
    stack_from,
)
from rag_core.index_swap.results import GOAL_MATCHED, GOAL_MISMATCHED, PAPER, SPLITS, YEARS, position_split
from rag_core.index_swap.run import experiment_of, run_experiment
from rag_core.index_swap.store import (
    SHIPPED_READINGS,
    cached_result,
    leaders_frame,
    shipped_path,
    write_shipped,
)
from rag_core.pipeline import load_pipeline

HELP = "the 2016/2018 index hot-swap experiment"


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--csv", default=None, help="write one row per (position, index, decoding) here")
    p.add_argument(
        "--limit", type=positive_int, default=None, help="only the first N positions of leaders.csv"
    )
    p.add_argument(
        "--split",
        choices=SPLITS,
        default=None,
        help="only one half of the positions (tune: for choosing settings; test: the held-out half)",
    )
    add_decoding_args(p, stuffed=True)  # the experiment in the stuffed reading too: --decode all
    p.add_argument(
        "--ship",
        action="store_true",
        help="after a complete run, store it as the shipped reference run (assets/leaders_run.json; "
        "with --decode stuffed, assets/leaders_run_stuffed.json)",
    )
    p.add_argument(
        "--also",
        nargs="+",
        default=[],
        metavar="K[:SCALE]",
        help="other settings computed alongside from the same prompts, e.g. --also 3 1 5:50 (K <= -k)",
    )
    p.add_argument(
        "--no-cache", action="store_true", help="recompute every position (the cache is refreshed)"
    )
    p.add_argument("--json", action="store_true", help="print the tables as JSON")
    add_model_args(p)
    add_batch_arg(p)


def _pct(x: float) -> str:
    return "  n/a" if x is None or (isinstance(x, float) and math.isnan(x)) else f"{100 * x:4.0f}%"


def report_lines(result) -> list[str]:
    lines = [
        f"{result.positions} positions; settings: "
        + ", ".join(f"{k}={v}" for k, v in result.settings.items())
    ]
    for d in result.decodings():
        for split, label in (("test", "held-out half"), ("tune", "tuning half"), (None, "all positions")):
            t = result.table(d, split)
            n = len(
                {
                    r["position"]
                    for r in result.rows
                    if split is None or position_split(r["position"]) == split
                }
            )
            lines.append("")
            lines.append(f"{d}, {label} ({n}): accuracy (measured | paper)   leaders 2016     leaders 2018")
            for idx in YEARS:
                cells = [
                    f"{_pct(t.loc[f'index {idx}', f'leaders {y}'])} | {_pct(PAPER[(idx, y)])}" for y in YEARS
                ]
                lines.append(f"  index {idx}                      {cells[0]:>14}   {cells[1]:>14}")
        o = result.override(d)
        n = max(1, o["total"])
        lines.append(
            f"  answers naming the other year's holder: {o['other_year']}/{o['total']} "
            f"({o['other_year_in_passages']} named in the retrieved passages, {o['other_year_closed_book']} "
            f"also the closed-book answer); naming both (ambiguous): {o['ambiguous']}; naming neither: "
            f"{o['neither']}; passages lacking the holder: {o['passages_lack_holder']} "
            f"({100 * o['passages_lack_holder'] / n:.0f}%)"
        )
        lines.append(
            f"  goal on the held-out half (matched >= {GOAL_MATCHED:.0%}, "
            f"mismatched <= {GOAL_MISMATCHED:.0%}): " + ("met" if result.goal_met(d) else "not met")
        )
        if not result.goal_met(d):
            lines.append(f"  finding: {result.finding(d)}")
    cb = result.closed_book_accuracy()
    lines.append("")
    lines.append(
        f"closed-book (no passage): names the 2016 holder {_pct(cb['2016'])}, "
        f"the 2018 holder {_pct(cb['2018'])}"
    )
    if result.elapsed_s:
        lines.append(
            f"compute time: {result.elapsed_s / 60:.1f} min" + ("" if result.complete else " (partial run)")
        )
    return lines


def _variant(text: str, exp):
    k_text, _, scale_text = text.partition(":")
    try:
        k = int(k_text)
        scale = float(scale_text) if scale_text else exp.settings.scale
    except ValueError:
        raise CliError(f"--also takes K or K:SCALE, got {text!r}") from None
    if not 1 <= k <= exp.settings.k:
        raise CliError(f"--also {text}: K must be between 1 and -k ({exp.settings.k})")
    if scale is not None and not (math.isfinite(scale) and scale > 0):
        raise CliError(f"--also {text}: the scale must be a positive number")
    variant = exp.with_(k=k, scale=scale)
    variant.settings.validate()
    return variant


def run(args: argparse.Namespace) -> int:
    exp = experiment_of(stack_from(args, args.batch_questions), **decoding_fields(args))
    variants = [_variant(v, exp) for v in args.also]
    if args.ship and shipped_path(exp) is None:  # said before the run, not after it
        raise CliError(
            "--ship is for the default models or --preset base (a shipped run is checked against them)"
        )
    if args.ship and exp.settings.decode not in SHIPPED_READINGS:
        raise CliError("--ship stores a run in one of the page's readings: --decode both or --decode stuffed")
    if args.csv and os.path.isdir(args.csv):
        raise CliError(f"--csv {args.csv} is a folder; give a file name")
    positions = None
    if args.split:
        positions = [p for p in leaders_frame(args.limit)["position"] if position_split(p) == args.split]
    with progress_bar() as progress:
        result = run_experiment(
            exp,
            lambda: load_pipeline(exp.stack, exp.settings.with_(index="2018")),
            limit=args.limit,
            progress=progress,
            use_cache=not args.no_cache,
            variants=variants,
            positions=positions,
        )
    if args.csv:
        result.to_csv(args.csv)
    if args.ship:
        print(f"shipped: {write_shipped(result, shipped_path(exp))}", file=sys.stderr)
    if args.json:
        out = {
            d: {split or "all": result.table(d, split).to_dict() for split in ("test", "tune", None)}
            for d in result.decodings()
        }
        print(
            json.dumps(
                {
                    "tables": out,
                    "closed_book": result.closed_book_accuracy(),
                    "settings": result.settings,
                    "positions": result.positions,
                },
                indent=1,
            )
        )
        return 0
    print("\n".join(report_lines(result)))
    for v in variants:
        other = cached_result(v, limit=args.limit, partial=positions is not None)
        if other is not None:
            print("\n" + "-" * 72 + "\n" + "\n".join(report_lines(other)))
    return 0
