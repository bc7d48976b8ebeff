"""A bounded, thread-safe memo: each key computed once, however many sessions ask for it at once.

Sessions of one server share every answer: the second session to ask what the first is computing
waits for that computation instead of starting its own (the models serve one question at a time,
so a second computation would only queue behind the first and repeat it). A failure a user caused
is remembered like a value, so asking again tells the same thing without computing again.

>>> memo = Memo(max_entries=2)
>>> memo.get("a", lambda: 1), memo.get("a", lambda: 2)
(1, 1)
>>> memo.get("b", lambda: 2), memo.get("c", lambda: 3), "a" in memo
(2, 3, False)
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Callable, Hashable
from typing import Any


class _Entry:
    """One key's value (or the user error computing it raised), filled once under its own lock."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.done = False
        self.value: Any = None
        self.error: BaseException | None = None


class Memo:
    """Values by key, the `max_entries` most recently used kept. `remembered`: the exception types
    stored like a value (errors a user caused); any other exception is raised and not kept."""

    def __init__(self, max_entries: int, remembered: tuple[type[BaseException], ...] = ()) -> None:
        self.max_entries = max_entries
        self.remembered = remembered
        self._entries: OrderedDict[Hashable, _Entry] = OrderedDict()
        self._lock = threading.Lock()  # guards the dict; each entry's own lock guards its computation

    def __contains__(self, key: Hashable) -> bool:
        with self._lock:
            entry = self._entries.get(key)
            return entry is not None and entry.done

    def get(self, key: Hashable, compute: Callable[[], Any]) -> Any:
        """The value of `key`, computed by `compute()` the first time it is asked for."""
        with self._lock:
            entry = self._entries.get(key)
            if entry is None:
                entry = self._entries[key] = _Entry()
            self._entries.move_to_end(key)
            while len(self._entries) > self.max_entries:
                self._entries.popitem(last=False)
        with entry.lock:  # a second caller of the same key waits here for the first's value
            if not entry.done:
                try:
                    entry.value = compute()
                except self.remembered as e:
                    entry.error = e
                entry.done = True
        if entry.error is not None:
            raise entry.error
        return entry.value

    def forget(self, keep: Callable[[Hashable], bool] = lambda key: False) -> None:
        """Drop every entry whose key `keep` does not accept (all of them by default)."""
        with self._lock:
            for key in [k for k in self._entries if not keep(k)]:
                del self._entries[key]
