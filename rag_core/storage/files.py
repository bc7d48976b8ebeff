"""Writes that never leave a half state: the one atomic-write helper every cache and index uses.

A reader (another app session, a rerun after a crash) sees either the old file or the new one:
the data goes to a temporary name in the same folder, then `os.replace` swaps it in.

>>> import tempfile, pathlib
>>> target = pathlib.Path(tempfile.mkdtemp()) / "run.json"
>>> write_json_atomic(target, {"n": 1}); target.read_text()
'{"n": 1}'
"""

from __future__ import annotations

import io
import json
import os
import shutil
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

import numpy as np


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


def write_npy_atomic(path: Path, array: np.ndarray) -> None:
    """An array in NumPy's .npy format (no pickles), written atomically."""
    buf = io.BytesIO()
    np.save(buf, array, allow_pickle=False)
    write_bytes_atomic(path, buf.getvalue())


def write_json_atomic(path: Path, data, indent: int | None = None) -> None:
    write_text_atomic(path, json.dumps(data, ensure_ascii=False, indent=indent))


def append_line(path: Path, line: str) -> None:
    """Append one line to a log file that a killed writer may have left torn.

    A torn last line (no newline) is closed first, so the new line never merges into it and
    stays readable:
    >>> import tempfile, pathlib
    >>> log = pathlib.Path(tempfile.mkdtemp()) / "rows.jsonl"
    >>> _ = log.write_text('{"a": 1}\\n{"b":')   # a writer killed mid-line
    >>> append_line(log, '{"c": 3}'); log.read_text().splitlines()[-1]
    '{"c": 3}'
    """
    path = Path(path)
    with open(path, "a+b") as f:
        f.seek(0, os.SEEK_END)
        if f.tell():
            f.seek(-1, os.SEEK_END)
            if f.read(1) != b"\n":
                f.write(b"\n")
        f.write(line.encode("utf-8") + b"\n")


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # someone else's process: alive
        return True
    return True


def _owner_pid(name: str, marker: str) -> int | None:
    """The process id in a name like `.ix.tmp-1234-x8f` (`marker` = `.tmp-`), or None."""
    head = name.rpartition(marker)[2].split("-")[0]
    return int(head) if head.isdigit() else None


def temp_sibling(target: Path) -> Path:
    """A new empty folder beside `target` to build a replacement in, named with this process id.

    First it tidies what killed processes left beside `target`: their unfinished temporary
    folders are removed, and a previous version that a kill stranded between the two renames of
    `replace_dir` (`target` missing, `.target.old-PID-…` present) is moved back, so a reader sees
    the old state again."""
    target = Path(target)
    target.parent.mkdir(parents=True, exist_ok=True)
    for leftover in sorted(target.parent.glob(f".{target.name}.*")):
        for marker in (".tmp-", ".old-"):
            pid = _owner_pid(leftover.name, marker) if marker in leftover.name else None
            if pid is None or _alive(pid):
                continue
            if marker == ".old-" and not target.exists():
                os.rename(leftover, target)
            else:
                shutil.rmtree(leftover, ignore_errors=True)
    return Path(tempfile.mkdtemp(prefix=f".{target.name}.tmp-{os.getpid()}-", dir=target.parent))


def replace_dir(src: Path, dst: Path) -> None:
    """Move folder `src` to `dst`, replacing any old `dst` with two renames (never a half state).

    Callers check first that `dst` is theirs to replace (see `index.check_output_folder`), and
    build `src` with `temp_sibling(dst)` so a kill at any point is tidied by the next build."""
    old = None
    if dst.exists():
        old = dst.with_name(f".{dst.name}.old-{os.getpid()}-{time.time_ns()}")
        os.rename(dst, old)
    os.rename(src, dst)
    if old is not None:
        shutil.rmtree(old, ignore_errors=True)
