"""`python -m rag_core eval --choose-rule RUN`: the low-confidence rule's thresholds and compared
readings chosen on a saved evaluation run (`analysis.rule_choice`), from the stored answers alone
(no model loads). Run it on a dev run made with `--stuffed`; the chosen values are P_GUESS,
P_TRUST and AGREE_READINGS in `analysis.confidence`.
"""

from __future__ import annotations

import argparse

from rag_core.analysis.evaluation.rule_choice import MARGINALS, READINGS, WRONG_GOAL, choose
from rag_core.cli.common import CliError
from rag_core.cli.eval_compare import describe, resolve_run
from rag_core.config import READING_LABELS


def run_choose_rule(args: argparse.Namespace) -> int:
    run = resolve_run(args.choose_rule)
    chosen, table = choose(run.results)
    modes = [m for m in READINGS if m in table[0][1]]
    if not all(m in modes for m in MARGINALS):
        raise CliError(f"the run {args.choose_rule!r} has no assessed RAG-Token and RAG-Sequence answers")
    print(describe(run))
    wrong = " · ".join(f"{READING_LABELS[m]} {table[0][1][m][2]}" for m in modes)
    print(f"wrong answers: {wrong}\n")
    print(f"{'rule':<80}" + "".join(f"{READING_LABELS[m]:>24}" for m in modes))
    print(f"{'':<80}" + "".join(f"{'wrong / right flagged':>24}" for _ in modes))
    for rule, shares in table:
        mark = " <- chosen" if rule == chosen else ""
        cells = "".join(f"{100 * shares[m][0]:>16.0f}% / {100 * shares[m][1]:>3.0f}%" for m in modes)
        print(f"{rule.words():<80}{cells}{mark}")
    if chosen is None:
        print(f"\nno rule flags {100 * WRONG_GOAL:.0f}% of the wrong answers under both marginals")
    else:
        print(
            f"\nchosen: {chosen.words()} (P_GUESS = {chosen.p_guess:g}, P_TRUST = {chosen.p_trust:g}, "
            f"AGREE_READINGS = {chosen.compared})"
        )
    return 0
