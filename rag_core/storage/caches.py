"""The cache folders: one name for each kind of thing the engine keeps on disk, its size, and a safe clear.

Everything lives under `cache_dir()` (outside the repository). All but one kind are rebuilt on
demand when missing, so clearing them only costs time; `user-indexes` (indexes built from a user's
uploads) and `training` (fine-tuned models) are a user's own work and never part of "all": they are
cleared only when named.

>>> sorted(KINDS)[:3]
['answers', 'corpus-indexes', 'eval']
>>> "user-indexes" in REBUILT
False
"""

from __future__ import annotations

import os
import shutil
import time
from dataclasses import dataclass
from pathlib import Path

from rag_core.config import cache_dir

KINDS = {  # folder under cache_dir() -> what it holds, for `cache list` and the Corpus page
    "models": "the packaged generator, converted once to safetensors (about 20 s to redo)",
    "indexes": "the named indexes wiki, 2016 and 2018 (rebuilt from the shipped vectors in seconds)",
    "corpus-indexes": "indexes built for `--corpus FILE` (rebuilt on next use)",
    "maps": "fitted map layouts (a UMAP refit takes about a minute)",
    "leaders": "index-swap experiment runs, one folder per settings key (resumable)",
    "eval": "saved eval runs, shown on the Eval page",
    "user-indexes": "indexes built from your uploads on the Corpus page (not rebuilt: cleared only by name)",
    "training": "fine-tuning runs started on the Train page, resumable (not rebuilt: cleared only by name)",
    "replay": "trace files given to the Replay page and their replayed results, resumable",
    "answers": "answers the app computed, by everything they depend on (read back instead of recomputed)",
}
REBUILT = tuple(k for k in KINDS if k not in ("user-indexes", "training"))  # what "all" clears
# The kinds that gain an entry per new input (a corpus file, an index's map, a settings key) keep only
# their most recently written entries; an evicted one is rebuilt if it is asked for again.
LIMITS = {"corpus-indexes": 8, "maps": 32, "leaders": 8, "answers": 2000}


def folder(kind: str) -> Path:
    """The folder of one kind, created if missing."""
    if kind not in KINDS:
        raise ValueError(f"unknown cache {kind!r}: choose from {', '.join(KINDS)}")
    path = cache_dir() / kind
    path.mkdir(parents=True, exist_ok=True)
    return path


@dataclass
class Usage:
    kind: str
    path: Path
    bytes: int
    entries: int  # files and folders directly inside
    what: str


def _size(path: Path) -> int:
    total = 0
    for root, _, files in os.walk(path):
        for name in files:
            try:
                total += (Path(root) / name).stat().st_size
            except OSError:  # removed while we looked
                pass
    return total


def usage() -> list[Usage]:
    """Every kind with its size on disk, in the order of `KINDS`."""
    out = []
    for kind, what in KINDS.items():
        path = cache_dir() / kind
        entries = sum(1 for _ in path.iterdir()) if path.is_dir() else 0
        out.append(Usage(kind, path, _size(path) if path.is_dir() else 0, entries, what))
    return out


def clear(kind: str) -> int:
    """Empty one kind's folder; returns the bytes freed. The folder is renamed away first, so a
    reader sees either the whole old cache or an empty one, never half of it."""
    path = folder(kind)
    freed = _size(path)
    trash = path.with_name(f".{kind}.cleared-{os.getpid()}-{time.time_ns()}")
    os.rename(path, trash)
    path.mkdir()
    shutil.rmtree(trash, ignore_errors=True)
    return freed


def keep_newest(
    kind: str, keep: Path | None = None, limit: int | None = None, within: Path | None = None
) -> list[Path]:
    """Bound a kind's folder (or the folder `within`, holding entries of that kind) to its `LIMITS`
    entries (or `limit`): the least recently written go, never `keep` (the entry just written) nor
    a hidden temporary one; returns what was removed. E.g. with a limit of 2 and maps m0..m3 written
    in that order, m0 and m1 go (`tests/test_caches.py`).
    """
    limit = LIMITS[kind] if limit is None else limit
    where = folder(kind) if within is None else within
    entries = [p for p in where.iterdir() if not p.name.startswith(".") and p != keep]
    entries.sort(key=lambda p: p.stat().st_mtime, reverse=True)  # newest first
    gone = entries[max(0, limit - (keep is not None)) :]
    for p in gone:
        aside = p.with_name(f".{p.name}.evicted-{os.getpid()}-{time.time_ns()}")
        try:
            os.rename(p, aside)  # one rename: a reader sees the entry whole or not at all
        except OSError:  # removed meanwhile by another process
            continue
        shutil.rmtree(aside, ignore_errors=True) if aside.is_dir() else aside.unlink(missing_ok=True)
    return gone


def human(n: int) -> str:
    """
    >>> human(0), human(2048), human(5 * 1024 ** 3)
    ('0 B', '2.0 KB', '5.0 GB')
    """
    size = float(n)
    for unit in ("B", "KB", "MB", "GB"):
        if size < 1024 or unit == "GB":
            return f"{size:.0f} {unit}" if unit == "B" else f"{size:.1f} {unit}"
        size /= 1024
    return f"{size:.1f} GB"
