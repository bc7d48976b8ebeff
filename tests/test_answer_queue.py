"""The answer line (`rag_core.loupe.answer_queue`): first come first served, one waiting question
per session, one computation per key, a place and an estimate, cancel, a gone session's ticket
dropped, and a batch of waiting questions answered together; the door's batched answers equal its
answers one at a time (the tiny random DPR + BART stack). Work here is plain functions that wait
on events, so each test decides exactly when the worker is busy."""

import threading
import time

import pytest
from test_batching import assert_same_frames  # the batching oracle: float32 rounding, TOL

from rag_core.config import AnswerSettings, StackSpec
from rag_core.loupe.answer_queue import AnswerQueue, Cancelled
from rag_core.loupe.answers import Loupe
from rag_core.loupe.stack_holder import StackHolder
from rag_core.stacks import Stack
from rag_core.toys.tiny_models import build_tiny_stack


class Gate:
    """Work that blocks until released, so the worker is busy for exactly as long as a test says."""

    def __init__(self, value="gate"):
        self.value, self.started, self.open = value, threading.Event(), threading.Event()

    def __call__(self):
        self.started.set()
        assert self.open.wait(10)
        return self.value


def busy(line: AnswerQueue) -> Gate:
    """The worker held on a first ticket, so what is submitted next waits in line."""
    gate = Gate()
    line.submit("teacher", "first", gate)
    assert gate.started.wait(5)
    return gate


def done_in_order(tickets) -> list:
    order, lock = [], threading.Lock()

    def watch(ticket):
        ticket.wait(10)
        with lock:
            order.append(ticket.key)

    threads = [threading.Thread(target=watch, args=(t,)) for t in tickets]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return order


def test_questions_are_answered_in_the_order_they_were_asked_and_each_knows_its_place():
    line = AnswerQueue()
    gate = busy(line)
    answered = []
    tickets = [line.submit(f"s{i}", f"q{i}", lambda i=i: answered.append(i) or i) for i in range(4)]
    assert [line.place(t) for t in tickets] == [1, 2, 3, 4]
    assert [line.ahead(t) for t in tickets] == [1, 2, 3, 4]  # the running one, then those in front
    gate.open.set()
    assert all(t.wait(5) for t in tickets)
    assert answered == [0, 1, 2, 3]
    assert [t.result() for t in tickets] == [0, 1, 2, 3]
    assert [line.place(t) for t in tickets] == [0, 0, 0, 0]


def test_a_newer_question_of_a_session_replaces_its_waiting_one():
    line = AnswerQueue()
    gate = busy(line)
    old = line.submit("student", "old question", lambda: "old")
    other = line.submit("someone else", "their question", lambda: "theirs")
    new = line.submit("student", "new question", lambda: "new")
    assert old.done and isinstance(old.error, Cancelled)
    assert (line.place(other), line.place(new)) == (1, 2)  # the new one goes to the back
    gate.open.set()
    assert new.result() == "new" and other.result() == "theirs"


def test_two_sessions_asking_the_same_question_share_one_computation():
    line = AnswerQueue()
    gate = busy(line)
    calls = []
    a = line.submit("a", "same", lambda: calls.append(1) or "answer")
    b = line.submit("b", "same", lambda: calls.append(2) or "answer")
    assert a is b
    line.cancel(a, "a")  # one of them gives up: the other still gets it
    gate.open.set()
    assert b.result() == "answer" and calls == [1]


def test_cancel_takes_a_waiting_question_out_of_the_line():
    line = AnswerQueue()
    gate = busy(line)
    ran = []
    gone = line.submit("a", "q1", lambda: ran.append("q1"))
    kept = line.submit("b", "q2", lambda: ran.append("q2") or "q2")
    line.cancel(gone, "a")
    assert line.place(kept) == 1
    with pytest.raises(Cancelled):
        gone.result()
    gate.open.set()
    assert kept.result() == "q2" and ran == ["q2"]


def test_a_ticket_whose_sessions_have_all_gone_is_dropped_when_its_turn_comes():
    closed = set()
    line = AnswerQueue()
    gate = busy(line)
    ran = []

    def ask(session, key):
        work = lambda: ran.append(key) or key  # noqa: E731
        return line.submit(session, key, work, alive=lambda: session not in closed)

    shared = ask("closed tab", "q1")
    ask("open tab", "q1")  # the same question from a tab still open: one ticket, kept
    watched = ask("another open tab", "q2")
    lonely = ask("closed too", "q3")
    closed.update({"closed tab", "closed too"})
    gate.open.set()
    assert shared.result() == "q1" and watched.result() == "q2"
    assert isinstance(lonely.error, Cancelled)
    assert ran == ["q1", "q2"]


def test_the_estimate_counts_the_running_answer_and_each_one_ahead_from_measured_times():
    line = AnswerQueue()
    first = line.submit("a", "warm", lambda: time.sleep(0.3) or 1)
    assert line.estimate(first) is None or first.wait(5)  # no answer measured yet: no estimate
    first.wait(5)
    mean = line.mean_time()
    assert 0.3 <= mean < 1.0
    gate = busy(line)
    waiting = [line.submit(f"s{i}", f"q{i}", lambda: 0) for i in range(3)]
    estimates = [line.estimate(t) for t in waiting]
    # the gate has run for a moment: what is left of it, then one mean each for those ahead and itself
    for i, est in enumerate(estimates):
        assert (i + 1) * mean <= est <= (i + 2) * mean, (i, est, mean)
    gate.open.set()
    assert all(t.wait(5) for t in waiting)


def test_waiting_questions_of_one_group_are_answered_in_one_batch_in_line_order():
    batches = []

    def run_batch(group, items):
        batches.append((group, list(items)))
        return [f"{group}:{item}" for item in items]

    line = AnswerQueue(run_batch, batch_size=3)
    gate = busy(line)
    tickets = [
        line.submit("s1", "k1", lambda: "alone", group="g", item="a"),
        line.submit("s2", "k2", lambda: "alone", group="other", item="b"),
        line.submit("s3", "k3", lambda: "alone", group="g", item="c"),
        line.submit("s4", "k4", lambda: "alone", group="g", item="d"),
        line.submit("s5", "k5", lambda: "alone", group="g", item="e"),
    ]
    gate.open.set()
    assert all(t.wait(5) for t in tickets)
    assert batches[0] == ("g", ["a", "c", "d"])  # the head's group, at most 3, in line order
    assert [t.result() for t in tickets] == ["g:a", "alone", "g:c", "g:d", "alone"]


def test_a_failed_batch_answers_each_question_alone_so_one_error_stays_its_own():
    def run_batch(group, items):
        raise ValueError("one of them is bad")

    def alone(item):
        if item == "bad":
            raise ValueError("this question is bad")
        return item

    line = AnswerQueue(run_batch, batch_size=4)
    gate = busy(line)
    tickets = [
        line.submit(f"s{i}", i, lambda x=x: alone(x), group="g", item=x)
        for i, x in enumerate("a bad c".split())
    ]
    gate.open.set()
    assert all(t.wait(5) for t in tickets)
    assert tickets[0].result() == "a" and tickets[2].result() == "c"
    with pytest.raises(ValueError, match="this question is bad"):
        tickets[1].result()


def test_the_head_of_an_idle_line_has_nobody_ahead_before_the_worker_takes_it():
    line = AnswerQueue()
    line._start_worker = lambda: None  # the worker not started: the moment right after a submit
    ticket = line.submit("alone", "q", lambda: 1)
    assert (line.place(ticket), line.ahead(ticket)) == (1, 0)


def test_a_failing_question_does_not_stop_the_line():
    line = AnswerQueue()
    bad = line.submit("a", "bad", lambda: 1 / 0)
    good = line.submit("b", "good", lambda: "fine")
    assert good.result() == "fine"
    with pytest.raises(ZeroDivisionError):
        bad.result()


# --- the door's line on a real (tiny) stack --------------------------------------------------------


@pytest.fixture(scope="module")
def tiny(tmp_path_factory):
    return build_tiny_stack(tmp_path_factory.mktemp("tiny"))


QUESTIONS = ["Who wrote the novel?", "Where is the harbour?", "When was the bridge built?", "Who won?"]


def test_the_doors_batched_answers_equal_its_answers_one_at_a_time(tiny, cache):
    cfg = StackSpec(
        question_encoder=str(tiny["dpr_q"]), ctx_encoder=str(tiny["dpr_ctx"]), generator=str(tiny["bart"])
    )
    stack = Stack("cli", "tiny", cfg, "cli")
    settings = AnswerSettings(index=str(tiny["corpus"]), k=3, max_new_tokens=6, decode="all")
    alone = Loupe(StackHolder(), corpus=str(tiny["corpus"]))
    together = Loupe(alone.holder, corpus=str(tiny["corpus"]), batch_size=4)
    batches = []
    run_batch = together.line.run_batch
    together.line.run_batch = lambda group, items: batches.append(len(items)) or run_batch(group, items)
    gate = Gate()
    together.line.submit("teacher", "first", gate)  # the line busy, so the four wait together
    assert gate.started.wait(5)
    tickets = [together.ask(f"s{i}", stack, q, settings) for i, q in enumerate(QUESTIONS)]
    gate.open.set()
    batched = [t.result() for t in tickets]
    assert batches == [4]
    for question, trace in zip(QUESTIONS, batched):
        one = alone.answer(stack, question, settings).trace
        assert_same_frames(trace.to_frame(), one.to_frame())
    # asked again, the batched answers are the door's own: no new ticket waits
    again = together.ask("s9", stack, QUESTIONS[2], settings)
    assert again.done and again.result() is batched[2]
