"""Exercises: the shipped sheets load, a bad sheet says what is wrong and loses nothing else, grading
and the class's counts, and every shipped exercise's revealed figure equals a computation made
another way: the toys from their tables by hand, the live ones with numpy from a trace a pipeline
computes itself (not through the door), the query step by one gradient step taken by hand over the
whole index, the index swap by answering on each year's index. The live ones run on the default
retriever and indexes with the tiny Llama as generator: a figure and its recomputation agree for any
model, and the trained one costs a hundred times more."""

import math

import numpy as np
import pytest
import torch

from rag_core import stacks
from rag_core.analysis.matching import normalize_answer
from rag_core.config import RAG_SEQUENCE, RAG_TOKEN, AnswerSettings
from rag_core.decoding.decode import score_answers
from rag_core.exercises import figures, sheets
from rag_core.exercises.grading import ClassTally, grade
from rag_core.index_swap.judge import judge
from rag_core.loupe import exercises as ex
from rag_core.loupe.answers import Loupe
from rag_core.loupe.stack_holder import StackHolder
from rag_core.pipeline import Pipeline
from rag_core.retrieval.catalog import resolve_index
from rag_core.toys.examples import load_spec
from rag_core.training.query_walk import DEFAULT_STEP_SIZE

SHIPPED = sheets.load_exercises()
GOOD = """
[[exercise]]
id = "a"
page = "By hand"
title = "A"
prompt = "What prior?"
ask = "number"
tolerance = 0.05
figure = "toy_prior"
toy = "softmax"
passage = 1
explain = "Because."
"""


def test_the_shipped_sheets_load_whole_and_reach_across_the_pages():
    assert SHIPPED.problems == []
    items = SHIPPED.exercises
    assert len(items) >= 12
    assert len({e.id for e in items}) == len(items)
    assert len({e.page for e in items}) >= 5
    assert {e.ask for e in items} == {"number", "choice", "reason"}
    assert set(figures.FIGURES) == {e.figure for e in items}  # every figure is used by some exercise


@pytest.mark.parametrize(
    "change, says",
    [
        (("[[exercise]]", "[[exercise]"), "not valid TOML"),
        (('figure = "toy_prior"', 'figure = "toy_priors"'), "unknown figure 'toy_priors'"),
        (('title = "A"\n', ""), "it needs 'title'"),
        (("tolerance = 0.05\n", ""), "needs a 'tolerance'"),
        (('ask = "number"', 'ask = "choice"'), "is a number: ask for a number or a reason"),
        (('page = "By hand"', 'page = "Bye hand"'), "unknown page 'Bye hand'"),
        (("passage = 1", "passage = 1\npasage = 2"), "unknown keys ['pasage']"),
        (("passage = 1", 'passage = "one"'), "'passage' must be a int"),
        (("passage = 1", "passage = 0"), "'passage' counts from 1"),
    ],
)
def test_a_bad_exercise_is_left_out_with_one_message_and_the_rest_load(change, says):
    bad = GOOD.replace(*change)
    assert bad != GOOD
    loaded = sheets.parse_sheet(bad + GOOD.replace('id = "a"', 'id = "b"'), "mine.toml")
    assert len(loaded.problems) == 1 and says in loaded.problems[0], loaded.problems
    assert loaded.problems[0].startswith("mine.toml")
    if "TOML" not in says:  # a sheet that does not parse has no exercise to keep
        assert [e.id for e in loaded.exercises] == ["b"]


def test_an_id_used_twice_across_sheets_is_said_and_the_first_kept(tmp_path):
    (tmp_path / "1.toml").write_text(GOOD)
    (tmp_path / "2.toml").write_text(GOOD.replace('title = "A"', 'title = "Again"'))
    (tmp_path / "3.toml").write_bytes(b"\xff\xfe not text")
    loaded = sheets.load_exercises(sorted(tmp_path.glob("*.toml")))
    assert [e.title for e in loaded.exercises] == ["A"]
    assert any("2.toml: the id 'a' is used twice" in p for p in loaded.problems)
    assert any(p.startswith("3.toml: cannot be read") for p in loaded.problems)


def test_grading_and_the_class_counts():
    shown = figures.Reveal(0.55, "0.55")
    assert grade("number", 0.52, shown, 0.03) is True
    assert grade("number", 0.51, shown, 0.03) is False
    assert grade("choice", "2. Mona Lisa", figures.Reveal("2. Mona Lisa", "")) is True
    assert grade("choice", "1. Louvre", figures.Reveal("2. Mona Lisa", "")) is False
    assert grade("reason", "any words", None) is None
    tally = ClassTally()
    for right in (True, True, False, None):
        tally.record("x", right)
    assert tally.counts() == {"x": {"right": 2, "wrong": 1, "reasoned": 1}}


# --- toys: from their tables by hand ----------------------------------------------------------------


def _toy_by_hand(e: sheets.Exercise) -> float | str:
    spec, p = load_spec(e.params["toy"]), e.params
    if "query_vector" in spec:
        scores = [sum(a * b for a, b in zip(spec["query_vector"], d["vector"])) for d in spec["passages"]]
        prior = [math.exp(spec.get("scale", 1.0) * s) for s in scores]
    else:
        prior = [d["prior"] for d in spec["passages"]]
    prior = [x / sum(prior) for x in prior]
    if e.figure == "toy_prior":
        return prior[p["passage"] - 1]
    tables = [spec["tables"][d["id"]] for d in spec["passages"]]

    def step_probs(words: list[str]) -> list[list[float]]:  # [z][i] p(word_i | x, z, words before)
        return [[t.get(" ".join(words[:i]), {}).get(w, 0.0) for i, w in enumerate(words)] for t in tables]

    def p_seq(words):
        return sum(pz * math.prod(row) for pz, row in zip(prior, step_probs(words)))

    def p_tok(words):
        rows = step_probs(words)
        return math.prod(sum(pz * rows[z][i] for z, pz in enumerate(prior)) for i in range(len(words)))

    words = p["candidate"].split()
    if e.figure == "toy_posterior":
        return prior[p["passage"] - 1] * math.prod(step_probs(words)[p["passage"] - 1]) / p_seq(words)
    if e.figure == "toy_p":
        return (p_tok if p.get("decoding") == RAG_TOKEN else p_seq)(words)
    cands = [c.split() for c in spec["candidates"]]
    best = {name: " ".join(max(cands, key=f)) for name, f in (("RAG-Token", p_tok), ("RAG-Sequence", p_seq))}
    firsts = [name for name, answer in best.items() if answer == p["candidate"]]
    return "both" if len(firsts) == 2 else firsts[0] if firsts else "neither"


TOYS = [e for e in SHIPPED.exercises if not e.live]


@pytest.mark.parametrize("item", TOYS, ids=[e.id for e in TOYS])
def test_each_toy_exercise_reveals_what_its_tables_give_by_hand(item):
    shown = ex.reveal(item, None)
    expected = _toy_by_hand(item)
    if isinstance(expected, str):
        assert shown.value == expected and expected in shown.options
    else:
        assert shown.value == pytest.approx(expected, rel=1e-9)


# --- live: the default retriever with the tiny Llama, computed again without the door --------------


@pytest.fixture(scope="module")
def engine(tiny_llama_pipeline):
    """The door's engine on the tiny Llama's stack, as the command line would name it."""
    holder = StackHolder(load=lambda spec, progress=None: tiny_llama_pipeline.models)
    stack = stacks.cli_stack(tiny_llama_pipeline.stack)
    return ex.LoupeEngine(Loupe(holder), stack, AnswerSettings(index="2018"))


def _pipeline_on(pipe: Pipeline, name: str) -> Pipeline:
    enc = pipe.models.encoder
    return Pipeline(pipe.models, name, resolve_index(name, enc)[1], pipe.settings, pipe.stack)


def _prior(trace) -> np.ndarray:
    s = trace.scale * np.array([h.score for h in trace.hits], dtype=np.float64)  # (K,)
    return np.exp(s - s.max()) / np.exp(s - s.max()).sum()  # (K,)


def _rows(cand) -> np.ndarray:
    return np.exp(cand.token_logp.double().numpy().sum(axis=1))  # (K,) p(y|x,z)


def _titles(trace) -> list[str]:
    return [f"{h.rank}. {h.passage.title}" for h in trace.hits]


def _text_rows(pipe: Pipeline, trace, text: str) -> np.ndarray:
    """p(y|x,z) of an answer read back from its text, as the walk takes it (a random model's
    tokens need not be the ones its text encodes to). (K,)"""
    gen = pipe.models.generator
    state = gen.prepare(trace.question, [h.passage for h in trace.hits])
    logp = score_answers(gen, state, [gen.encode_answer(" ".join(text.split()))])[0][0]  # (K, T)
    return np.exp(logp.double().numpy().sum(axis=1))  # (K,)


def _one_step_gain(pipe: Pipeline, trace, rows: np.ndarray) -> int:
    """One step q ← normalise(q + η · scale · Σ_z (post − prior) d(z)) searched over every passage
    of the index by brute force; the start passage whose prior rises most."""
    vectors = pipe.index.index.reconstruct_n(0, pipe.index.index.ntotal).astype(np.float64)  # (N, D)
    q = pipe.query_vector(trace.question)[0].astype(np.float64)  # (D,)
    top = np.argsort(-(vectors @ q))[: trace.k]  # (K,)
    prior = _prior(trace)
    post = prior * rows / (prior * rows).sum()  # (K,)
    q1 = q + DEFAULT_STEP_SIZE * trace.scale * ((post - prior)[:, None] * vectors[top]).sum(axis=0)  # (D,)
    q1 /= np.linalg.norm(q1)
    s1 = vectors @ q1  # (N,)
    top1 = np.argsort(-s1)[: trace.k]
    e = np.exp(trace.scale * (s1[top1] - s1[top1].max()))
    after = dict(zip(top1.tolist(), (e / e.sum()).tolist()))
    return int(np.argmax([after.get(int(r), 0.0) - p for r, p in zip(top, prior)]))


def _live_by_hand(item: sheets.Exercise, on: Pipeline):
    p = item.params
    pipe = _pipeline_on(on, p.get("index", "2018"))
    trace = pipe.run(p["question"])
    seq = trace.answer(p.get("decoding", RAG_SEQUENCE))
    prior, z = _prior(trace), p.get("passage", 1) - 1
    if item.figure == "prior":
        return prior[z]
    if item.figure == "posterior":
        return (prior * _rows(seq) / (prior * _rows(seq)).sum())[z]
    if item.figure == "answer_p":
        return (prior * _rows(seq)).sum()
    if item.figure == "p_without":
        kept = np.where(np.arange(trace.k) == z, 0.0, prior)
        return (kept / kept.sum() * _rows(seq)).sum()
    if item.figure == "closed_book_agrees":
        same = normalize_answer(pipe.closed_book(trace.question)) == normalize_answer(seq.answer)
        return figures.SAME[0 if same else 1]
    if item.figure == "swap_follows":
        h16, h18 = figures.holders(p["question"])
        a16 = _pipeline_on(on, "2016").run(p["question"]).answer(RAG_SEQUENCE).answer
        a18 = _pipeline_on(on, "2018").run(p["question"]).answer(RAG_SEQUENCE).answer
        return figures.FOLLOWS[0 if judge(a16, h16, h18)[0] and judge(a18, h16, h18)[1] else 1]
    if item.figure == "query_step":
        return _titles(trace)[_one_step_gain(pipe, trace, _text_rows(pipe, trace, seq.answer))]
    if item.figure == "readings_agree":  # answers alone: what each passage is worth is not read
        other = pipe.with_stuffed(trace, explain=False).answer(p.get("reading", RAG_TOKEN)).answer
        return figures.SAME[0 if normalize_answer(other) == normalize_answer(seq.answer) else 1]
    stuffed = pipe.with_stuffed(trace)
    if item.figure == "stuffed_leans":  # the exact leave-one-out: log p(y|x, all) − log p(y|x, all but z)
        whole = float(stuffed.stuffed.candidates[0].token_logp[0].double().sum())
        worth = [whole - float(row.double().sum()) for row in stuffed.stuffed.leave_one_out]  # (K,)
        return _titles(trace)[int(np.argmax(worth))]
    raise AssertionError(f"no recomputation for the figure {item.figure!r}: add one here")


LIVE = [e for e in SHIPPED.exercises if e.live]


@pytest.mark.parametrize("item", LIVE, ids=[e.id for e in LIVE])
def test_each_live_exercise_reveals_what_the_engine_computes_another_way(item, engine, tiny_llama_pipeline):
    torch.manual_seed(0)
    shown = ex.reveal(item, engine)
    expected = _live_by_hand(item, tiny_llama_pipeline)
    if isinstance(expected, str):
        assert shown.value == expected
        assert set(ex.options(item, engine)) >= {expected}  # the options offered hold the answer
    else:
        assert shown.value == pytest.approx(float(expected), rel=1e-6, abs=1e-9)
