"""One line for the models: every session's questions answered in the order they were asked.

A server's sessions share one stack, which answers one question (or one batch) at a time. Sessions
that simply waited on the models' lock would be woken in no particular order, and none could say
where it stands. Here each question is a `Ticket` in one first-come-first-served line, worked by one
thread:
- a session has at most one waiting ticket: asking a new question replaces its waiting one;
- tickets for the same key share one computation (two sessions asking the same question at once);
- a waiting ticket knows its place and an estimate from the recent answers' times;
- a waiting ticket can be cancelled, and one whose sessions have all gone (each session's `alive()`
  says false: its tab was closed) is dropped when its turn comes;
- with `batch_size` > 1, the waiting tickets that share the head's `group` (same stack and
  settings) are answered together by `run_batch`, each value equal to one computed alone.

>>> line = AnswerQueue()
>>> ticket = line.submit("session-1", "question", lambda: 42)
>>> ticket.wait(5), ticket.value
(True, 42)
"""

from __future__ import annotations

import threading
import time
from collections import deque
from collections.abc import Callable, Hashable
from typing import Any

RECENT = 12  # answers whose times make the estimate: enough to smooth one slow question out


class Cancelled(Exception):
    """The ticket was cancelled, or dropped because its session stopped looking at it."""


class Ticket:
    """One question in the line. `value` once `done`, or `error` (raised again by `result()`)."""

    def __init__(self, key: Hashable, work: Callable[[], Any], group: Hashable | None, item: Any) -> None:
        self.key, self.work, self.group, self.item = key, work, group, item
        self.sessions: dict[str, Callable[[], bool]] = {}  # who waits for it, and whether they still do
        self.asked = time.monotonic()
        self.started: float | None = None
        self.value: Any = None
        self.error: BaseException | None = None
        self._done = threading.Event()

    @property
    def done(self) -> bool:
        return self._done.is_set()

    @property
    def running(self) -> bool:
        return self.started is not None and not self.done

    def wait(self, timeout: float | None = None) -> bool:
        """Block until the ticket is done (True) or `timeout` seconds pass (False)."""
        return self._done.wait(timeout)

    def result(self) -> Any:
        """The value, once done (waiting for it); the work's exception raised again."""
        self._done.wait()
        if self.error is not None:
            raise self.error
        return self.value

    def _finish(self, value: Any = None, error: BaseException | None = None) -> None:
        self.value, self.error = value, error
        self._done.set()


def answered(key: Hashable, work: Callable[[], Any]) -> Ticket:
    """A ticket answered at once, in the caller's thread, outside the line (`work` is quick: the
    answer is already known)."""
    ticket = Ticket(key, work, None, None)
    AnswerQueue._answer(ticket)
    return ticket


class AnswerQueue:
    """The line. `run_batch(group, items) -> values` answers several waiting tickets of one group at
    once (used when `batch_size`, a number or a function giving one, is above 1); each ticket's own
    `work()` answers it alone."""

    def __init__(
        self,
        run_batch: Callable[[Hashable, list], list] | None = None,
        batch_size: int | Callable[[], int] = 1,
    ) -> None:
        self.run_batch, self.batch_size = run_batch, batch_size
        self._waiting: list[Ticket] = []  # in the order asked
        self._running: list[Ticket] = []
        self._times: deque[float] = deque(maxlen=RECENT)  # seconds per answered ticket
        self._cond = threading.Condition()
        self._worker: threading.Thread | None = None

    # --- what a session does ---------------------------------------------------------------------

    def submit(
        self,
        session: str,
        key: Hashable,
        work: Callable[[], Any],
        group: Hashable | None = None,
        item: Any = None,
        alive: Callable[[], bool] = lambda: True,
    ) -> Ticket:
        """Put `key` in line for `session` (or join the ticket already waiting or running for it);
        the session's other waiting ticket, if any, leaves the line. `alive()`: whether the session
        is still there (a browser tab still open) when the ticket's turn comes."""
        with self._cond:
            for ticket in list(self._waiting):
                if ticket.key != key and session in ticket.sessions:
                    self._leave(ticket, session)
            ticket = next((t for t in (*self._running, *self._waiting) if t.key == key), None)
            if ticket is None:
                ticket = Ticket(key, work, group, item)
                self._waiting.append(ticket)
            ticket.sessions[session] = alive
            self._start_worker()
            self._cond.notify()
            return ticket

    def cancel(self, ticket: Ticket, session: str) -> None:
        """`session` no longer waits for `ticket`; a waiting ticket nobody else waits for leaves the
        line and is finished as cancelled. A running one runs to its end (its answer is kept)."""
        with self._cond:
            if ticket in self._waiting:
                self._leave(ticket, session)

    def place(self, ticket: Ticket) -> int:
        """0 while it is being answered (or done), else its place in line: 1 is next."""
        with self._cond:
            return self._waiting.index(ticket) + 1 if ticket in self._waiting else 0

    def ahead(self, ticket: Ticket) -> int:
        """How many tickets will be answered before `ticket`: those running and those waiting in
        front of it. 0 for the head of an idle line (the worker is about to take it): its session
        waits for the answer itself rather than showing a place."""
        with self._cond:
            if ticket not in self._waiting:
                return 0
            return len(self._running) + self._waiting.index(ticket)

    def estimate(self, ticket: Ticket) -> float | None:
        """Seconds until `ticket` is answered, from the recent answers' mean time: what is left of
        the running work, then one mean per ticket ahead and its own. None before any answer."""
        with self._cond:
            if not self._times or ticket.done:
                return None if not ticket.done else 0.0
            mean = sum(self._times) / len(self._times)
            now = time.monotonic()
            running = sum(max(mean - (now - t.started), 0.0) for t in self._running if t.started)
            if ticket in self._running:
                return running
            ahead = self._waiting.index(ticket) if ticket in self._waiting else 0
            return running + (ahead + 1) * mean

    def mean_time(self) -> float | None:
        """The recent answers' mean time in seconds (None before the first)."""
        with self._cond:
            return sum(self._times) / len(self._times) if self._times else None

    def __len__(self) -> int:
        with self._cond:
            return len(self._waiting) + len(self._running)

    # --- the worker ------------------------------------------------------------------------------

    def _leave(self, ticket: Ticket, session: str) -> None:
        ticket.sessions.pop(session, None)
        if not ticket.sessions:
            self._waiting.remove(ticket)
            ticket._finish(error=Cancelled("cancelled"))

    def _start_worker(self) -> None:
        if self._worker is None or not self._worker.is_alive():
            self._worker = threading.Thread(target=self._work, name="answer-queue", daemon=True)
            self._worker.start()

    def _next(self) -> list[Ticket]:
        """The head of the line and, when batching, the waiting tickets of its group behind it;
        tickets whose sessions have all gone are dropped first. Called under the condition."""
        now = time.monotonic()
        for ticket in [t for t in self._waiting if not any(alive() for alive in t.sessions.values())]:
            self._waiting.remove(ticket)
            ticket._finish(error=Cancelled("nobody was waiting for it any more"))
        if not self._waiting:
            return []
        head = self._waiting[0]
        batch = [head]
        size = self.batch_size() if callable(self.batch_size) else self.batch_size
        if size > 1 and self.run_batch is not None and head.group is not None:
            same = [t for t in self._waiting[1:] if t.group == head.group]
            batch += same[: size - 1]
        for ticket in batch:
            self._waiting.remove(ticket)
            ticket.started = now
        self._running = batch
        return batch

    def _work(self) -> None:
        while True:
            with self._cond:
                batch = self._next()
                while not batch:
                    self._cond.wait()
                    batch = self._next()
            began = time.monotonic()
            if len(batch) > 1:
                self._answer_together(batch)
            else:
                self._answer(batch[0])
            with self._cond:
                self._times.append((time.monotonic() - began) / len(batch))
                self._running = []

    @staticmethod
    def _answer(ticket: Ticket) -> None:
        try:
            ticket._finish(ticket.work())
        except BaseException as e:  # kept for the session that waits: the worker goes on
            ticket._finish(error=e)

    def _answer_together(self, batch: list[Ticket]) -> None:
        """One batch for several tickets; should it fail, each ticket alone (so one question's own
        error is its session's, not the batch's)."""
        try:
            values = self.run_batch(batch[0].group, [t.item for t in batch])
        except BaseException:
            for ticket in batch:
                self._answer(ticket)
            return
        for ticket, value in zip(batch, values):
            ticket._finish(value)
