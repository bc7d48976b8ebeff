"""The rule chooser recomputes the low-confidence flags from a run's stored answers: with the
shipped settings it must flag exactly the answers the engine flagged when it made the run."""

import json
from pathlib import Path

import pytest

from rag_core.analysis.diagnosis.confidence import AGREE_READINGS, P_GUESS, P_TRUST
from rag_core.analysis.evaluation import rule_choice
from rag_core.analysis.evaluation.eval_summary import confidence_split
from rag_core.analysis.evaluation.question_result import ModeResult, QuestionResult
from rag_core.analysis.evaluation.runs import EvalRun

RUNS = Path(__file__).resolve().parents[1] / "assets" / "eval" / "runs"


@pytest.fixture(scope="module")
def shipped_run() -> EvalRun:
    return EvalRun.from_json(json.loads((RUNS / "test-k5.json").read_text(encoding="utf-8")))


def test_the_shipped_rule_recomputed_flags_what_the_engine_flagged(shipped_run):
    rule = rule_choice.Rule(P_GUESS, tuple(AGREE_READINGS), P_TRUST)
    seen = 0
    for r in shipped_run.results:
        for mode in rule_choice.READINGS:
            got = rule_choice.flags(r, mode, rule)
            if got is None:
                continue
            seen += 1
            assert got == bool(r.modes[mode].low_confidence), (r.question, mode, r.modes[mode].low_confidence)
    assert seen == 3 * len(shipped_run.results)  # every reading of every question was assessed


def test_the_shares_equal_the_runs_own_summary(shipped_run):
    shares = rule_choice.flagged_shares(
        shipped_run.results, rule_choice.Rule(P_GUESS, tuple(AGREE_READINGS), P_TRUST)
    )
    for mode, (wrong, right, _) in shares.items():
        split = confidence_split(shipped_run.results, mode)  # the Eval page's and eval's figures
        assert wrong == pytest.approx(split["wrong_flagged"]), mode
        assert right == pytest.approx(split["right_flagged"]), mode


def test_choose_takes_the_fewest_right_flags_among_rules_that_catch_enough(shipped_run):
    chosen, table = rule_choice.choose(shipped_run.results)
    ok = [
        (max(s[m][1] for m in rule_choice.MARGINALS), r)
        for r, s in table
        if min(s[m][0] for m in rule_choice.MARGINALS) >= rule_choice.WRONG_GOAL
    ]
    assert chosen is not None and len(table) == len(rule_choice.candidates())
    assert max(s[m][1] for r, s in table if r == chosen for m in rule_choice.MARGINALS) == min(
        o[0] for o in ok
    )


def test_an_unsupported_answer_stays_flagged_whatever_the_threshold():
    """Neither setting touches the unsupported code: it is read from the run as the engine stored it."""
    from_run = ModeResult(
        "Perth", False, False, p_tok=0.3, p_seq=0.3, p_stuffed=0.3, low_confidence=["unsupported"]
    )
    confident = ModeResult("Perth", False, False, p_tok=0.3, p_seq=0.3, p_stuffed=0.3, low_confidence=[])
    for mode_result, flagged in ((from_run, True), (confident, False)):
        result = QuestionResult(
            "q", ["Canberra"], "", dict.fromkeys(rule_choice.READINGS, mode_result), True, 1
        )
        assert rule_choice.flags(result, "rag-token", rule_choice.Rule(0.1, rule_choice.READINGS)) is flagged


def test_a_disagreement_flags_only_below_p_trust():
    """Stuffed says otherwise at p = 0.85: flagged when P_TRUST is 0.9 or unbounded, not at 0.8."""
    marg = ModeResult("Melville", True, True, p_tok=0.85, p_seq=0.85, low_confidence=[])
    stuffed = ModeResult("Hawthorne", False, False, p_stuffed=0.6, low_confidence=[])
    modes = {"rag-token": marg, "rag-sequence": marg, "stuffed": stuffed}
    result = QuestionResult("q", ["Melville"], "", modes, True, 1)
    for trust, flagged in ((0.8, False), (0.9, True), (float("inf"), True)):
        assert (
            rule_choice.flags(result, "rag-token", rule_choice.Rule(0.1, rule_choice.READINGS, trust))
            is flagged
        )
    rules = rule_choice.candidates()
    assert all(r.p_trust > r.p_guess for r in rules) and len(rules) == len(set(rules))
