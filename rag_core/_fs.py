"""Writes that never leave a half state: the one atomic-write helper every cache and index uses.

A reader (another app session, a rerun after a crash) sees either the old file or the new one:
the data goes to a temporary name in the same folder, then `os.replace` swaps it in.

>>> import tempfile, pathlib
>>> target = pathlib.Path(tempfile.mkdtemp()) / "run.json"
>>> write_json_atomic(target, {"n": 1}); target.read_text()
'{"n": 1}'
"""
from __future__ import annotations

import json
import os
import shutil
import tempfile
import time
from pathlib import Path
from typing import Callable


def write_atomic(path: Path, write: Callable[[str], None]) -> None:
    """Call `write(temp_path)`, then move the temporary file over `path` (its folder is created)."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    os.close(fd)
    try:
        write(tmp)
        os.replace(tmp, path)
    finally:
        if os.path.exists(tmp):
            os.unlink(tmp)


def write_text_atomic(path: Path, text: str) -> None:
    write_atomic(path, lambda tmp: Path(tmp).write_text(text, encoding="utf-8"))


def write_bytes_atomic(path: Path, data: bytes) -> None:
    write_atomic(path, lambda tmp: Path(tmp).write_bytes(data))


def write_json_atomic(path: Path, data, indent: int | None = None) -> None:
    write_text_atomic(path, json.dumps(data, ensure_ascii=False, indent=indent))


def replace_dir(src: Path, dst: Path) -> None:
    """Move folder `src` to `dst`, replacing any old `dst` with two renames (never a half state).

    Callers check first that `dst` is theirs to replace (see `index.check_output_folder`)."""
    old = None
    if dst.exists():
        old = dst.with_name(f".{dst.name}.old-{os.getpid()}-{time.time_ns()}")
        os.rename(dst, old)
    os.rename(src, dst)
    if old is not None:
        shutil.rmtree(old, ignore_errors=True)
