"""AppTest checks of the Token vs Sequence, Citations and By hand pages, and of the Frankenstein detector.

One AppTest (the `wiki` index, the default question) is shared by the module: the first run loads
the models, later runs reuse the cached engine and trace. The stack is the default retriever with
a tiny random generator (`on_tiny_generator` in conftest), and every figure a page shows is
recomputed on the same stack: what is checked is that the pages show the engine's numbers, which
holds for any model.
"""

import math
from pathlib import Path

import pytest
import torch
from streamlit.testing.v1 import AppTest

from app.ui.safe_text import md_text
from rag_core import marginals
from rag_core.config import AnswerSettings, StackSpec
from rag_core.decoding import stepper
from rag_core.generators.base import ForwardCounter
from rag_core.toys import examples as toys

from conftest import visit as _visit


def visit(at, page):
    return _visit(at, page, errors_allowed=True)  # By hand shows validation errors on purpose


ROOT = Path(__file__).resolve().parent.parent


def metrics(at: AppTest) -> dict[str, str]:
    return {m.label: m.value for m in at.metric}


def table_with(at: AppTest, column: str, without: str | None = None):
    """The first rendered dataframe that has `column` (and not `without`)."""
    for d in at.dataframe:
        cols = list(d.value.columns)
        if column in cols and (without is None or without not in cols):
            return d.value
    raise AssertionError(f"no table with a {column!r} column")


@pytest.fixture(scope="module")
def at(on_tiny_generator):
    app = AppTest.from_file(str(ROOT / "app/main.py"), default_timeout=600)
    app.session_state["index_name"] = "wiki"  # other indexes may still be building
    return visit(app, "token_vs_sequence.py")


@pytest.fixture(scope="module")
def trace(at):
    """The trace the pages show: a hit in the app's own cache (same question, index and settings)."""
    from app import state

    return state.trace_for(state.DEFAULT_QUESTION, "wiki", AnswerSettings())


@pytest.mark.slow
def test_token_vs_sequence_steps_through_the_answer(at, trace):
    visit(at, "token_vs_sequence.py")
    assert len(at.get("plotly_chart")) >= 5  # token strip, step bars, credit bars, two over-step lines
    cand = trace.answer("rag-token")
    assert len(cand.tokens) >= 3
    shown = metrics(at)
    assert shown["Token y_i"] == cand.tokens[0].replace(" ", "␣").replace("\n", "↵")
    assert shown["p_tok (whole answer)"] == f"{math.exp(cand.log_p_tok(trace.log_prior)):.3g}"
    assert shown["p_seq (whole answer)"] == f"{math.exp(cand.log_p_seq(trace.log_prior)):.3g}"

    at.button(key="tvs_next").click().run()
    after_click = metrics(at)["Token y_i"]
    assert after_click != shown["Token y_i"]
    assert after_click == cand.tokens[1].replace(" ", "␣").replace("\n", "↵")

    at.select_slider(key="tvs_step_w").set_value(2).run()
    step2 = metrics(at)
    assert step2["Token y_i"] == cand.tokens[2].replace(" ", "␣").replace("\n", "↵")
    w = stepper.walk(trace.log_prior, cand)
    assert step2["p_tok(y_≤i)"] == f"{math.exp(w.log_p_tok[2]):.3g}"
    assert step2["p_seq(y_≤i)"] == f"{math.exp(w.log_p_seq[2]):.3g}"
    # the prefix marginals at the last step are the whole-answer ones
    assert w.log_p_tok[-1] == pytest.approx(cand.log_p_tok(trace.log_prior))
    assert w.log_p_seq[-1] == pytest.approx(cand.log_p_seq(trace.log_prior))

    at.button(key="tvs_prev").click().run()
    assert metrics(at)["Token y_i"] == after_click
    # thorough and fast tables side by side, the fast one derived from the thorough one
    thorough, fast = table_with(at, "p_seq", without="made by"), table_with(at, "made by")
    assert list(thorough["answer"]) == [c.answer for c in trace.of("rag-sequence")]
    for n, c in enumerate(trace.of("rag-sequence")):
        for z in range(trace.k):
            col = f"z{z + 1}"
            assert thorough[col][n] == pytest.approx(float(marginals.doc_sequence_logp(c.token_logp)[z]))
            assert fast[col][n] == (thorough[col][n] if z in c.sources else -math.inf)


@pytest.mark.slow  # over 5 s on 2 cores
def test_citations_drop_a_passage_remarginalises(at, trace):
    visit(at, "citations.py")
    charts = at.get("plotly_chart")
    assert len(charts) >= 4  # two slope charts, the heatmap, the drop chart
    assert any('"heatmap"' in c.proto.spec for c in charts)
    seq = trace.answer("rag-sequence")
    before = table_with(at, "p_seq after")
    p_seq0 = math.exp(seq.log_p_seq(trace.log_prior))
    assert before["p_seq after"][1] == pytest.approx(p_seq0)  # nothing dropped yet

    at.multiselect(key="cit_drop").select(0).run()
    assert not at.exception
    after = table_with(at, "p_seq after")
    keep = torch.tensor([False] + [True] * (trace.k - 1))
    lp = marginals.drop_passages(trace.log_prior, keep)
    expected = math.exp(float(marginals.rag_sequence(lp, seq.token_logp)))
    assert after["p_seq after"][1] == pytest.approx(expected, rel=1e-9)
    assert abs(after["p_seq after"][1] / p_seq0 - 1) > 1e-3  # dropping the first passage changed p
    tok = trace.answer("rag-token")
    assert after["p_tok after"][0] == pytest.approx(
        math.exp(float(marginals.rag_token(lp, tok.token_logp))), rel=1e-9
    )
    assert metrics(at)["RAG-Sequence answer · p_seq"] == f"{expected:.3g}"
    at.multiselect(key="cit_drop").unselect(0).run()


def test_by_hand_defaults_and_validation(at):
    visit(at, "by_hand.py")
    shown = metrics(at)
    assert shown["p_seq(born Hawaii)"] == "0.516" and shown["p_tok(born Hawaii)"] == "0.449"
    assert shown["p_seq(Chicago Hawaii)"] == "0.065" and shown["p_tok(Chicago Hawaii)"] == "0.0902"
    assert [shown[f"p(d{i}|x)"] for i in (1, 2, 3)] == ["0.55", "0.247", "0.202"]
    assert shown["p(z1|x,y)"] == "0.913" and shown["p(z2|x,y)"] == "0.087"
    table = table_with(at, "p_tok", without="p_tok before")
    assert table["p_seq"].tolist() == pytest.approx([0.516, 0.065], abs=5e-4)
    assert table_with(at, "p(z|x)")["p(z|x)"].tolist() == pytest.approx([0.550, 0.247, 0.202], abs=5e-4)
    assert len(at.get("plotly_chart")) >= 3
    assert not at.error

    # a valid edit recomputes: p(born|z1) 0.8 -> 0.6 gives p_seq(born Hawaii) = 0.7*0.6*0.9 + 0.3*0.4*0.1
    edit = {"edited_rows": {0: {"p(word|x,z,after)": 0.6}}, "added_rows": [], "deleted_rows": []}
    at.session_state["hand_obama_cond"] = edit
    at.run()
    assert metrics(at)["p_seq(born Hawaii)"] == f"{0.7 * 0.6 * 0.9 + 0.3 * 0.4 * 0.1:.3g}"
    # a negative probability: one error, no traceback, the last valid numbers stay
    at.session_state["hand_obama_cond"] = {
        "edited_rows": {0: {"p(word|x,z,after)": -0.5}},
        "added_rows": [],
        "deleted_rows": [],
    }
    at.run()
    assert not at.exception and len(at.error) == 1 and "negative" in at.error[0].value
    assert metrics(at)["p_seq(born Hawaii)"] == "0.39"
    # a non-numeric prior and a non-numeric vector coordinate: one error each
    at.session_state["hand_obama_prior"] = {
        "edited_rows": {1: {"prior p(z|x)": "lots"}},
        "added_rows": [],
        "deleted_rows": [],
    }
    at.session_state["hand_pulse_vec"] = {
        "edited_rows": {2: {"x": "abc"}},
        "added_rows": [],
        "deleted_rows": [],
    }
    at.run()
    assert not at.exception and len(at.error) == 2
    assert [metrics(at)[f"p(d{i}|x)"] for i in (1, 2, 3)] == ["0.55", "0.247", "0.202"]


def test_by_hand_query_sliders_move_the_prior(at):
    """The first demo of By hand: move q and the three-passage softmax follows (checked by brute force)."""
    at.session_state["hand_pulse_vec"] = {
        "edited_rows": {},
        "added_rows": [],
        "deleted_rows": [],
    }  # no bad cell
    visit(at, "by_hand.py")
    at.slider(key="hand_q_x").set_value(0.0)
    at.slider(key="hand_q_y").set_value(1.0).run()
    vecs, q = [(1.0, 0.0), (0.2, 0.1), (0.0, 1.0)], (0.0, 1.0)
    weights = [math.exp(1.0 * (d[0] * q[0] + d[1] * q[1])) for d in vecs]  # scale 1, the shipped toy's
    want = [f"{w / sum(weights):.3g}" for w in weights]
    assert [metrics(at)[f"p(d{i}|x)"] for i in (1, 2, 3)] == want
    assert want[2] > want[0]  # q now points along d3: it overtakes d1
    at.slider(key="hand_q_x").set_value(1.0)
    at.slider(key="hand_q_y").set_value(0.0).run()
    assert [metrics(at)[f"p(d{i}|x)"] for i in (1, 2, 3)] == ["0.55", "0.247", "0.202"]


def test_frankenstein_detector_flags_stitched_answers_only():
    tr = toys.run_toy("obama").trace
    by_answer = {c.answer: c for c in tr.of("rag-token")}
    # "Chicago" is mostly z2's word (r = 0.68), "Hawaii" after it mostly z1's (r = 0.85)
    assert stepper.frankenstein_steps(tr, by_answer["Chicago Hawaii"]) == [1]
    assert stepper.frankenstein_steps(tr, by_answer["born Hawaii"]) == []
    one = toys.run_toy("posterior").trace
    assert stepper.frankenstein_steps(one, one.candidates[0]) == []
    # three words drawn z1, z2, z1: two switches; the end token (all passages alike) is not evidence
    spec = {
        "name": "zigzag",
        "question": "q",
        "candidates": ["a b c"],
        "passages": [{"id": "z1", "prior": 0.5}, {"id": "z2", "prior": 0.5}],
        "tables": {
            "z1": {"": {"a": 0.9}, "a": {"b": 0.1}, "a b": {"c": 0.9}},
            "z2": {"": {"a": 0.1}, "a": {"b": 0.9}, "a b": {"c": 0.1}},
        },
    }
    zig = toys.run_spec(spec).trace
    assert stepper.frankenstein_steps(zig, zig.of("rag-token")[0]) == [1, 2]


@pytest.mark.slow  # over 5 s on 2 cores
def test_view_only_reruns_make_no_model_call(at):
    visit(at, "by_hand.py")  # the toy runs are cached after their first run
    visit(at, "token_vs_sequence.py")
    before = ForwardCounter.count
    visit(at, "citations.py")
    at.multiselect(key="cit_drop").select(1).run()
    visit(at, "token_vs_sequence.py")
    at.button(key="tvs_next").click().run()
    at.select_slider(key="tvs_step_w").set_value(0).run()
    visit(at, "by_hand.py")
    visit(at, "ask.py")
    assert not at.exception
    assert ForwardCounter.count == before


# ------------------------------------------------------------ where the answer came from
@pytest.fixture(scope="module")
def wiki_pipeline(on_tiny_generator):
    """A fresh pipeline of the pages' stack on their index, for recomputing what they show."""
    from rag_core.pipeline import load_pipeline

    return load_pipeline(StackSpec(generator=str(on_tiny_generator)), AnswerSettings(index="wiki"))


@pytest.mark.slow  # over 5 s on 2 cores
def test_the_ask_page_shows_the_token_sources_the_engine_computes(at, wiki_pipeline):
    """The Ask page's shares per decoding are those recomputed here from a fresh trace, a fresh
    closed-book row and the passages' texts, under the categories' names, each strip is drawn, and
    under it the line that says what each category it shows measures."""
    from app.ui.source_views import key_line, share_line
    from rag_core.analysis.attribution.token_sources import (
        LABELS,
        MEANINGS,
        candidate_sources,
        kind,
        passage_texts,
    )

    visit(at, "ask.py")
    fresh = wiki_pipeline.run("Who wrote Moby-Dick?", AnswerSettings(index="wiki"))
    captions = [c.value for c in at.caption]
    for decoding, name in (("rag-token", "RAG-Token"), ("rag-sequence", "RAG-Sequence")):
        c = fresh.answer(decoding)
        closed = wiki_pipeline.closed_book_scores(fresh.question, [c.token_ids])[0]  # (T,)
        found = candidate_sources(fresh.log_prior, c, closed, passage_texts(fresh))
        assert all(s.in_passage is not None for s in found)
        assert f"{name}: {share_line(found)}" in captions, captions
        assert key_line(found) in captions, captions
        for k in {kind(s) for s in found} & set(MEANINGS):  # each category shown is named and explained
            assert f"{LABELS[k].capitalize()}: {MEANINGS[k]}" in key_line(found)
    assert not any("model's weights" in t for t in captions), captions  # the old words that read as "no part"
    keys = {getattr(c, "key", None) for c in at.get("plotly_chart")}
    assert {"ask_sources_rag-token_0", "ask_sources_rag-sequence_0"} <= keys


@pytest.mark.slow  # over 5 s on 2 cores
def test_citations_shows_each_sentences_delta_for_the_cited_passage(at, wiki_pipeline):
    """On demand (nothing is read before the toggle), the sentences of the passage the RAG-Token
    answer cites most, with the Δ log p that leaving each out costs, recomputed here."""
    from rag_core.analysis.attribution.sentences import attribute

    visit(at, "citations.py")
    assert not [d for d in at.dataframe if "delta_logp" in d.value.columns]  # not read yet
    at.toggle(key="cit_sent_on").set_value(True).run()
    fresh = wiki_pipeline.run("Who wrote Moby-Dick?", AnswerSettings(index="wiki"))
    c = fresh.answer("rag-token")
    z = int(marginals.citation(fresh.log_prior, c.token_logp).argmax())
    att = attribute(wiki_pipeline, fresh.question, fresh.hits[z].passage, c.token_ids)
    shown = table_with(at, "delta_logp")
    assert list(shown["text"]) == att.sentences
    assert list(shown["delta_logp"]) == pytest.approx(att.delta, abs=1e-4)
    assert "cit_sent_bars" in {getattr(ch, "key", None) for ch in at.get("plotly_chart")}


# ------------------------------------------------------------ the stuffed reading on the pages
@pytest.mark.slow
def test_the_stuffed_reading_on_token_vs_sequence_and_citations_is_the_engines(at, trace, wiki_pipeline):
    """The third card, the stepped stuffed answer and the worth table are those of a fresh trace
    decoded with decode="all" (its own leave-one-out and its answer under each passage alone). The
    other orders are the ones the door computed for the page (`Pipeline.stuffed_orders`, which
    tests/test_stuffed.py checks against each order read alone): read back, not computed again."""
    from app import state
    from app.ui.stuffed_views import agreement_line
    from rag_core.analysis.attribution import stuffed_worth

    fresh = wiki_pipeline.run("Who wrote Moby-Dick?", AnswerSettings(index="wiki", decode="all"))
    w = stuffed_worth.of(fresh)
    visit(at, "token_vs_sequence.py")
    shown = metrics(at)
    assert shown["Stuffed (the 5 passages in one prompt)"] == md_text(w.answer.answer)  # as literal text
    assert shown["p(y_i | x, all K, y_<i)"] == f"{w.p_token[0]:.3g}"
    at.select_slider(key="tvs_stuffed_step").set_value(1).run()
    assert metrics(at)["Stuffed token y_i"] == md_text(
        w.answer.tokens[1].replace(" ", "␣").replace("\n", "↵")
    )
    assert metrics(at)["p(y_i | x, all K, y_<i)"] == f"{w.p_token[1]:.3g}"
    visit(at, "citations.py")
    table = table_with(at, "worth (nats)")
    assert list(table["worth (nats)"]) == pytest.approx(list(w.worth), abs=1e-3)
    assert list(table["p(y|x, all but z)"]) == pytest.approx(w.p_without, rel=1e-3)
    assert list(table["mixture p(z|x,y)"]) == pytest.approx(list(w.mixture), abs=1e-4)
    said = [m.value for m in (*at.success, *at.info)]
    assert agreement_line(fresh, w) in said, said
    keys = {getattr(c, "key", None) for c in at.get("plotly_chart")}
    assert {"cit_worth", "cit_token_worth"} <= keys
    # which sentence of the passage it leans on carried the stuffed answer, inside the one prompt
    assert at.selectbox(key="cit_stuffed_sent_z").value == w.leans_on
    at.toggle(key="cit_sent_on").set_value(True).run()
    at.toggle(key="cit_stuffed_sent_on").set_value(True).run()
    from rag_core.analysis.attribution.sentences import attribute_stuffed

    passages = [h.passage for h in fresh.hits]
    att = attribute_stuffed(wiki_pipeline, fresh.question, passages, w.leans_on, w.answer.token_ids)
    deltas = [d.value for d in at.dataframe if "delta_logp" in d.value.columns]
    assert len(deltas) == 2  # the marginal's passage alone, then the stuffed prompt
    shown = deltas[1].sort_values("sentence")
    assert list(shown["delta_logp"]) == pytest.approx(att.delta, abs=1e-3)
    # the other orders, on demand: each its own answer, and the retrieved answer's p under it
    at.toggle(key="cit_orders").set_value(True).run()
    assert not at.exception
    orders = table_with(at, "its answer")
    got = state.stuffed_orders(trace)  # what the page read, from the door's cache
    assert state.with_stuffed(trace).answer("stuffed").token_ids == w.answer.token_ids  # of this answer
    assert len(got) == 2 * fresh.k - 1
    assert list(orders["its answer"]) == [w.answer.answer] + [o.answer for o in got]
    p_answer = list(orders[f"p(“{w.answer.answer}”)"])
    assert p_answer == pytest.approx([w.p] + [math.exp(o.logp_answer) for o in got], rel=1e-3)
    changed = sum(stuffed_worth.changes_answer(o, w.answer.answer) for o in got)
    said = [m.value.strip("*") for m in at.markdown]
    assert f"{changed} of {len(got)} other orders change the answer." in said
    at.toggle(key="cit_orders").set_value(False).run()


# ------------------------------------------------------------ one question, counted
UNASKED_MAX_TOKENS = 23  # a sidebar value no other test answers with


@pytest.mark.slow
def test_one_question_asked_on_ask_is_cleaned_once_and_its_settings_built_once(at, monkeypatch):
    """The app's own path from a question to its cards on Ask (the answer, the stuffed reading, the
    confidence and token sources the cards draw): the engine cleans the question once, and the
    AnswerSettings it runs under are built once, by the page; every later step reads the question as
    the trace recorded it and reuses those settings."""
    from app import state
    from rag_core import pipeline as pipeline_module

    cleaned, built = [], []
    real_clean, real_init = pipeline_module.clean_question, AnswerSettings.__init__

    def counted_init(self, *args, **kwargs):  # every AnswerSettings made, `replace` and `with_` included
        real_init(self, *args, **kwargs)
        built.append(self.max_new_tokens)

    visit(at, "ask.py")  # the default question's page, drawn and cached
    monkeypatch.setattr(pipeline_module, "clean_question", lambda q: cleaned.append(q) or real_clean(q))
    monkeypatch.setattr(AnswerSettings, "__init__", counted_init)
    at.session_state["question"] = "Who composed the opera Carmen?"  # asked nowhere else in the suite
    at.session_state["max_new_tokens"] = UNASKED_MAX_TOKENS  # settings no answer has used
    visit(at, "ask.py")
    try:
        assert {m.label for m in at.metric} >= {"RAG-Token", "RAG-Sequence"}  # the cards were drawn
        assert cleaned == ["Who composed the opera Carmen?"]
        assert built.count(UNASKED_MAX_TOKENS) == 1  # the page's, reused by everything that follows
    finally:
        at.session_state["max_new_tokens"] = state.DEFAULTS.max_new_tokens
        at.session_state["question"] = state.DEFAULT_QUESTION  # the module's other tests read it
