"""The server's memory between page runs: a full garbage collection at most every GC_EVERY_S
seconds, whichever session's run comes to its end.

A full collection frees the cyclic garbage a model call leaves, but it walks every object of the
process (the models, the indexes, every session's state) while holding the interpreter: about a
third of a second with one session, more with a class. Run after every page run of thirty
sessions, it would be most of what the server does while they wait (a profile of the class bench
says so). Python's generational collector still runs as usual in between.

>>> every = Throttle(10.0)
>>> every.due(1000.0), every.due(1005.0), every.due(1010.0)  # the second is too soon
(True, False, True)
"""

import gc
import threading
import time

GC_EVERY_S = 10.0


class Throttle:
    """Says yes at most once every `seconds`, across threads."""

    def __init__(self, seconds: float) -> None:
        self.seconds, self._last, self._lock = seconds, float("-inf"), threading.Lock()

    def due(self, now: float | None = None) -> bool:
        now = time.monotonic() if now is None else now
        with self._lock:
            if now - self._last < self.seconds:
                return False
            self._last = now
            return True


_collections = Throttle(GC_EVERY_S)


def collect_now_and_then() -> None:
    """A full collection, unless one began less than GC_EVERY_S ago in this server."""
    if _collections.due():
        gc.collect()
