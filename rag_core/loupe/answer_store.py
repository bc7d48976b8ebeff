"""Answers kept on disk, so that a server started again, or a second server on the same cache, reads
a question it has answered before instead of asking the models again.

An entry is addressed by everything its numbers depend on: the engine's own code, the stack (its
models by content and its prompt), the question as cleaned, the index's name, the retrieved passages
(ids, titles, texts and scores) and the answer settings. An entry is never out of date, only unused:
a new model, a rebuilt index with other passages, another setting or another version of the engine
addresses another entry. Entries are JSON (a trace as `trace_to_dict` writes it), written
atomically, and the `answers` cache keeps the newest `caches.LIMITS["answers"]` of them.

>>> import tempfile
>>> store = AnswerStore(Path(tempfile.mkdtemp()))
>>> key = store.key("stack", "trace", question="Who wrote Moby-Dick?", k=5)
>>> store.get(key) is None
True
>>> store.put(key, {"answer": "Herman Melville"}); store.get(key)
{'answer': 'Herman Melville'}
>>> same = store.key("stack", "trace", question="Who wrote Moby-Dick?", k=5)
>>> key == same, key == store.key("stack", "trace", question="Who wrote Moby-Dick?", k=3)
(True, False)
"""

from __future__ import annotations

import functools
import hashlib
import json
from pathlib import Path

from rag_core.storage import caches
from rag_core.storage.files import write_json_atomic

ENGINE = Path(__file__).resolve().parent.parent  # the rag_core package
WRITES_PER_TRIM = 64  # the folder is bounded every this many writes: a trim lists every entry


@functools.cache
def engine_fingerprint() -> str:
    """A hash of the engine's own source files: any change to the code that computes an answer
    addresses new entries, so no answer computed by another version is ever read back."""
    digest = hashlib.sha256()
    for path in sorted(ENGINE.rglob("*.py")):
        digest.update(str(path.relative_to(ENGINE)).encode("utf-8"))
        digest.update(path.read_bytes())
    return digest.hexdigest()[:16]


def default_folder() -> Path:
    """Where a server keeps its answers: the `answers` cache."""
    return caches.folder("answers")


class AnswerStore:
    """Entries (JSON data) by key in `folder` (by default `default_folder()`)."""

    def __init__(self, folder: Path | None = None) -> None:
        self._folder = folder
        self._writes = 0

    @property
    def folder(self) -> Path:
        folder = default_folder() if self._folder is None else self._folder
        folder.mkdir(parents=True, exist_ok=True)
        return folder

    def key(self, stack: str, kind: str, **depends_on) -> str:
        """The address of what `kind` ("trace", "stuffed", ...) computes for the stack with
        fingerprint `stack` from `depends_on` (JSON-able values)."""
        parts = [engine_fingerprint(), stack, kind, depends_on]
        text = json.dumps(parts, sort_keys=True, ensure_ascii=False, default=str)
        return hashlib.sha256(text.encode("utf-8")).hexdigest()

    def get(self, key: str):
        """The entry's data, or None when there is none (or it cannot be read: it is then computed
        again and written over)."""
        try:
            return json.loads((self.folder / f"{key}.json").read_text(encoding="utf-8"))
        except (OSError, ValueError):
            return None

    def put(self, key: str, data) -> None:
        """Write an entry (atomically: a reader sees it whole or not at all)."""
        path = self.folder / f"{key}.json"
        write_json_atomic(path, data)
        self._writes += 1
        if self._writes % WRITES_PER_TRIM == 0:
            caches.keep_newest("answers", keep=path, within=path.parent)
