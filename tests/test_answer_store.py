"""Answers kept on disk (`rag_core.loupe.answer_store`): a second door on the same store (a server
started again) reads back the answer, its stuffed reading and its closed-book rows, equal byte for
byte to what the first computed, without a model call; another setting, another passage text or
another engine version computes anew. On the tiny random DPR + BART stack."""

import dataclasses

import pytest
import torch
from test_batching import assert_same_frames
from test_door import QUESTION, settings, stack, tiny  # noqa: F401  (the door's tiny stack, as fixtures)

from rag_core import pipeline as pipeline_module
from rag_core.decoding import answering
from rag_core.loupe import answer_store
from rag_core.loupe.answer_store import AnswerStore
from rag_core.loupe.answers import Loupe
from rag_core.loupe.stack_holder import StackHolder
from rag_core.trace import Trace


@pytest.fixture
def doors(tiny, tmp_path):
    """Two doors on one store and one holder (the models loaded once): the second is the server
    started again."""
    store = AnswerStore(tmp_path / "answers")
    first = Loupe(StackHolder(), corpus=str(tiny["corpus"]), store=store)
    return first, Loupe(first.holder, corpus=str(tiny["corpus"]), store=store)


@pytest.fixture
def model_calls(monkeypatch):
    """How many times the generator decoded, read a stuffed prompt or scored a closed-book row."""
    calls = []
    for name in ("decode_queries", "stuffed_reading"):
        real = getattr(pipeline_module, name)
        monkeypatch.setattr(
            pipeline_module, name, lambda *a, _r=real, _n=name, **k: calls.append(_n) or _r(*a, **k)
        )
    real_closed = pipeline_module.Pipeline.closed_book_scores
    monkeypatch.setattr(
        pipeline_module.Pipeline,
        "closed_book_scores",
        lambda self, *a, **k: calls.append("closed") or real_closed(self, *a, **k),
    )
    return calls


def everything(door, stack, settings) -> tuple:
    """What the pages read of one answer: the trace, its stuffed reading and each answer's
    closed-book row, as exports and tensors."""
    result = door.answer(stack, QUESTION, settings)
    cand = result.trace.answer("rag-sequence")
    return (
        result.export("csv"),
        result.export("csv", stuffed=True),
        result.stuffed_answers().stuffed.candidates[0].answer,
        result.closed_row(cand),
    )


def test_a_door_started_again_reads_every_part_back_equal_and_asks_no_model(
    doors, stack, settings, model_calls
):
    first, again = doors
    computed = everything(first, stack, settings)
    assert sorted(set(model_calls)) == ["closed", "decode_queries", "stuffed_reading"]
    model_calls.clear()
    read = everything(again, stack, settings)
    assert model_calls == []
    assert read[:3] == computed[:3]  # the trace CSV with and without the stuffed reading, byte for byte
    assert read[3].dtype == computed[3].dtype
    assert torch.equal(read[3], computed[3])


def test_another_setting_or_passage_text_or_engine_version_is_computed_anew(
    doors, stack, settings, model_calls, monkeypatch
):
    first, again = doors
    first.answer(stack, QUESTION, settings)
    model_calls.clear()
    again.answer(stack, QUESTION, dataclasses.replace(settings, max_new_tokens=5))
    assert model_calls == ["decode_queries"]

    model_calls.clear()  # the same passage ids and scores, another text: the answer read another prompt
    real_query = pipeline_module.Pipeline.query

    def edited(self, *a, **k):
        query = real_query(self, *a, **k)
        hit = query.hits[0]
        passage = dataclasses.replace(hit.passage, text=hit.passage.text + " (edited)")
        return dataclasses.replace(query, hits=[dataclasses.replace(hit, passage=passage), *query.hits[1:]])

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(pipeline_module.Pipeline, "query", edited)
        third = Loupe(first.holder, corpus=first.corpus, store=first.store)
        trace = third.answer(stack, QUESTION, settings).trace
    assert model_calls == ["decode_queries"]
    assert trace.hits[0].passage.text.endswith(" (edited)")

    model_calls.clear()
    monkeypatch.setattr(answer_store, "engine_fingerprint", lambda: "another version")
    Loupe(first.holder, corpus=first.corpus, store=first.store).answer(stack, QUESTION, settings)
    assert model_calls == ["decode_queries"]


def test_a_damaged_entry_is_computed_again_and_written_over(doors, stack, settings, model_calls):
    first, again = doors
    computed = first.answer(stack, QUESTION, settings).export("csv")
    for entry in first.store.folder.glob("*.json"):
        entry.write_text("{ torn")
    model_calls.clear()
    assert again.answer(stack, QUESTION, settings).export("csv") == computed
    assert model_calls == ["decode_queries"]
    assert all(
        entry.read_text().startswith("{") and len(entry.read_text()) > 10
        for entry in first.store.folder.glob("*.json")
    )


def test_questions_answered_together_read_the_kept_ones_and_decode_the_rest(
    tiny, stack, settings, tmp_path, monkeypatch
):
    """A batch of waiting questions: the one the store holds is read back, the others decoded in
    one pass, each equal to its answer alone."""
    store = AnswerStore(tmp_path / "answers")
    alone = Loupe(StackHolder(), corpus=str(tiny["corpus"]), store=store)
    kept = alone.answer(stack, QUESTION, settings).export("csv")
    together = Loupe(alone.holder, corpus=str(tiny["corpus"]), batch_size=4, store=store)
    decoded = []
    real = answering.decode_queries
    monkeypatch.setattr(
        pipeline_module,
        "decode_queries",
        lambda gen, qs, *a, **k: decoded.append([q.question for q in qs]) or real(gen, qs, *a, **k),
    )
    others = ["Where was the author born?", "When was the novel written?"]
    traces = together._answer_together(
        (None, dataclasses.replace(settings)), [(stack, q) for q in [QUESTION, *others]]
    )
    assert decoded == [others]
    assert isinstance(traces[0], Trace) and together.result(stack, traces[0]).export("csv") == kept
    fresh = Loupe(StackHolder(), corpus=str(tiny["corpus"]))
    for question, trace in zip(others, traces[1:]):  # a batch equals one at a time to test_batching's TOL
        assert_same_frames(trace.to_frame(), fresh.answer(stack, question, settings).trace.to_frame())


def test_the_store_keeps_its_newest_entries_only(tmp_path, monkeypatch):
    monkeypatch.setitem(answer_store.caches.LIMITS, "answers", 3)
    monkeypatch.setattr(answer_store, "WRITES_PER_TRIM", 2)
    store = AnswerStore(tmp_path / "answers")
    keys = [store.key("stack", "trace", n=n) for n in range(6)]
    for n, key in enumerate(keys):
        store.put(key, {"n": n})
    assert len(list(store.folder.glob("*.json"))) <= 4  # trimmed to 3 at every second write
    assert store.get(keys[-1]) == {"n": 5}
    assert store.get(keys[0]) is None
