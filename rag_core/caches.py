"""The cache folders: one name for each kind of thing the engine keeps on disk, its size, and a safe clear.

Everything lives under `cache_dir()` (outside the repository). All but one kind are rebuilt on
demand when missing, so clearing them only costs time; `user-indexes` (indexes built from a user's
uploads) and `training` (fine-tuned models) are a user's own work and never part of "all": they are
cleared only when named.

>>> sorted(KINDS)[:3]
['corpus-indexes', 'eval', 'indexes']
>>> "user-indexes" in REBUILT
False
"""
from __future__ import annotations

import os
import shutil
import time
from dataclasses import dataclass
from pathlib import Path

from .config import cache_dir

KINDS = {  # folder under cache_dir() -> what it holds, for `cache list` and the Corpus page
    "models": "the packaged generator, converted once to safetensors (about 20 s to redo)",
    "indexes": "the named indexes wiki, 2016 and 2018 (rebuilt from the shipped vectors in seconds)",
    "corpus-indexes": "indexes built for `--corpus FILE` (rebuilt on next use)",
    "maps": "fitted map layouts (a UMAP refit takes about a minute)",
    "leaders": "index-swap experiment runs, one folder per settings key (resumable)",
    "eval": "saved eval runs, shown on the Eval page",
    "user-indexes": "indexes built from your uploads on the Corpus page (not rebuilt: cleared only by name)",
    "training": "fine-tuning runs started on the Train page, resumable (not rebuilt: cleared only by name)",
}
REBUILT = tuple(k for k in KINDS if k not in ("user-indexes", "training"))  # what "all" clears


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
