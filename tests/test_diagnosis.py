"""Diagnosis verdicts on hand-made toy models where each must (and must not) fire, and
counterfactuals checked against a full recomputation. No real model: all exact and fast."""

import math
import random
import threading
from types import SimpleNamespace

import pytest
import torch

from rag_core import marginals
from rag_core.analysis import scoring
from rag_core.analysis.diagnosis import counterfactual, deep_search, verdicts
from rag_core.analysis.diagnosis.verdict_evidence import EVIDENCE, evidence_problems
from rag_core.analysis.diagnosis.verdict_rules import VERDICTS
from rag_core.config import AnswerSettings
from rag_core.corpus import Passage
from rag_core.decoding.answering import analyse
from rag_core.decoding.decode import SearchSettings, closed_book_decode
from rag_core.decoding.search import TOP_ALTERNATIVES
from rag_core.generators.toy import ToyGenerator
from rag_core.trace import Hit

GREEDY = AnswerSettings(beams=1, max_new_tokens=8)


def toy(passages, closed=None, cfg=GREEDY, question="q?", alternatives=TOP_ALTERNATIVES):
    """passages: [(text, prior, table)] -> (generator, trace, prepared state). Scores are log priors,
    scale 1, so softmax(scale * s) gives the priors back and a new scale is a power of them.
    `alternatives`: the tokens the trace keeps beside each step's own (fewer: looser bounds)."""
    tables = {f"z{i + 1}": table for i, (_, _, table) in enumerate(passages)}
    gen = ToyGenerator(tables, closed)
    total = sum(p for _, p, _ in passages)
    hits = [
        Hit(i + 1, Passage(f"z{i + 1}", f"T{i + 1}", text, "toy"), math.log(p / total))
        for i, (text, p, _) in enumerate(passages)
    ]
    log_pz = marginals.log_prior(torch.tensor([h.score for h in hits]), 1.0)
    state0 = gen.prepare(question, [h.passage for h in hits])
    trace = analyse(gen, question, hits, log_pz, cfg, "toy", 1.0, state0, alternatives)
    if closed is not None:
        cb = closed_book_decode(gen, gen.prepare(question, None), SearchSettings(max_new_tokens=8))
        trace.closed_book = gen.decode(cb.tokens)
    return gen, trace, state0


def diagnose(gen, trace, state0, expected, deep=None, decoding=None):
    forced = (
        scoring.score_texts(gen, trace, [expected] if isinstance(expected, str) else expected, state0)
        if expected
        else None
    )
    d = verdicts.diagnose(trace, expected, decoding, forced=forced, deep=deep)
    for v in d.verdicts:  # every verdict's evidence has the keys and kinds its type declares
        assert evidence_problems(v.code, v.evidence) == [], v
    return d


# ------------------------------------------------------------------------------ retrieval miss
class FakeRetriever:
    def __init__(self, texts):
        self.hits = [
            Hit(i + 1, Passage(f"d{i}", f"D{i}", t, "toy"), 1.0 - 0.01 * i) for i, t in enumerate(texts)
        ]

    def retrieve(self, question, k):
        return self.hits[:k]


def test_retrieval_miss_fires_with_the_rank_and_score_gap_of_the_best_passage():
    gen, trace, st = toy(
        [("Italy is in Europe.", 0.6, {"": {"Rome": 0.9}}), ("Milan is big.", 0.4, {"": {"Rome": 0.5}})]
    )
    deep = deep_search.deep_search(
        FakeRetriever(["x"] * 6 + ["Interpol sits in Lyon."] + ["y"] * 93), trace, ["Lyon"]
    )
    d = diagnose(gen, trace, st, "Lyon", deep)
    v = d.verdict("retrieval-miss")
    assert v.fired is True and d.correct is False
    assert v.evidence["rank"] == 7 and v.evidence["score"] == pytest.approx(0.94)
    assert v.evidence["gap_top"] == pytest.approx(0.06)
    assert "rank 7" in v.summary
    assert "evidence-ignored" not in d.fired and "misleading-passage" not in d.fired


def test_retrieval_miss_reports_an_answer_found_nowhere():
    gen, trace, st = toy([("Rome.", 1.0, {"": {"Rome": 0.9}})])
    d = diagnose(
        gen, trace, st, "Lyon", deep_search.deep_search(FakeRetriever(["nothing"] * 100), trace, ["Lyon"])
    )
    assert d.verdict("retrieval-miss").fired and d.verdict("retrieval-miss").evidence["rank"] is None


def test_retrieval_miss_does_not_fire_when_a_passage_has_the_answer():
    gen, trace, st = toy(
        [("Interpol is in Lyon.", 0.5, {"": {"Paris": 0.9}}), ("Paris.", 0.5, {"": {"Paris": 0.9}})]
    )
    d = diagnose(gen, trace, st, "Lyon")
    assert d.verdict("retrieval-miss").fired is False
    assert d.verdict("retrieval-miss").evidence["containing_ranks"] == [1]


# ------------------------------------------------------------------------------ evidence ignored
def test_evidence_ignored_fires_when_the_generator_prefers_another_answer_under_the_evidence():
    gen, trace, st = toy(
        [
            ("Paris is the capital of France.", 0.6, {"": {"Lyon": 0.7, "Paris": 0.2}}),
            ("Lyon is a city.", 0.4, {"": {"Lyon": 0.9}}),
        ]
    )
    d = diagnose(gen, trace, st, "Paris")
    assert d.answer == "Lyon"
    v = d.verdict("evidence-ignored")
    assert v.fired is True
    row = v.evidence["passages"][0]
    assert (
        row["rank"] == 1
        and row["p_expected"] == pytest.approx(0.2)
        and row["p_produced"] == pytest.approx(0.7)
    )


def test_evidence_ignored_does_not_fire_when_the_evidence_passage_prefers_the_expected_answer():
    gen, trace, st = toy(
        [
            ("Paris is the capital of France.", 0.3, {"": {"Paris": 0.5, "Lyon": 0.45}}),
            ("Lyon is a city in France.", 0.7, {"": {"Lyon": 0.99}}),
        ]
    )
    d = diagnose(gen, trace, st, "Paris")
    assert d.answer == "Lyon"
    assert d.verdict("evidence-ignored").fired is False
    # ...the mixture followed the passage about Lyon instead: a misleading passage.
    assert d.verdict("misleading-passage").fired is True


def test_evidence_ignored_needs_the_teacher_forced_pass():
    gen, trace, st = toy([("Paris is the capital.", 1.0, {"": {"Lyon": 0.7}})])
    assert verdicts.diagnose(trace, "Paris").verdict("evidence-ignored").fired is None


# ------------------------------------------------------------------------------ parametric
def test_parametric_fires_for_a_flat_answer_that_closed_book_gives_too():
    gen, trace, st = toy(
        [("Paris is in France.", 0.7, {"": {"Rome": 0.6}}), ("Lyon.", 0.3, {"": {"Rome": 0.6}})],
        closed={"": {"Rome": 0.7}},
    )
    d = diagnose(gen, trace, st, "Paris")
    v = d.verdict("parametric")
    assert v.fired is True and v.evidence["ratio"] == pytest.approx(1.0)
    assert v.evidence["closed_book"] == "Rome"


@pytest.mark.parametrize(
    "tables,closed",
    [
        ([{"": {"Rome": 0.6}}, {"": {"Rome": 0.6}}], {"": {"Milan": 0.7}}),  # flat, but closed-book disagrees
        ([{"": {"Rome": 0.9}}, {"": {"Rome": 0.02, "Paris": 0.9}}], {"": {"Rome": 0.7}}),  # passages move it
    ],
)
def test_parametric_does_not_fire(tables, closed):
    gen, trace, st = toy([("a", 0.5, tables[0]), ("b", 0.5, tables[1])], closed=closed)
    d = diagnose(gen, trace, st, "Lyon", decoding="rag-sequence")
    assert d.answer == "Rome"
    assert d.verdict("parametric").fired is False


def test_parametric_without_closed_book_cannot_be_decided():
    gen, trace, st = toy([("a", 0.5, {"": {"Rome": 0.6}}), ("b", 0.5, {"": {"Rome": 0.6}})])
    assert verdicts.diagnose(trace, None).verdict("parametric").fired is None


# ------------------------------------------------------------------------------ Frankenstein
STITCH = [
    ("first passage", 0.5, {"": {"A": 0.9, "B": 0.1}, "A": {"x": 0.6, "y": 0.4}, "B": {"y": 1.0}}),
    ("second passage", 0.5, {"": {"A": 0.2, "B": 0.8}, "A": {"y": 0.9, "x": 0.1}, "B": {"x": 1.0}}),
]


def test_frankenstein_fires_when_rag_token_stitches_two_passages():
    gen, trace, st = toy(STITCH)
    tok, seq = trace.answer("rag-token"), trace.answer("rag-sequence")
    assert (tok.answer, seq.answer) == ("A y", "B x")
    # p_tok(A y) = 0.55 * 0.65; p_seq(A y) = 0.5*0.9*0.4 + 0.5*0.2*0.9; p_seq(B x) = 0.4
    assert math.exp(tok.log_p_tok(trace.log_prior)) == pytest.approx(0.3575)
    assert math.exp(tok.log_p_seq(trace.log_prior)) == pytest.approx(0.27)
    d = diagnose(gen, trace, st, "B x", decoding="rag-token")
    v = d.verdict("frankenstein")
    assert v.fired is True and v.evidence["sources"] == [1, 2]
    assert [s["rank"] for s in v.evidence["steps"] if s["decided"]] == [1, 2]  # the end token decides nothing
    assert (
        verdicts.diagnose(trace, None, "rag-token").verdict("frankenstein").fired is True
    )  # no expected answer needed


def test_frankenstein_does_not_fire_when_both_decodings_agree_or_the_answer_is_right():
    gen, trace, st = toy(
        [
            (
                "p",
                0.7,
                {"": {"born": 0.8, "Chicago": 0.1}, "born": {"Hawaii": 0.9}, "Chicago": {"Hawaii": 0.5}},
            ),
            (
                "q",
                0.3,
                {"": {"born": 0.4, "Chicago": 0.5}, "born": {"Hawaii": 0.1}, "Chicago": {"Hawaii": 0.2}},
            ),
        ]
    )
    assert trace.answer("rag-token").answer == trace.answer("rag-sequence").answer == "born Hawaii"
    assert verdicts.diagnose(trace, None, "rag-token").verdict("frankenstein").fired is False
    gen, trace, st = toy(STITCH)
    d = diagnose(gen, trace, st, "A y", decoding="rag-token")  # the stitched answer happens to be right
    assert d.correct and d.fired == []


def test_frankenstein_does_not_fire_for_an_answer_from_one_passage():
    # RAG-Token and RAG-Sequence differ, but every decided token of RAG-Token's answer comes from passage 1.
    gen, trace, st = toy(
        [
            ("p", 0.5, {"": {"A": 0.6, "B": 0.4}, "A": {"x": 0.9}, "B": {"y": 0.9}}),
            ("q", 0.5, {"": {"A": 0.45, "B": 0.55}, "A": {"x": 0.1, "w": 0.9}, "B": {"y": 1.0}}),
        ]
    )
    assert (trace.answer("rag-token").answer, trace.answer("rag-sequence").answer) == ("A x", "B y")
    v = verdicts.diagnose(trace, None, "rag-token").verdict("frankenstein")
    assert v.fired is False and v.evidence["sources"] == [1]
    assert [s["rank"] for s in v.evidence["steps"] if s["decided"]] == [1, 1]


# ------------------------------------------------------------------------------ misleading passage
def test_misleading_passage_fires_when_the_top_posterior_passage_says_the_wrong_answer():
    gen, trace, st = toy(
        [
            ("Paris is the capital of France.", 0.7, {"": {"Paris": 0.9}}),
            ("Interpol is headquartered in Lyon.", 0.3, {"": {"Lyon": 0.9}}),
        ]
    )
    d = diagnose(gen, trace, st, "Lyon")
    assert d.answer == "Paris"
    v = d.verdict("misleading-passage")
    assert v.fired is True and v.evidence["rank"] == 1 and v.evidence["contains_produced"]
    assert d.verdict("evidence-ignored").fired is False and d.verdict("retrieval-miss").fired is False


def test_misleading_passage_does_not_fire_when_the_top_passage_holds_the_expected_answer():
    gen, trace, st = toy(
        [
            ("Paris; Interpol later moved to Lyon.", 0.7, {"": {"Paris": 0.9}}),
            ("Interpol is headquartered in Lyon.", 0.3, {"": {"Lyon": 0.9}}),
        ]
    )
    d = diagnose(gen, trace, st, "Lyon")
    assert d.verdict("misleading-passage").fired is False
    assert d.verdict("evidence-ignored").fired is True  # passage 1 has Lyon, the generator says Paris


def test_a_correct_answer_fires_nothing_and_no_expected_answer_leaves_three_verdicts_open():
    gen, trace, st = toy([("Interpol is headquartered in Lyon.", 1.0, {"": {"Lyon": 0.9}})])
    d = diagnose(gen, trace, st, "lyon")
    assert d.correct and d.fired == []
    d = verdicts.diagnose(trace, None)
    assert d.correct is None
    assert {v.code for v in d.verdicts if v.fired is None} == {
        "retrieval-miss",
        "evidence-ignored",
        "misleading-passage",
        "search-error",
        "parametric",
    }  # K=1: flatness means nothing


def test_expected_aliases_split_on_bars_and_forced_scores_match_decoding():
    gen, trace, st = toy(STITCH)
    forced = scoring.score_texts(gen, trace, ["B x", "A y"], st)
    tok = trace.answer("rag-token")
    got = next(a for a in forced.expected if a.text == "A y")
    assert torch.allclose(got.token_logp, tok.token_logp.double())
    # re-preparing the prompts (the app's path, no stored state) gives the same numbers, one more call
    again = scoring.force_answers(
        SimpleNamespace(models=SimpleNamespace(generator=gen, lock=threading.RLock())), trace, ["A y"]
    )
    assert again.calls == forced.calls + 1
    assert torch.allclose(again.expected[0].token_logp, got.token_logp)
    d = verdicts.diagnose(trace, "A  y | B x", "rag-token", forced=forced)
    assert d.expected == ["A  y", "B x"] and d.correct


# ------------------------------------------------------------------------------ search error
def test_search_error_fires_when_the_model_prefers_the_expected_answer_greedy_missed():
    # Greedy takes "A" (0.6) and then "w" (0.4): p("A w") = 0.24 < p("B") = 0.4.
    gen, trace, st = toy(
        [("B is the answer here.", 1.0, {"": {"A": 0.6, "B": 0.4}, "A": {"x": 0.3, "y": 0.3, "w": 0.4}})]
    )
    d = diagnose(gen, trace, st, "B")
    assert d.answer == "A w"
    v = d.verdict("search-error")
    assert (
        v.fired is True
        and v.evidence["p_expected"] == pytest.approx(0.4)
        and v.evidence["p_produced"] == pytest.approx(0.24)
    )
    beam = toy(
        [("B", 1.0, {"": {"A": 0.6, "B": 0.4}, "A": {"x": 0.3, "y": 0.3, "w": 0.4}})],
        cfg=AnswerSettings(beams=2),
    )[1]
    assert beam.answer("rag-sequence").answer == "B"  # ...and a wider search finds it


def test_search_error_does_not_fire_when_the_model_prefers_the_produced_answer():
    gen, trace, st = toy(
        [
            ("Paris is the capital of France.", 0.6, {"": {"Lyon": 0.7, "Paris": 0.2}}),
            ("Lyon is a city.", 0.4, {"": {"Lyon": 0.9}}),
        ]
    )
    assert diagnose(gen, trace, st, "Paris").verdict("search-error").fired is False


# ------------------------------------------------------------------------------ counterfactuals
def rerun(gen, trace, keep, scale, cfg=GREEDY):
    """The full recomputation: retrieve only the kept passages, new prior, decode again."""
    hits = [h for h, on in zip(trace.hits, keep) if on]
    log_pz = marginals.log_prior(torch.tensor([h.score for h in hits]), scale)
    return analyse(gen, trace.question, hits, log_pz, cfg, "toy", scale)


def check_against_rerun(gen, trace, cf, cfg=GREEDY):
    full = rerun(gen, trace, cf.keep, cf.scale, cfg)
    seq, new_seq = cf.answers["rag-sequence"], full.answer("rag-sequence")
    assert seq.exact and seq.answer == new_seq.answer
    assert seq.log_p == pytest.approx(new_seq.log_p_seq(full.log_prior), abs=1e-9)
    tok, new_tok = cf.answers["rag-token"], full.answer("rag-token")
    if not tok.exact:  # never another answer in its place
        assert tok.needs_model_call and tok.answer is None and tok.log_p is None
    if tok.exact:
        assert tok.answer == new_tok.answer
        assert tok.log_p == pytest.approx(new_tok.log_p_tok(full.log_prior), abs=1e-9)
    elif "now wins" in tok.note:  # a certified divergence: the rerun must indeed answer differently
        assert new_tok.answer != trace.answer("rag-token").answer
    return tok.exact


def test_counterfactual_prior_matches_marginals():
    gen, trace, st = toy(STITCH + [("third", 0.25, {"": {"B": 0.9}})])
    lpz, keep, scale = counterfactual.counterfactual_prior(trace, drop_ranks=[2])
    assert keep == [True, False, True] and scale == 1.0
    assert torch.allclose(lpz, marginals.drop_passages(trace.log_prior, torch.tensor(keep)))
    lpz, keep, _ = counterfactual.counterfactual_prior(trace, k=2)
    assert keep == [True, True, False] and lpz.exp()[:2].sum().item() == pytest.approx(1.0)
    with pytest.raises(ValueError):
        counterfactual.counterfactual_prior(trace, drop_ranks=[1, 2, 3])


def test_removing_a_passage_flips_the_stitched_answer_and_says_a_rerun_is_needed():
    gen, trace, st = toy(STITCH)
    cf = counterfactual.counterfactual(trace, drop_ranks=[2])
    assert cf.answers["rag-sequence"].answer == "A x"  # passage 1's own hypothesis, exact
    assert cf.answers["rag-token"].exact is False and "now wins step 1" in cf.answers["rag-token"].note
    assert cf.answers["rag-token"].needs_model_call and "needs a model call" in cf.answers["rag-token"].note
    check_against_rerun(gen, trace, cf)
    assert rerun(gen, trace, cf.keep, 1.0).answer("rag-token").answer == "A x"


def test_counterfactuals_equal_a_full_recomputation():
    """Random toy models: every counterfactual that claims to be exact equals a rerun, and every
    certified divergence of the greedy path is real."""
    exact = []
    for seed in range(12):
        rng = random.Random(seed)
        words = ["a", "b", "c"]

        def table():
            out = {}
            for prefix in [""] + words + [f"{u} {v}" for u in words for v in words]:
                w = [rng.random() ** 3 for _ in range(4)]
                out[prefix] = {t: x / sum(w) for t, x in zip(words + ["</s>"], w)}
            return out

        passages = [(f"passage {i}", rng.random() + 0.05, table()) for i in range(4)]
        cfg = AnswerSettings(beams=1, max_new_tokens=4)
        gen, trace, st = toy(passages, cfg=cfg, alternatives=3)  # 3 of 5 tokens kept: the bounds get used
        variants = [dict(drop_ranks=[r]) for r in range(1, 5)] + [dict(k=k) for k in (1, 2, 3)]
        variants += [dict(scale=s) for s in (0.3, 2.0, 6.0)] + [dict(drop_ranks=[1], scale=3.0)]
        for v in variants:
            cf = counterfactual.counterfactual(trace, **v)
            check_against_rerun(gen, trace, cf, cfg)
            note = cf.answers["rag-token"].note
            exact.append(
                "exact"
                if cf.answers["rag-token"].exact
                else "diverges"
                if "now wins" in note
                else "uncertain"
            )
    counts = {k: exact.count(k) for k in ("exact", "diverges", "uncertain")}
    print(counts)
    assert counts["exact"] >= 30 and counts["diverges"] >= 10, counts


def test_counterfactual_table_carries_the_forced_expected_answer():
    gen, trace, st = toy(STITCH)
    forced = scoring.score_texts(gen, trace, ["B y"], st)
    cf = counterfactual.counterfactual(trace, k=1, forced=forced)
    row = next(r for r in cf.table if r["kind"] == "expected")
    assert row["answer"] == "B y"
    assert row["p_seq"] == pytest.approx(0.1 * 1.0)  # only passage 1: p(B)=0.1, p(y|B)=1
    assert row["p_seq_before"] == pytest.approx(0.5 * 0.1)


# ------------------------------------------------------------------------------ the app panel
def _toy_trace(question: str = "Which letters?"):
    """The stitched toy: RAG-Token takes "A" from passage 1 and "x" from passage 2."""
    import math

    import torch

    from rag_core import marginals
    from rag_core.config import AnswerSettings
    from rag_core.corpus import Passage
    from rag_core.decoding.answering import analyse
    from rag_core.generators.toy import ToyGenerator
    from rag_core.trace import Hit

    tables = {
        "z1": {"": {"A": 0.9, "B": 0.1}, "A": {"x": 0.6, "y": 0.4}, "B": {"y": 1.0}},
        "z2": {"": {"A": 0.2, "B": 0.8}, "A": {"y": 0.9, "x": 0.1}, "B": {"x": 1.0}},
    }
    hits = [
        Hit(1, Passage("z1", "First", "A x is here.", "toy"), math.log(0.5)),
        Hit(2, Passage("z2", "Second", "B x is here.", "toy"), math.log(0.5)),
    ]
    lpz = marginals.log_prior(torch.tensor([h.score for h in hits]), 1.0)
    return analyse(
        ToyGenerator(tables), question, hits, lpz, AnswerSettings(beams=1, max_new_tokens=8), "toy", 1.0
    )


def _panel_app():
    """A page that shows the Diagnose panel for the stitched toy, asked as `toy_q` (cached per question)."""
    import streamlit as st
    from test_diagnosis import _toy_trace

    from app.ask import diagnose_panel

    @st.cache_resource
    def toy_trace(question):
        return _toy_trace(question)

    question = st.session_state.get("toy_q", "Which letters?")
    st.session_state.setdefault("expected_answers", {"Which letters?": "B x"})
    diagnose_panel.render(toy_trace(question))


def test_the_diagnose_panel_shows_verdicts_and_counterfactuals_without_model_calls():
    from streamlit.testing.v1 import AppTest

    from app.ask.counterfactual_panel import cf_key
    from rag_core.generators.base import ForwardCounter

    trace = _toy_trace()
    at = AppTest.from_function(_panel_app, default_timeout=120)
    at.run()
    assert not at.exception, [e.value for e in at.exception]
    assert at.text_input(key="diag_expected").value == "B x"  # prefilled from the handed-over answer
    at.radio(key="diag_decoding").set_value("rag-token").run()
    titles = [e.label for e in at.expander]
    assert titles[0].startswith(":red[**Fired**] · Frankenstein answer"), titles  # fired first, in words
    assert all(len(e.children) for e in at.expander), titles  # an expander only where there is evidence
    (line,) = [m.value for m in at.markdown if m.value.startswith("**Verdict:**")]
    assert ":red[**Frankenstein answer**]" in line, line
    calls = ForwardCounter.count
    at.multiselect(key=cf_key(trace, "drop")).select(
        2
    ).run()  # remove passage 2: RAG-Sequence -> "A x", exactly
    assert not at.exception, [e.value for e in at.exception]
    shown = {m.label: m for m in at.metric}
    assert shown["RAG-Sequence"].value == "A x" and shown["RAG-Token"].value == "needs a model call"
    # the badge is the signed change of p against the answer before, so a fall reads as a fall
    before = trace.answer("rag-sequence").log_p_seq(trace.log_prior)
    assert (
        shown["RAG-Sequence"].delta
        == f"{0.9 * 0.6 - math.exp(before):+.3f} (p {math.exp(before):.3g} → 0.54)"
    )
    at.multiselect(key=cf_key(trace, "drop")).unselect(2).run()
    at.slider(key=cf_key(trace, "k")).set_value(1).run()
    assert {m.label: m.value for m in at.metric}["RAG-Sequence"] == "A x"
    assert ForwardCounter.count == calls  # counterfactuals never call the model


def test_counterfactual_controls_start_afresh_for_a_new_question():
    """A scale set for one question must not silently change the next question's answer."""
    from streamlit.testing.v1 import AppTest

    from app.ask.counterfactual_panel import cf_key

    at = AppTest.from_function(_panel_app, default_timeout=120)
    at.run()
    first, second = _toy_trace(), _toy_trace("Which other letters?")
    at.number_input(key=cf_key(first, "scale")).set_value(2.0).run()
    at.slider(key=cf_key(first, "k")).set_value(1).run()
    at.session_state["toy_q"] = "Which other letters?"
    at.run()
    assert not at.exception, [e.value for e in at.exception]
    assert at.number_input(key=cf_key(second, "scale")).value == pytest.approx(1.0)
    assert at.slider(key=cf_key(second, "k")).value == 2
    unchanged = {m.label: m.delta for m in at.metric}
    assert unchanged["RAG-Sequence"].endswith(", unchanged"), unchanged


def test_every_verdict_has_an_evidence_type():
    assert set(EVIDENCE) == set(VERDICTS)
