"""The one model stack a server holds in memory, loaded and swapped under one lock.

Two stacks held at once would double the memory of a large one, and a session that switches back
pays one load; so loading another stack frees the first (jobs still running on it keep their own
reference until they end). The held stack is one (fingerprint, models) pair, read in one step, so
a caller never pairs one stack's fingerprint with another's models while a swap runs.
"""

from __future__ import annotations

import contextlib
import gc
import threading
from collections.abc import Callable, Iterator

import torch

from rag_core import stacks
from rag_core.pipeline import Models, load_models


class StackHolder:
    """Holds the models of one stack; `models(stack)` swaps to another stack when asked for it."""

    def __init__(self, load: Callable[..., Models] = load_models) -> None:
        self._load = load
        self._pair: tuple[str, Models] | None = None
        self.lock = threading.RLock()  # every model load of the server: two never fill memory at once
        self.broken: set[str] = set()  # stack keys whose models failed to load (not offered again)

    def held(self) -> Models | None:
        """The models held now (whichever stack), or None."""
        pair = self._pair
        return pair[1] if pair else None

    def holds(self, stack: stacks.Stack) -> bool:
        pair = self._pair
        return bool(pair and pair[0] == stacks.fingerprint(stack.spec))

    def models(self, stack: stacks.Stack, progress: Callable[[str], None] | None = None) -> Models:
        """The models of `stack`, loaded (the held stack freed first) unless they are the ones held."""
        fp = stacks.fingerprint(stack.spec)
        pair = self._pair
        if pair and pair[0] == fp:
            return pair[1]
        with self.lock:
            pair = self._pair
            if not (pair and pair[0] == fp):
                self._free()
                pair = self._pair = (fp, self._load(stack.spec, progress))
        return pair[1]

    @contextlib.contextmanager
    def borrowed(self, stack: stacks.Stack) -> Iterator[Models]:
        """The models of `stack` for one use beside the held stack (a comparison): loaded, and used,
        under the load lock, so no other load adds a third stack meanwhile; dropped after."""
        with self.lock:
            models = self._pair[1] if self.holds(stack) else self._load(stack.spec, None)
            try:
                yield models
            finally:
                del models
                gc.collect()

    def device_text(self) -> str:
        """Where the held stack runs, in words: 'cpu', or 'cuda (bfloat16)'."""
        loaded = self.held()
        if loaded is None:
            return "not loaded"
        model = getattr(loaded.generator, "model", None)
        if loaded.device.type != "cuda" or model is None:
            return loaded.device.type
        return f"cuda ({str(next(model.parameters()).dtype).replace('torch.', '')})"

    def _free(self) -> None:
        """Drop the held stack so its memory goes back before the next one loads."""
        self._pair = None
        gc.collect()
        if torch.cuda.is_available():
            torch.cuda.empty_cache()
