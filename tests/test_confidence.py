"""The low-confidence rule (rag_core/analysis/diagnosis/confidence.py): its boundaries, its three numbers
against the toy's hand-computed ones, and `ask --json` carrying exactly the engine's verdict."""

from __future__ import annotations

import dataclasses
import json
import math

import pytest
import torch

from rag_core.analysis.diagnosis import confidence as cf
from rag_core.toys.examples import run_toy
from rag_core.trace import StuffedReading

from conftest import cache_sharing, run_cli


# ------------------------------------------------------------------------------------ the rule alone
@pytest.mark.parametrize("below", [1e-4, 0.0, -0.05])
def test_guessing_is_below_the_threshold_chosen_on_dev(below):
    p = cf.P_GUESS - below
    got = cf.assess(p)
    assert got.low is (below > 0) and (cf.GUESSING in got.codes) is (below > 0)
    assert got.summary().startswith(f"the model is unlikely to be right: p = {p:.3g}") is (below > 0)


@pytest.mark.parametrize("p_runner", [0.0, 0.3, 0.97])
def test_the_runner_up_is_shown_but_never_flags(p_runner):
    """Greedy RAG-Token keeps no runner-up: a rule on it would judge two cards with one p apart."""
    got = cf.assess(0.98, runner_up="Chicago", p_runner_up=p_runner)
    assert got.codes == () and got.margin == pytest.approx(0.98 - p_runner, abs=1e-15)
    assert got == dataclasses.replace(cf.assess(0.98), runner_up="Chicago", p_runner_up=p_runner)


def test_another_reading_with_another_answer_flags_it():
    p = (cf.P_GUESS + min(cf.P_TRUST, 1.0)) / 2  # no guess, and below the trusted level
    got = cf.assess(p, disagree={"stuffed": "Moby", "rag-token": "Ahab"})
    assert got.codes == (cf.DISAGREE,)
    assert got.summary() == "the readings disagree: Stuffed says “Moby”; RAG-Token says “Ahab”"
    assert got.to_json()["disagree"] == {"stuffed": "Moby", "rag-token": "Ahab"}
    assert not cf.assess(p, disagree={}).low


def test_a_disagreement_flags_only_below_p_trust(monkeypatch):
    monkeypatch.setattr(cf, "P_TRUST", 0.9)
    sure = cf.assess(0.95, support=3.0, disagree={"stuffed": "Moby"})
    assert not sure.low and sure.to_json()["disagree"] == {"stuffed": "Moby"}  # shown, not flagged
    assert cf.assess(0.85, support=3.0, disagree={"stuffed": "Moby"}).codes == (cf.DISAGREE,)


@pytest.mark.parametrize(
    "support,p,unsupported",
    [
        (1e-9, 0.3, False),  # a passage that makes the answer any more likely supports it
        (0.0, 0.3, True),  # one that makes it exactly as likely as the model alone does not
        (0.0, 0.5, False),  # unsupported but at even odds: a fact the model knows, not a guess
        (0.0, 0.4999, True),
        (-5.0, 0.3, True),  # the passages make it less likely than the model alone
        (float("nan"), 0.3, True),  # not computable: no support
        (float("-inf"), 0.3, True),  # no passage gives the answer any probability
    ],
)
def test_unsupported_needs_no_passage_raising_it_and_less_than_even_odds(support, p, unsupported):
    got = cf.assess(p, support=support)
    assert (cf.UNSUPPORTED in got.codes) is unsupported
    assert got.supported is bool(support > 0)


def test_without_a_closed_book_row_the_support_rule_is_left_out():
    got = cf.assess(0.3)
    assert (cf.UNSUPPORTED in got.codes, got.supported, got.to_json()["support"]) == (False, None, None)
    assert cf.UNSUPPORTED in cf.assess(0.3, support=-1.0).codes


def test_the_reasons_read_as_one_sentence_and_the_json_holds_the_numbers():
    got = cf.assess(0.068, support=-0.5, runner_up="Nimbleworks", p_runner_up=0.05, disagree={"stuffed": "X"})
    assert got.codes == (cf.GUESSING, cf.DISAGREE, cf.UNSUPPORTED)
    assert got.summary() == (
        "the model is unlikely to be right: p = 0.068, and the readings disagree: Stuffed says “X”, "
        "and no retrieved passage makes this answer more likely than the model alone"
    )
    assert got.to_json() == {
        "low": True,
        "codes": ["guessing", "readings-disagree", "unsupported"],
        "reasons": list(got.reasons),
        "p": 0.068,
        "runner_up": "Nimbleworks",
        "p_runner_up": 0.05,
        "margin": pytest.approx(0.018, abs=1e-15),
        "support": -0.5,
        "supported": False,
        "disagree": {"stuffed": "X"},
    }


# ------------------------------------------------------------------------------ on a trace (the toy)
@pytest.fixture
def obama():
    """docs/design.md §1.7: prior 0.7 / 0.3; "born Hawaii" and "Chicago Hawaii" (plus the end token)
    under two passages; p_seq(born Hawaii) ≈ 0.516 and p(born Hawaii|x,z1) ≈ 0.8 · 0.9."""
    return run_toy("obama").trace


def closed_row(*p):
    return torch.tensor(p, dtype=torch.float64).log()  # (T,) closed-book p(y_i|x,y_<i)


def by_hand(trace, decoding: str, rank: int = 0):
    """p_seq, p_tok and p(y|x,z) per passage of one candidate, from its probability table and the
    prior with plain products and sums (no log space, no `marginals`)."""
    c = next(c for c in trace.of(decoding) if c.rank == rank)
    table = c.token_logp.exp().tolist()  # [K][T]
    prior = trace.prior.tolist()
    per_doc = [math.prod(row) for row in table]
    p_seq = sum(w * q for w, q in zip(prior, per_doc))
    p_tok = math.prod(sum(prior[z] * table[z][i] for z in range(len(prior))) for i in range(len(table[0])))
    return p_seq, p_tok, per_doc


def test_the_three_numbers_of_a_toy_answer_are_the_hand_computed_ones(obama):
    seq, tok = obama.answer("rag-sequence"), obama.answer("rag-token")
    p_seq, p_tok, per_doc = by_hand(obama, "rag-sequence")
    assert p_seq == pytest.approx(0.516, abs=1e-3) and per_doc[0] == pytest.approx(0.72, abs=1e-3)
    got = cf.candidate_confidence(obama, seq, closed_row(0.5, 0.5, 1.0, float("nan")))  # a row past the end
    assert got.p == pytest.approx(p_seq, abs=1e-12)
    second = by_hand(obama, "rag-sequence", 1)[0]
    assert (got.runner_up, got.p_runner_up) == ("Chicago Hawaii", pytest.approx(second, abs=1e-12))
    assert got.support == pytest.approx(math.log(max(per_doc) / 0.25), abs=1e-12)
    assert not got.low
    # RAG-Token's answer is judged by p_tok, and its runner-up by p_tok too
    got = cf.candidate_confidence(obama, tok, closed_row(0.5, 0.5, 1.0))
    assert got.p == pytest.approx(p_tok, abs=1e-12)
    assert got.p_runner_up == pytest.approx(by_hand(obama, "rag-token", 1)[1], abs=1e-12)


def test_the_same_closed_book_row_fails_only_the_marginal_below_even_odds(obama):
    """Closed-book 0.9 · 0.9 = 0.81: more than the best passage gives (≈ 0.72). p_seq ≈ 0.516 is at
    least even odds, p_tok ≈ 0.449 is not: only RAG-Token's answer is unsupported."""
    row = closed_row(0.9, 0.9, 1.0)
    seq = cf.candidate_confidence(obama, obama.answer("rag-sequence"), row)
    tok = cf.candidate_confidence(obama, obama.answer("rag-token"), row)
    best = max(by_hand(obama, "rag-sequence")[2])
    assert seq.support == tok.support == pytest.approx(math.log(best / 0.81), abs=1e-12)
    assert (seq.codes, tok.codes) == ((), (cf.UNSUPPORTED,))


def test_each_reading_is_compared_with_the_others_of_its_trace(obama):
    """Both marginals answer "born Hawaii": they agree. A stuffed answer "Chicago" disagrees with
    both, and each of them with it; a counterfactual prior compares nothing (the other readings
    were decoded under the trace's own prior)."""
    seq, tok = obama.answer("rag-sequence"), obama.answer("rag-token")
    assert (
        cf.disagreeing(obama, seq) == {}
        and cf.DISAGREE not in cf.candidate_confidence(obama, tok, None).codes
    )
    stuffed = dataclasses.replace(seq, decoding="stuffed", answer="Chicago.", token_logp=seq.token_logp[:1])
    obama.stuffed = StuffedReading([stuffed])
    assert cf.disagreeing(obama, seq) == {"stuffed": "Chicago."}
    assert cf.disagreeing(obama, stuffed) == {"rag-token": tok.answer, "rag-sequence": seq.answer}
    assert cf.candidate_confidence(obama, tok, None).disagree == (("stuffed", "Chicago."),)
    removed = torch.tensor([-math.inf, 0.0], dtype=obama.log_prior.dtype)  # (K,)
    assert cf.DISAGREE not in cf.candidate_confidence(obama, seq, None, removed).codes


def test_a_runner_up_that_is_the_same_answer_is_no_rival(obama):
    """ "born, Hawaii!" normalises to the answer itself: the runner-up is the next different answer."""
    seq = obama.answer("rag-sequence")
    twin = dataclasses.replace(seq, rank=1, answer="Born, Hawaii!", token_logp=seq.token_logp * 1.01)
    obama.candidates.insert(obama.candidates.index(seq) + 1, twin)
    got = cf.candidate_confidence(obama, seq, None)
    assert got.runner_up == "Chicago Hawaii"


def test_greedy_rag_token_has_no_runner_up(obama):
    obama.candidates = [c for c in obama.candidates if not (c.decoding == "rag-token" and c.rank > 0)]
    got = cf.candidate_confidence(obama, obama.answer("rag-token"), None)
    assert (got.runner_up, got.p_runner_up, got.margin) == (None, None, None)


def test_a_pair_fast_rescoring_never_scored_counts_as_probability_zero(obama):
    seq = obama.answer("rag-sequence")
    seq.token_logp[0] = float("nan")  # z1 never scored: only z2's 0.04 is left
    got = cf.candidate_confidence(obama, seq, closed_row(0.5, 0.5, 1.0))
    assert got.support == pytest.approx(math.log(by_hand(obama, "rag-sequence")[2][1] / 0.25), abs=1e-12)


def test_under_a_counterfactual_prior_a_removed_passage_neither_supports_nor_rivals(obama):
    """z1 removed: p is z2's p(y|x,z2) = 0.04 alone (the prior renormalised over z2), the support is
    z2's, and the runner-up is scored by z2 (0.1); once "Chicago Hawaii" is marked as z1's beam
    alone, the kept passage's decoding would not have made it: no rival."""
    seq = obama.answer("rag-sequence")
    removed = torch.tensor([-math.inf, 0.0], dtype=obama.log_prior.dtype)  # (K,) z2 alone
    got = cf.candidate_confidence(obama, seq, closed_row(0.5, 0.5, 1.0), removed)
    assert got.p == pytest.approx(0.04, abs=1e-12)
    assert got.support == pytest.approx(math.log(0.04 / 0.25), abs=1e-12)  # z1's 0.72 no longer counts
    assert (got.runner_up, got.p_runner_up) == ("Chicago Hawaii", pytest.approx(0.1, abs=1e-12))
    assert got.codes == (cf.GUESSING, cf.UNSUPPORTED)
    next(c for c in obama.of("rag-sequence") if c.rank == 1).sources = {0}
    assert cf.candidate_confidence(obama, seq, None, removed).runner_up is None
    assert cf.candidate_confidence(obama, seq, None).runner_up == "Chicago Hawaii"  # all kept: a rival


# ------------------------------------------------------------------------------ ask --json
def test_ask_json_carries_the_engines_confidence_for_each_answer(tmp_path, monkeypatch):
    """The CLI's "confidence" equals the rule recomputed here from a fresh trace and fresh closed-book
    rows; its p is the answer's own p under its marginal; the older keys are all still there."""
    from rag_core.config import AnswerSettings, StackSpec
    from rag_core.pipeline import load_pipeline
    from rag_core.toys.tiny_models import build_tiny_stack

    monkeypatch.setenv("RAG_LOUPE_CACHE", str(cache_sharing(tmp_path / "cache")))
    stack = build_tiny_stack(tmp_path / "stack")
    flags = [
        "--question-encoder",
        str(stack["dpr_q"]),
        "--ctx-encoder",
        str(stack["dpr_ctx"]),
        "--generator",
        str(stack["bart"]),
        "--corpus",
        str(stack["corpus"]),
    ]
    question = "Who built the old bridge of Paris?"
    out = run_cli("ask", question, "-k", "3", "--beams", "2", "--max-new-tokens", "5", "--json", *flags)
    assert out.returncode == 0, out.stderr
    shown = json.loads(out.stdout)
    assert set(shown) == {
        "query",
        "index",
        "k",
        "scale",
        "settings",
        "closed_book",
        "answers",
        "passages",
        "confidence",
    }

    spec = StackSpec(
        question_encoder=str(stack["dpr_q"]), ctx_encoder=str(stack["dpr_ctx"]), generator=str(stack["bart"])
    )
    pipe = load_pipeline(spec, AnswerSettings(k=3, beams=2, max_new_tokens=5), corpus=str(stack["corpus"]))
    trace = pipe.with_stuffed(pipe.run(question))  # ask compares the stuffed reading too
    for decoding, p_key in (("rag-token", "p_tok"), ("rag-sequence", "p_seq")):
        c = trace.answer(decoding)
        closed = pipe.closed_book_scores(question, [c.token_ids])[0]  # (T,)
        want = cf.candidate_confidence(trace, c, closed).to_json()
        got = shown["confidence"][decoding]
        assert got["support"] is not None
        assert {k: got[k] for k in ("low", "codes", "reasons", "runner_up", "supported")} == {
            k: want[k] for k in ("low", "codes", "reasons", "runner_up", "supported")
        }
        for k in ("p", "p_runner_up", "margin", "support"):
            assert (got[k] is None) == (want[k] is None), k
            if got[k] is not None:
                assert got[k] == pytest.approx(want[k], abs=1e-6), k
        assert got["p"] == pytest.approx(shown["answers"][decoding][0][p_key], abs=1e-12)
