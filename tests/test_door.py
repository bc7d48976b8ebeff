"""The engine's door (`rag_core.loupe`): an answer through it equals the pipeline's own, each part of
a Result is computed once, the question is cleaned once and its settings never built again, the held stack is
one, and what an index held is forgotten with it. On the tiny random DPR + BART stack."""

import json
import threading
import time
import weakref

import pytest
import torch

from rag_core import pipeline as pipeline_module
from rag_core.config import AnswerSettings, StackSpec
from rag_core.exports import frame_bytes
from rag_core.loupe.answers import Loupe
from rag_core.loupe.memo import Memo
from rag_core.loupe.stack_holder import StackHolder
from rag_core.otlp import trace_otlp
from rag_core.pipeline import QuestionError, load_pipeline
from rag_core.stacks import Stack
from rag_core.toys.tiny_models import build_tiny_stack

QUESTION = "Who wrote the novel?"


@pytest.fixture(scope="module")
def tiny(tmp_path_factory):
    return build_tiny_stack(tmp_path_factory.mktemp("tiny"))


@pytest.fixture
def stack(tiny, cache):
    spec = StackSpec(
        question_encoder=str(tiny["dpr_q"]), ctx_encoder=str(tiny["dpr_ctx"]), generator=str(tiny["bart"])
    )
    return Stack("cli", "tiny", spec, "cli")


@pytest.fixture
def settings(tiny):
    return AnswerSettings(index=str(tiny["corpus"]), k=3, max_new_tokens=6)


@pytest.fixture
def door(tiny):
    return Loupe(StackHolder(), corpus=str(tiny["corpus"]))


def reference(stack, settings):
    """The same question through a pipeline loaded on its own (the CLI's path), not the door."""
    asked = AnswerSettings(k=settings.k, max_new_tokens=settings.max_new_tokens)
    return load_pipeline(stack.spec, asked, corpus=settings.index)


RANDOM = ("traceId", "spanId", "parentSpanId", "startTimeUnixNano", "endTimeUnixNano")


def without_ids(otlp: str):
    """OTLP JSON without what differs between two exports of the same trace: span ids and times."""

    def strip(node):
        if isinstance(node, dict):
            return {k: strip(v) for k, v in node.items() if k not in RANDOM}
        return [strip(v) for v in node] if isinstance(node, list) else node

    return strip(json.loads(otlp))


def test_an_answer_through_the_door_equals_the_pipelines_own_byte_for_byte(door, stack, settings):
    result = door.answer(stack, QUESTION, settings)
    pipe = reference(stack, settings)
    trace = pipe.run(QUESTION)
    assert result.export("csv") == frame_bytes(trace.to_frame(), "csv", "trace")
    assert without_ids(result.export("otlp")) == without_ids(trace_otlp(trace))
    stuffed = pipe.with_stuffed(trace)
    assert result.export("csv", stuffed=True) == frame_bytes(stuffed.to_frame(), "csv", "trace")
    assert result.with_stuffed().stuffed.candidates[0].answer == stuffed.stuffed.candidates[0].answer


def test_one_question_is_cleaned_once_and_its_settings_never_built_again(door, stack, settings, monkeypatch):
    door.models(stack)  # count the question alone, not the load
    door.index_for(door.models(stack).encoder, settings.index)
    cleaned, built = [], []
    real_clean, real_init = pipeline_module.clean_question, AnswerSettings.__init__
    monkeypatch.setattr(pipeline_module, "clean_question", lambda q: cleaned.append(q) or real_clean(q))

    def counted_init(self, *args, **kwargs):
        built.append(1)
        real_init(self, *args, **kwargs)

    monkeypatch.setattr(AnswerSettings, "__init__", counted_init)
    result = door.answer(stack, QUESTION, settings)
    result.with_stuffed()  # a follow-up runs under the very settings the answer was made with
    assert (len(cleaned), len(built)) == (1, 0)  # the settings the caller built are the ones used
    door.answer(stack, QUESTION, settings)  # asked again: from the door's memory
    assert (len(cleaned), len(built)) == (1, 0)


def test_each_part_of_a_result_is_computed_once(door, stack, settings, monkeypatch):
    result = door.answer(stack, QUESTION, settings)
    calls = {"with_stuffed": 0, "closed_book_scores": 0, "run": 0}
    for name in calls:
        real = getattr(pipeline_module.Pipeline, name)

        def counted(self, *args, _real=real, _name=name, **kwargs):
            calls[_name] += 1
            return _real(self, *args, **kwargs)

        monkeypatch.setattr(pipeline_module.Pipeline, name, counted)
    for _ in range(3):
        again = door.answer(stack, QUESTION, settings)
        assert again is result  # one Result per trace: what it computed is kept
        trace = result.with_stuffed()
        for cand in trace.candidates:
            result.confidence(cand)
        result.token_sources("rag-token")
        result.export("csv", stuffed=True)
    assert calls == {"with_stuffed": 1, "closed_book_scores": 1, "run": 0}


def test_the_rule_reads_the_stuffed_answers_alone_and_the_worth_is_made_only_when_drawn(
    door, stack, settings, tiny, monkeypatch
):
    """A card's badge compares the stuffed reading's answer, not what each passage is worth: a page
    that draws cards alone (Index swap) makes no leave-one-out. The badges equal those judged after
    the full reading, whose answers are the same numbers, and once that is made the rule reads it."""
    made = []  # one entry per stuffed reading computed: whether it explained the answer
    real = pipeline_module.Pipeline.with_stuffed
    monkeypatch.setattr(
        pipeline_module.Pipeline,
        "with_stuffed",
        lambda self, trace, explain=True: made.append(explain) or real(self, trace, explain),
    )
    result = door.answer(stack, QUESTION, settings)
    best = [c for c in result.trace.candidates if c.rank == 0]
    badges = [result.confidence(c) for c in best]
    assert made == [False]
    alone = result.stuffed_answers()
    assert alone.stuffed.leave_one_out is None and alone.answer("stuffed") is not None
    full = result.with_stuffed()
    assert made == [False, True] and full.stuffed.leave_one_out is not None
    assert result.stuffed_answers() is full
    ours, theirs = alone.answer("stuffed"), full.answer("stuffed")
    assert ours.token_ids == theirs.token_ids and torch.equal(ours.token_logp, theirs.token_logp)
    # another server that draws the full reading first judges every card the same
    other = Loupe(StackHolder(), corpus=str(tiny["corpus"]))
    first_full = other.answer(stack, QUESTION, settings)
    first_full.with_stuffed()
    assert [first_full.confidence(c) for c in best] == badges
    assert made == [False, True, True]


def test_a_user_error_is_one_message_kept_like_a_value(door, stack, settings, monkeypatch):
    with pytest.raises(QuestionError, match="empty"):
        door.answer(stack, "   ", settings)
    monkeypatch.setattr(pipeline_module.Pipeline, "query", lambda *a, **k: pytest.fail("computed again"))
    with pytest.raises(QuestionError, match="empty"):
        door.answer(stack, "   ", settings)


def test_two_sessions_asking_at_once_get_one_computation():
    memo, started = Memo(4), []

    def slow():
        started.append(1)
        time.sleep(0.2)
        return object()

    got = []
    threads = [threading.Thread(target=lambda: got.append(memo.get("q", slow))) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(started) == 1 and len({id(g) for g in got}) == 1


def test_the_holder_keeps_one_stack_and_frees_the_other(door, stack, tiny):
    first = weakref.ref(door.models(stack))
    other = Stack("other", "tiny, another generator id", stack.spec.with_(generator=str(tiny["bart"]) + "/"))
    door.models(other)
    assert door.holder.holds(other) and not door.holder.holds(stack)
    assert first() is None  # the first stack's models were let go before the second loaded


def test_forgetting_an_index_forgets_what_was_read_from_it(door, stack, settings, monkeypatch):
    result = door.answer(stack, QUESTION, settings)
    door.forget_index(settings.index)
    runs = []
    real = pipeline_module.Pipeline.decode
    monkeypatch.setattr(
        pipeline_module.Pipeline, "decode", lambda self, *a, **k: runs.append(1) or real(self, *a, **k)
    )
    again = door.answer(stack, QUESTION, settings)
    assert runs == [1]
    assert again is not result
