"""The stuffed reading (rag_core/decoding/stuffed.py): the K passages in one prompt, decoded by the
marginals' search, and its exact leave-one-passage-out. Each number against another way to get it:
the toy's tables by hand, a loop of separate generator calls (one per passage left out, on the
question's real passages and prompts read by the tiny Llama), and the trained default itself through
transformers (`generate()` on the same prompt, a plain forward over prompt + answer)."""

from __future__ import annotations

import dataclasses
import io
import json
import math

import numpy as np
import pandas as pd
import pytest
import torch
from streamlit.testing.v1 import AppTest

from rag_core.analysis.diagnosis.confidence import candidate_confidence
from rag_core.config import AnswerSettings
from rag_core.corpus import Passage, Stuffed
from rag_core.decoding import stuffed as stuffed_module
from rag_core.decoding.answering import analyse
from rag_core.decoding.decode import SearchSettings, score_answers
from rag_core.decoding.stuffed import (
    leave_one_out,
    order_sensitivity,
    orders,
    stuffed_decode,
    stuffed_state,
    worth,
)
from rag_core.generators import causal, shared_rows
from rag_core.generators.base import ForwardCounter
from rag_core.generators.toy import ToyGenerator
from rag_core.toys.examples import run_toy
from rag_core.trace import Hit, StuffedReading, trace_from_dict, trace_to_dict

from conftest import check_trace_invariants, run_cli

QUESTION = "Who wrote Moby-Dick?"
TOL = 1e-4  # float32 batches against single calls: docs/results.md's rounding bound for log-probs


# ------------------------------------------------------------------------------------------- toy
def toy():
    tables = {
        "a": {"": {"Lyon": 0.9}},
        "b": {"": {"Paris": 0.6, "Lyon": 0.2}},
        "c": {"": {"Rome": 0.5}},
        "a+b+c": {"": {"Paris": 0.7}},  # read together, the three passages point elsewhere
    }
    passages = [Passage(i, i.upper(), f"text {i}") for i in "abc"]
    return ToyGenerator(tables), passages


def test_the_toy_reads_a_table_written_for_the_passages_together_else_their_even_mixture():
    gen, passages = toy()
    best = stuffed_decode(gen, "q", passages, SearchSettings())[0]
    assert gen.decode(best.tokens) == "Paris"
    assert best.token_logp.shape == (1, 2)  # (1, T): Paris, end
    assert float(best.token_logp.sum().exp()) == pytest.approx(0.7, abs=1e-12)
    pair = stuffed_decode(gen, "q", passages[:2], SearchSettings())[0]  # no "a+b" table: the mixture
    assert gen.decode(pair.tokens) == "Lyon"  # (0.9 + 0.2) / 2 = 0.55 against Paris's 0.3
    assert float(pair.token_logp.sum().exp()) == pytest.approx(0.55, abs=1e-12)


def test_leave_one_out_is_the_loop_of_separate_calls_and_the_hand_numbers():
    gen, passages = toy()
    tokens = gen.encode_answer("Paris")
    loo = leave_one_out(gen, "q", passages, tokens)  # (K, T)
    by_hand = [(0.6 + 0.0) / 2, (0.0 + 0.0) / 2, (0.0 + 0.6) / 2]  # p(Paris | the two left), even mixture
    assert [float(r.sum().exp()) for r in loo] == pytest.approx(by_hand, abs=1e-12)
    for z in range(3):  # one generator call per passage left out, nothing batched
        state = gen.prepare_rows([("q", Stuffed(tuple(passages)).without(z))])
        alone = score_answers(gen, state, [tokens])[0][0, 0]  # (T,)
        assert torch.equal(alone, loo[z])
    # worth: taking b out costs the answer everything; a and c cost log(0.7 / 0.3)
    w = worth(torch.tensor([math.log(0.7), 0.0], dtype=torch.float64), loo)
    assert w[0] == pytest.approx(math.log(0.7 / 0.3))
    assert w[1] == math.inf


def test_the_trace_rows_of_the_stuffed_reading_hold_its_leave_one_out(tmp_path):
    """A toy trace decoded with `--decode all`: the stuffed rows' p_token_doc is the leave-one-out
    computed by hand, p_token_mix the reading's own step, p_stuffed their product; the marginals'
    rows are what they were (their invariants hold) and leave p_stuffed empty."""
    gen, passages = toy()
    hits = [Hit(r, p, 0.0) for r, p in enumerate(passages, 1)]
    lpz = torch.log(torch.tensor([0.5, 0.3, 0.2], dtype=torch.float64))  # (K,)
    trace = analyse(gen, "q", hits, lpz, AnswerSettings(decode="all", max_new_tokens=4), "toy", 1.0)
    frame = trace.to_frame()
    check_trace_invariants(frame)
    rows = frame[(frame["decoding"] == "stuffed") & (frame["candidate"] == 0)]
    assert list(rows["answer"].unique()) == ["Paris"]
    assert len(rows) == 2 * 3  # (T = 2 steps) x K
    first = rows[rows["step"] == 0].sort_values("doc_rank")
    assert list(first["p_token_doc"]) == pytest.approx([0.3, 0.0, 0.3], abs=1e-12)  # by hand, above
    assert list(first["p_token_mix"]) == pytest.approx([0.7] * 3, abs=1e-12)
    assert rows["p_stuffed"].iloc[0] == pytest.approx(0.7, abs=1e-12)
    assert rows[["posterior_step", "posterior_prefix", "p_seq", "p_tok"]].isna().all().all()
    marginal = frame[frame["decoding"] != "stuffed"]
    assert len(marginal) > 0
    assert marginal["p_stuffed"].isna().all()
    back = pd.read_csv(io.StringIO(trace.to_csv()))
    assert (back["decoding"] == "stuffed").sum() == (frame["decoding"] == "stuffed").sum()


def test_every_other_order_is_a_separate_call_and_the_toy_reads_its_own_table():
    """Reversed, each passage first and each last, never the retrieved order, each order once: its
    answer is `stuffed_decode` on that order alone and the retrieved answer's p its own scoring."""
    gen, passages = toy()
    tokens = gen.encode_answer("Paris")
    got = order_sensitivity(gen, "q", passages, tokens, SearchSettings())
    assert [(o.kind, o.moved) for o in got] == [(k, z) for k, z, _ in orders(3)]
    assert len({o.order for o in got}) == len(got) == 5 and (0, 1, 2) not in {o.order for o in got}
    for o in got:
        ordered = [passages[i] for i in o.order]
        alone = stuffed_decode(gen, "q", ordered, SearchSettings())[0]
        assert o.tokens == alone.tokens
        assert torch.equal(o.token_logp, alone.token_logp[0])
        state = gen.prepare_rows([("q", Stuffed(tuple(ordered)))])
        assert o.logp_answer == float(score_answers(gen, state, [tokens])[0][0, 0].double().sum())
    # no table for the passages in another order: the even mixture, where Lyon wins (0.9+0.2)/3
    assert {gen.decode(o.tokens) for o in got} == {"Lyon"}
    assert got[0].logp_answer == pytest.approx(math.log(0.6 / 3), abs=1e-12)


def test_one_passage_left_out_of_one_leaves_the_question_alone():
    """K = 1: the stuffed prompt is the passage itself, and leaving it out leaves no passage line."""
    gen, passages = toy()
    best = stuffed_decode(gen, "q", passages[:1], SearchSettings())[0]
    assert gen.decode(best.tokens) == "Lyon"
    loo = leave_one_out(gen, "q", passages[:1], best.tokens)  # (1, T): no passage at all
    assert loo.shape == (1, len(best.tokens))
    assert float(loo[0].sum().exp()) == 0.0  # the toy ends at once with nothing to read


def test_ask_refuses_what_the_stuffed_reading_cannot_do_before_loading_a_model():
    out = run_cli("ask", QUESTION, "--decode", "stuffed", "--expected", "Herman Melville")
    assert out.returncode == 2
    assert out.stderr.strip() == (
        "error: --expected and --sentences read the two marginals' answers: use --decode all"
    )


# ------------------------------------------------------- the default model, and the tiny Llama
def retrieved(pipe):
    return pipe, [h.passage for h in pipe.retrieve(QUESTION, 5)]


@pytest.fixture(scope="module")
def read(tiny_llama_pipeline):
    """The question's real passages and prompts, read by the tiny Llama: a batch against separate
    calls holds for any model, and the trained one costs a hundred times more."""
    return retrieved(tiny_llama_pipeline)


@pytest.mark.slow  # over 5 s on 2 cores
def test_the_stuffed_answer_is_generate_on_the_same_prompt(default_pipeline):
    """Greedy on the one stuffed row is transformers' `generate()` on the stuffed prompt, token for
    token, and its table is a plain forward over prompt + answer (on the trained default)."""
    pipe, passages = retrieved(default_pipeline)
    gen = pipe.models.generator
    best = stuffed_decode(gen, QUESTION, passages, SearchSettings(max_new_tokens=16))[0]
    prompt = causal.rag_prompt(QUESTION, Stuffed(tuple(passages)), gen.prompt_style)
    assert prompt.count("\nPassage: ") == len(passages)  # every passage, formatted as one is
    ids = torch.tensor([gen.tokenizer.encode(prompt, add_special_tokens=False)])  # (1, L)
    with torch.inference_mode():
        out = gen.model.generate(
            ids, attention_mask=torch.ones_like(ids), do_sample=False, max_new_tokens=16, num_beams=1
        )
    ref = out[0, ids.shape[1] :].tolist()
    ref = ref[: next((i + 1 for i, t in enumerate(ref) if t in gen.eos_ids), len(ref))]
    assert best.tokens == ref, (gen.decode(best.tokens), gen.decode(ref))
    answer = torch.tensor([best.tokens])  # (1, T)
    with torch.inference_mode():
        logits = gen.model(input_ids=torch.cat([ids, answer[:, :-1]], 1)).logits.float()  # (1, L+T-1, V)
    logp = torch.log_softmax(logits[0, -answer.shape[1] :], -1)  # (T, V)
    plain = logp.gather(-1, answer[0].unsqueeze(-1)).squeeze(-1)  # (T,)
    assert torch.allclose(best.token_logp[0], plain, atol=TOL), (best.token_logp[0], plain)


def test_leave_one_out_on_real_prompts_is_k_separate_calls(read, monkeypatch):
    pipe, passages = read
    gen = pipe.models.generator
    tokens = stuffed_decode(gen, QUESTION, passages, SearchSettings())[0].tokens
    loo = leave_one_out(gen, QUESTION, passages, tokens)  # (K, T), one batch
    # reading each row's tokens before passage z from the stuffed prompt's own cache
    state = stuffed_state(gen, QUESTION, passages)
    before = ForwardCounter.count
    shared = leave_one_out(gen, QUESTION, passages, tokens, state)
    assert ForwardCounter.count - before == 1  # the K prompts' rest and the answer: one packed forward
    assert loo.shape == shared.shape == (len(passages), len(tokens))
    for z in range(len(passages)):
        row = gen.prepare_rows([(QUESTION, Stuffed(tuple(passages)).without(z))])
        alone = score_answers(gen, row, [tokens])[0][0, 0]  # (T,)
        assert torch.allclose(loo[z], alone, atol=TOL), (z, loo[z], alone)
        assert torch.allclose(shared[z], alone, atol=TOL), (z, shared[z], alone)
    with pytest.raises(ValueError, match="not the prepared prompt"):  # another prompt's state
        leave_one_out(gen, QUESTION, passages, tokens, row)
    # a pack longer than a forward takes is split: the same numbers, one forward per group
    monkeypatch.setattr(shared_rows, "PACK_TOKENS", 400)
    before = ForwardCounter.count
    split = leave_one_out(gen, QUESTION, passages, tokens, state)
    assert ForwardCounter.count - before > 1
    assert torch.allclose(split, shared, atol=TOL)


def test_order_sensitivity_on_real_prompts_is_separate_calls(read):
    pipe, passages = read
    gen = pipe.models.generator
    settings = SearchSettings(max_new_tokens=16)
    tokens = stuffed_decode(gen, QUESTION, passages, settings)[0].tokens
    got = order_sensitivity(gen, QUESTION, passages, tokens, settings)  # one batch of 2K - 1 rows
    assert len(got) == 2 * len(passages) - 1
    for o in (got[0], got[-1]):  # reversed, and the last passage moved first
        ordered = [passages[i] for i in o.order]
        alone = stuffed_decode(gen, QUESTION, ordered, settings)[0]
        assert o.tokens == alone.tokens, (gen.decode(o.tokens), gen.decode(alone.tokens))
        assert torch.allclose(o.token_logp, alone.token_logp[0], atol=TOL)
        state = gen.prepare_rows([(QUESTION, Stuffed(tuple(ordered)))])
        forced = score_answers(gen, state, [tokens])[0][0, 0]  # (T,)
        assert o.logp_answer == pytest.approx(float(forced.double().sum()), abs=TOL * len(tokens))


def test_the_other_orders_read_in_several_batches_give_the_one_batch_readings(read, monkeypatch):
    """At a large K the 2K - 1 orders do not fit one batch (K = 20 took over 15 GB): read two rows a
    batch, every order's answer, its table and the retrieved answer's p are the one batch's."""
    pipe, passages = read
    gen = pipe.models.generator
    settings = SearchSettings(max_new_tokens=16)
    tokens = stuffed_decode(gen, QUESTION, passages, settings)[0].tokens
    whole = order_sensitivity(gen, QUESTION, passages, tokens, settings)
    monkeypatch.setattr(stuffed_module, "ORDER_READINGS", 2 * len(passages))
    prepared = []
    real_prepare = type(gen).prepare_rows
    monkeypatch.setattr(
        type(gen), "prepare_rows", lambda g, rows: prepared.append(len(rows)) or real_prepare(g, rows)
    )
    batched = order_sensitivity(gen, QUESTION, passages, tokens, settings)
    assert prepared == [2] * (len(whole) // 2) + [1] * (len(whole) % 2)  # two rows a batch
    assert [(o.kind, o.moved, o.order, o.tokens) for o in batched] == [
        (o.kind, o.moved, o.order, o.tokens) for o in whole
    ]
    for b, w in zip(batched, whole):
        assert torch.allclose(b.token_logp, w.token_logp, atol=TOL)
        assert b.logp_answer == pytest.approx(w.logp_answer, abs=TOL * len(tokens))


def test_a_stuffed_prompt_longer_than_the_model_reads_is_refused_not_cut(read):
    """100 passages make more tokens than SmolLM2's 8,192 positions (the tiny Llama has as many): a
    cut would drop the question at the end, so the generator refuses before any forward pass."""
    pipe, passages = read
    gen = pipe.models.generator
    calls = ForwardCounter.count
    with pytest.raises(ValueError, match="use a smaller K for the stuffed reading"):
        stuffed_decode(gen, QUESTION, passages * 20, SearchSettings())
    assert ForwardCounter.count == calls


def test_the_trace_carries_the_stuffed_reading_and_reads_it_back(read):
    pipe, _ = read
    # Two answer tokens: the tiny Llama's stuffed answer is then also a marginal's (its long answers
    # drift apart), so both ways of getting the one-passage rows are exercised below.
    trace = pipe.run(QUESTION, AnswerSettings(decode="all", max_new_tokens=2))
    assert trace.answer("rag-token") is not None
    assert trace.answer("rag-sequence") is not None
    best = trace.answer("stuffed")
    assert best.token_logp.shape[0] == 1  # one row: every passage at once
    assert trace.stuffed.leave_one_out.shape == (trace.k, len(best.token_ids))
    assert all(c.decoding != "stuffed" for c in trace.candidates)  # the marginals' tables stay (K, T)
    back = trace_from_dict(json.loads(json.dumps(trace_to_dict(trace))))
    assert back.answer("stuffed").answer == best.answer
    assert torch.equal(back.stuffed.leave_one_out, trace.stuffed.leave_one_out)
    only = pipe.run(QUESTION, AnswerSettings(decode="stuffed", max_new_tokens=2))
    assert not only.candidates  # stuffed alone: no marginal decoded
    assert only.answer("stuffed").token_ids == best.token_ids
    # the answer under each passage alone (the mixture's rows of the same answer): separate calls
    assert back.stuffed.alone.shape == (trace.k, len(best.token_ids))
    for z, hit in enumerate(trace.hits):
        gen = pipe.models.generator
        single = score_answers(gen, gen.prepare(QUESTION, [hit.passage]), [best.token_ids])[0][0, 0]  # (T,)
        assert torch.allclose(trace.stuffed.alone[z], single, atol=TOL), (z, trace.stuffed.alone[z], single)
    # added afterwards to a trace decoded without it (what a page asks for): the same reading
    later = pipe.with_stuffed(pipe.run(QUESTION, AnswerSettings(decode="both", max_new_tokens=2)))
    assert later.answer("stuffed").token_ids == best.token_ids
    assert torch.allclose(later.stuffed.leave_one_out, trace.stuffed.leave_one_out, atol=TOL)
    assert torch.allclose(later.stuffed.alone, trace.stuffed.alone, atol=TOL)
    assert [c.answer for c in later.candidates] == [c.answer for c in trace.candidates]
    assert pipe.with_stuffed(later) is later  # one reading is never computed twice
    # the rows come from the marginal's candidate of the same answer (no pass of their own), and
    # without one (a stuffed-only trace) from the K one-passage prompts: the same numbers either way
    assert any(later.stuffed.alone is c.token_logp for c in later.candidates)
    assert torch.allclose(only.stuffed.alone, trace.stuffed.alone, atol=TOL)


def test_the_confidence_rule_judges_the_stuffed_answer_by_its_one_row(read):
    """p is p(y|x, all passages) and support log p(y|x, all) − log p_closed(y|x): the stuffed
    answer's one row is never masked by the marginals' K passages."""
    pipe, _ = read
    trace = pipe.run(QUESTION, AnswerSettings(decode="stuffed"))
    best = trace.answer("stuffed")
    closed = pipe.closed_book_scores(QUESTION, [best.token_ids])[0]  # (T,)
    conf = candidate_confidence(trace, best, closed)
    assert conf.p == pytest.approx(float(best.token_logp.double().sum().exp()), rel=1e-9)
    whole, alone = best.token_logp.double().sum(), closed.double().sum()
    assert conf.support == pytest.approx(float(whole - alone), rel=1e-9)


@pytest.mark.slow  # over 5 s on 2 cores
def test_ask_decode_all_prints_the_stuffed_answer_and_what_each_passage_is_worth(tmp_path):
    out = run_cli("ask", QUESTION, "--decode", "all", "--json", "--csv", str(tmp_path / "t.csv"))
    assert out.returncode == 0, out.stderr
    ours = pd.read_csv(tmp_path / "t.csv")
    check_trace_invariants(ours)
    assert set(ours["decoding"]) == {"rag-token", "rag-sequence", "stuffed"}
    got = json.loads(out.stdout)
    stuffed = got["stuffed"]
    assert set(got["answers"]) == {"rag-token", "rag-sequence"}
    assert stuffed["answers"][0]["answer"]
    assert 0 < stuffed["answers"][0]["p"] <= 1
    rows = stuffed["leave_one_out"]
    assert [r["rank"] for r in rows] == [p["rank"] for p in got["passages"]]
    p = stuffed["answers"][0]["p"]
    for r in rows:  # worth is log p(y | all) − log p(y | all but z), as printed
        assert r["worth"] == pytest.approx(math.log(p) - math.log(r["p_without"]), abs=1e-6)
    assert stuffed["top_passage"] == max(rows, key=lambda r: r["worth"])["rank"]
    # the CSV's stuffed rows hold the same leave-one-out (the chosen answer's last step, per passage)
    chosen = ours[(ours["decoding"] == "stuffed") & (ours["candidate"] == 0)]
    last = chosen[chosen["step"] == chosen["step"].max()].sort_values("doc_rank")
    assert list(np.exp(last["logp_prefix_doc"])) == pytest.approx([r["p_without"] for r in rows], rel=1e-6)
    text = run_cli("ask", QUESTION, "--decode", "all")
    assert text.returncode == 0, text.stderr
    assert f"stuffed: {stuffed['answers'][0]['answer']}" in text.stdout
    assert "without #1" in text.stdout


def _position_app():
    import streamlit as st

    from app.ui import answer_card

    answer_card.position_note(st.session_state["trace"], "t")


@pytest.mark.parametrize("costly,said", [(0, "first"), (1, "last"), (None, None)])
def test_the_stuffed_card_says_when_it_leans_on_the_passage_it_reads_first_or_last(costly, said):
    """Leave-one-out says which passage the answer leans on; at the prompt's first or last place that
    may be position, and the card says so. (Of two passages, each is first or last; a third in the
    middle is neither.)"""
    trace = run_toy("obama").trace
    if costly is None:  # three passages, the middle one costly
        extra = Hit(dataclasses.replace(trace.hits[1].passage, id="z3"), 0.0, 3)
        trace = dataclasses.replace(
            trace, hits=[*trace.hits, extra], log_prior=torch.log(torch.tensor([0.5, 0.3, 0.2]))
        )
    seq = trace.answer("rag-sequence")
    t = seq.token_logp.shape[1]
    k = len(trace.hits)
    row = torch.full((1, t), math.log(0.9), dtype=torch.float64)  # (1, T) p(y_i | x, all)
    loo = torch.full((k, t), math.log(0.8), dtype=torch.float64)  # (K, T) each passage left out
    loo[1 if costly is None else costly] = math.log(0.1)  # the costly one
    stuffed = dataclasses.replace(seq, decoding="stuffed", token_logp=row)
    trace = dataclasses.replace(trace, stuffed=StuffedReading([stuffed], leave_one_out=loo))
    at = AppTest.from_function(_position_app, default_timeout=60)
    at.session_state["trace"] = trace
    at.run()
    assert not at.exception, [e.value for e in at.exception]
    notes = [c.value for c in at.caption if "may be the position" in c.value]
    rank = trace.hits[1 if costly is None else costly].rank
    assert notes == (
        []
        if said is None
        else [
            f"It leans most on passage #{rank}, which it reads {said}: "
            "that may be the position, not the passage."
        ]
    )
    assert bool(at.toggle) is (said is not None)  # the order-sensitivity figure, on demand
