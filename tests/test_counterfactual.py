"""Counterfactuals never put another answer in the place of the real one: with nothing changed the
answers are the trace's own, token for token and with its probabilities; an answer the stored
numbers cannot decide "needs a model call", and that call (`counterfactual.rerun`) gives what
decoding the kept passages again gives. The Diagnose panel shows each state, and says the verdicts
have not run until they have. Toy models: exact and fast (the real model:
tests/test_counterfactual_model.py; a real browser: tests/test_browser_counterfactual.py)."""

import math
import threading
from types import SimpleNamespace

import pytest
import torch
from streamlit.testing.v1 import AppTest
from test_diagnosis import GREEDY, STITCH, rerun, toy

from rag_core import marginals
from rag_core.analysis.diagnosis import counterfactual
from rag_core.analysis.diagnosis.confidence import candidate_confidence
from rag_core.analysis.diagnosis.counterfactual import NEEDS_CALL
from rag_core.config import AnswerSettings
from rag_core.decoding.decode import SearchSettings, closed_book_decode
from rag_core.marginals import p_text
from rag_core.pipeline import Pipeline

# Passage 1 prefers "a", passage 2 "b"; with one stored alternative per step, the bound on "b" under
# passage 1 (its top value, 0.5) is too loose to prove that "a" (0.42) beats "b" (0.38) at step 0,
# even under the trace's own prior, while the best of the known answers is "b" (p_tok 0.38 > 0.252).
UNDECIDED = [
    ("first", 0.6, {"": {"a": 0.5, "b": 0.3, "c": 0.2}, "a": {"x": 0.6, "y": 0.4}}),
    ("second", 0.4, {"": {"b": 0.5, "a": 0.3, "c": 0.2}, "a": {"x": 0.6, "y": 0.4}}),
]
ONE_ALTERNATIVE = AnswerSettings(beams=1, max_new_tokens=8)  # traced with one stored alternative a step
SETTINGS = [  # (settings, alternatives stored per step)
    (GREEDY, 5),
    (ONE_ALTERNATIVE, 1),
    (AnswerSettings(beams=2, max_new_tokens=8), 5),
    (AnswerSettings(beams=3, max_new_tokens=8, rescore="fast"), 5),
    (AnswerSettings(beams=2, max_new_tokens=8, decode="token"), 1),
]
LOG_P = {
    "rag-token": lambda c, lpz: marginals.rag_token(lpz, c.token_logp),
    "rag-sequence": lambda c, lpz: marginals.rag_sequence(lpz, c.token_logp),
}


def test_the_undecided_toy_is_what_the_old_fallback_got_wrong():
    """The bounds cannot certify the trace's own greedy path, and the best known answer is another."""
    gen, trace, _ = toy(UNDECIDED, cfg=ONE_ALTERNATIVE, alternatives=1)
    own = trace.answer("rag-token")
    assert own.answer == "a x"
    assert counterfactual._greedy_check(own, trace.log_prior)[0] == "uncertain"
    assert max(trace.candidates, key=lambda c: c.log_p_tok(trace.log_prior)).answer == "b"


@pytest.mark.parametrize(
    "cfg,alternatives", SETTINGS, ids=[f"beams{c.beams}-{c.decode}-{c.rescore}-a{a}" for c, a in SETTINGS]
)
@pytest.mark.parametrize("passages", [STITCH, UNDECIDED], ids=["stitch", "undecided"])
def test_nothing_changed_gives_the_traces_own_answers_exactly(passages, cfg, alternatives):
    gen, trace, _ = toy(passages, cfg=cfg, alternatives=alternatives)
    # as the panel passes its untouched controls (every passage, K, the scale), and with no argument
    untouched = counterfactual.counterfactual(trace, [], trace.k, trace.scale)
    for cf in (counterfactual.counterfactual(trace), untouched):
        assert cf.unchanged and not cf.needs_model_call
        assert cf.prior == trace.log_prior.exp().tolist()
        decodings = [d for d in LOG_P if trace.answer(d) is not None]
        assert sorted(cf.answers) == sorted(decodings)
        for d in decodings:
            own, a = trace.answer(d), cf.answers[d]
            assert (a.answer, a.token_ids) == (own.answer, tuple(own.token_ids))
            assert a.exact and not a.computed
            assert a.log_p == float(LOG_P[d](own, trace.log_prior))  # the very number the answer card shows
            # and judged as the card judges it: the same candidate under the trace's own prior
            held, cand, prior = counterfactual.answer_candidate(trace, cf, d)
            closed = torch.full((len(own.token_ids),), -0.5, dtype=torch.float64)  # (T,) any closed-book row
            assert (held, cand, prior) == (trace, own, None)
            assert candidate_confidence(held, cand, closed, prior) == candidate_confidence(trace, own, closed)


def toy_pipe(gen, cfg, hits=()):
    """What the panel's model calls read of a Pipeline, over a toy generator: its settings, the
    shared generator under its lock, a closed-book answer and a retriever over `hits`."""

    def closed_book(question, cfg=None):
        best = closed_book_decode(gen, gen.prepare(question, None), SearchSettings(max_new_tokens=8))
        return gen.decode(best.tokens)

    pipe = SimpleNamespace(
        settings=cfg,
        models=SimpleNamespace(generator=gen, lock=threading.RLock()),
        closed_book=closed_book,
        retrieve=lambda question, k: list(hits)[:k],
    )
    pipe.with_stuffed = lambda trace: Pipeline.with_stuffed(pipe, trace)  # the rule's third reading
    return pipe


def test_a_step_the_stored_numbers_cannot_decide_needs_a_model_call():
    gen, trace, _ = toy(UNDECIDED, cfg=ONE_ALTERNATIVE, alternatives=1)
    cf = counterfactual.counterfactual(trace, scale=1.5)
    tok = cf.answers["rag-token"]
    assert (tok.answer, tok.log_p, tok.exact, tok.needs_model_call) == (None, None, False, True)
    assert "step 0 cannot be decided" in tok.note and NEEDS_CALL in tok.note
    assert cf.answers["rag-sequence"].exact and cf.needs_model_call
    # the call: the kept passages decoded again under the new prior, as a fresh run of them gives
    full = counterfactual.rerun(toy_pipe(gen, ONE_ALTERNATIVE), trace, scale=1.5)
    again = rerun(gen, trace, cf.keep, 1.5, ONE_ALTERNATIVE)
    for d in LOG_P:
        assert full.answer(d).token_ids == again.answer(d).token_ids
        assert float(LOG_P[d](full.answer(d), full.log_prior)) == pytest.approx(
            float(LOG_P[d](again.answer(d), again.log_prior)), abs=1e-12
        )
    shown = counterfactual.with_computed(cf, full).answers["rag-token"]
    assert (shown.answer, shown.computed, shown.exact) == ("a x", True, True)
    assert shown.log_p == pytest.approx(again.answer("rag-token").log_p_tok(again.log_prior), abs=1e-12)
    decided = counterfactual.with_computed(cf, full).answers["rag-sequence"]
    assert decided is cf.answers["rag-sequence"]  # the stored numbers decided it: no answer replaced


def test_beam_search_under_a_changed_prior_needs_a_model_call_and_the_call_removes_passages():
    cfg = AnswerSettings(beams=2, max_new_tokens=8)
    gen, trace, _ = toy(STITCH + [("third", 0.25, {"": {"B": 0.9}})], cfg=cfg)
    cf = counterfactual.counterfactual(trace, drop_ranks=[2])
    assert cf.answers["rag-token"].needs_model_call and "beam search" in cf.answers["rag-token"].note
    full = counterfactual.rerun(toy_pipe(gen, cfg), trace, drop_ranks=[2])
    again = rerun(gen, trace, cf.keep, 1.0, cfg)
    assert [h.rank for h in full.hits] == [1, 3] and full.settings.beams == 2
    assert full.answer("rag-token").answer == again.answer("rag-token").answer
    assert full.log_prior.exp().tolist() == pytest.approx(again.log_prior.exp().tolist(), abs=1e-12)


# ------------------------------------------------------------------------------ the panel
SHOWN: dict = {}  # the trace the panel app below shows, set by each test


def _panel():
    from test_counterfactual import SHOWN

    from app.ask import diagnose_panel

    diagnose_panel.render(SHOWN["trace"])


def _app(monkeypatch, passages, cfg, question, expected, alternatives=5):
    from app import state

    gen, trace, _ = toy(passages, cfg=cfg, question=question, alternatives=alternatives)
    monkeypatch.setattr(state, "pipeline", lambda name=None: toy_pipe(gen, cfg, trace.hits))
    SHOWN["trace"] = trace
    at = AppTest.from_function(_panel, default_timeout=120)
    at.session_state["expected_answers"] = {question: expected}
    at.run()
    assert not at.exception, [e.value for e in at.exception]
    return at, trace


def cards(at) -> dict:
    """The counterfactual cards (after the Ask page's own, which this app does not draw)."""
    return {m.label: (m.value, m.delta) for m in at.metric}


def test_the_panel_shows_the_traces_answers_then_needs_a_call_then_the_computed_answer(monkeypatch):
    from app.ask.counterfactual_panel import cf_key
    from rag_core.generators.base import ForwardCounter

    at, trace = _app(monkeypatch, STITCH, GREEDY, "Which letters?", "B x")
    p_tok = math.exp(trace.answer("rag-token").log_p_tok(trace.log_prior))
    assert cards(at)["RAG-Token"] == (trace.answer("rag-token").answer, f"p = {p_text(p_tok)}, unchanged")
    calls = ForwardCounter.count
    at.multiselect(key=cf_key(trace, "drop")).select(2).run()
    assert cards(at)["RAG-Token"][0] == NEEDS_CALL
    assert ForwardCounter.count == calls  # no call until asked
    (button,) = [b for b in at.button if b.label.startswith("Make the model call")]
    button.click().run()
    assert not at.exception, [e.value for e in at.exception]
    assert ForwardCounter.count > calls
    assert "RAG-Token" not in cards(at)
    value, delta = cards(at)["RAG-Token (computed by a model call)"]
    assert value == "A x" and delta.endswith("→ 0.54)")  # passage 1 alone: p(A) 0.9 · p(x|A) 0.6
    assert not [b for b in at.button if b.label.startswith("Make the model call")]
    at.multiselect(key=cf_key(trace, "drop")).unselect(2).run()  # back to nothing changed: the trace again
    assert cards(at)["RAG-Token"][0] == trace.answer("rag-token").answer


def test_the_verdict_line_says_no_checks_ran_until_they_have(monkeypatch):
    at, trace = _app(
        monkeypatch, UNDECIDED, ONE_ALTERNATIVE, "Which word?", "second", alternatives=1
    )  # passage 2 holds it
    (line,) = [m.value for m in at.markdown if m.value.startswith("**Verdict:**")]
    assert line == (
        "**Verdict:** No checks run yet: only the stored numbers were read; “Run the checks” "
        "above runs the rest."
    )
    at.button(key="diag_run_button").click().run()
    assert not at.exception, [e.value for e in at.exception]
    (line,) = [m.value for m in at.markdown if m.value.startswith("**Verdict:**")]
    assert "No checks run yet" not in line
