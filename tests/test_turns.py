"""The models' lock (`rag_core.models.turns.TurnLock`) hands itself over in the order it was asked
for: a background job that releases it and asks again waits behind a question already waiting, so
jobs and questions alternate batch by batch; it is reentrant for its holder."""

import threading
import time

import pytest

from rag_core.models.turns import TurnLock
from rag_core.pipeline import Models


def waiting(lock: TurnLock, n: int) -> None:
    end = time.monotonic() + 5
    while len(lock._line) < n:
        assert time.monotonic() < end, "the other thread never asked for the lock"
        time.sleep(0.01)


def test_a_job_that_asks_again_waits_behind_the_question_already_waiting():
    lock, order = TurnLock(), []

    def question():
        with lock:
            order.append("question")

    lock.acquire()  # a job's batch
    asker = threading.Thread(target=question)
    asker.start()
    waiting(lock, 1)
    lock.release()  # the batch ends, and the job asks for its next one at once
    with lock:
        order.append("job's next batch")
    asker.join(5)
    assert order == ["question", "job's next batch"]


def test_waiters_go_in_the_order_they_came():
    lock, order = TurnLock(), []
    lock.acquire()
    threads = []
    for i in range(4):
        t = threading.Thread(target=lambda i=i: (lock.acquire(), order.append(i), lock.release()))
        t.start()
        waiting(lock, i + 1)
        threads.append(t)
    lock.release()
    for t in threads:
        t.join(5)
    assert order == [0, 1, 2, 3]


def test_the_holder_may_take_it_again_and_others_wait_for_the_last_release():
    lock, got = TurnLock(), threading.Event()
    with lock:
        with lock:
            other = threading.Thread(target=lambda: (lock.acquire(), got.set(), lock.release()))
            other.start()
            waiting(lock, 1)
        assert not got.wait(0.2)  # released once of twice: still held
    assert got.wait(5)
    other.join(5)


def test_a_timed_out_waiter_leaves_the_line():
    lock = TurnLock()
    lock.acquire()
    result = []
    t = threading.Thread(target=lambda: result.append(lock.acquire(timeout=0.1)))
    t.start()
    t.join(5)
    assert result == [False] and not lock._line
    lock.release()
    assert lock.acquire(blocking=False)
    lock.release()
    with pytest.raises(RuntimeError):
        lock.release()


def test_the_models_lock_takes_turns():
    assert isinstance(Models(encoder=None, generator=None, device=None).lock, TurnLock)
