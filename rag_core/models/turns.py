"""A reentrant lock that hands itself to its waiters in the order they came: the models' lock.

The server's questions and its background jobs (an evaluation, the index swap) take the models'
lock one batch at a time. Python's own locks are not fair: a job that releases the lock and asks
for it again for its next batch usually gets it straight back, so a question could wait for the
whole job. With turns, whoever waited longest goes next: a question waits for at most the batch a
job is in, and the job for at most one question, so the two share the cores batch by batch.

>>> lock = TurnLock()
>>> with lock:
...     with lock:  # the holder may take it again (a path that calls another under the lock)
...         lock.held_by_me()
True
"""

from __future__ import annotations

import threading
from collections import deque


class TurnLock:
    """First come, first served; reentrant for the thread that holds it."""

    def __init__(self) -> None:
        self._cond = threading.Condition(threading.Lock())
        self._owner: int | None = None
        self._depth = 0
        self._line: deque[int] = deque()  # the waiting threads, in the order they asked

    def acquire(self, blocking: bool = True, timeout: float = -1) -> bool:
        me = threading.get_ident()
        with self._cond:
            if self._owner == me:
                self._depth += 1
                return True
            if self._owner is None and not self._line:
                self._owner, self._depth = me, 1
                return True
            if not blocking:
                return False
            self._line.append(me)
            turn = lambda: self._owner is None and self._line[0] == me  # noqa: E731
            if not self._cond.wait_for(turn, None if timeout < 0 else timeout):
                self._line.remove(me)
                self._cond.notify_all()  # the next in line may be free to go now
                return False
            self._line.popleft()
            self._owner, self._depth = me, 1
            return True

    def release(self) -> None:
        with self._cond:
            if self._owner != threading.get_ident():
                raise RuntimeError("release of a TurnLock this thread does not hold")
            self._depth -= 1
            if self._depth == 0:
                self._owner = None
                self._cond.notify_all()

    def held_by_me(self) -> bool:
        return self._owner == threading.get_ident()

    def __enter__(self) -> TurnLock:
        self.acquire()
        return self

    def __exit__(self, *exc) -> None:
        self.release()
