"""Read traces from a file or a folder, whatever it holds:

- `.json`: one OTLP/JSON export (an ExportTraceServiceRequest: `resourceSpans`);
- `.jsonl`: JSON Lines, each line an OTLP/JSON export (as an OpenTelemetry collector's file
  exporter writes them) or one plain trace (`plain_lines`);
- `.pb`, `.bin`, `.protobuf`, `.otlp`: one OTLP protobuf export;
- `.parquet`: Arize Phoenix's spans dataframe, saved (`df.to_parquet`, or a saved trace dataset's
  spans file).

A folder is read file by file, in name order (files of other kinds are passed over). A file or line
that cannot be read is listed with what is wrong, and the rest are still read.
"""

from __future__ import annotations

import json
from pathlib import Path

import pandas as pd

from rag_core.replay.assemble import traces_of
from rag_core.replay.plain_lines import trace_of_line
from rag_core.replay.records import Imported, ReplayFileError, Skipped
from rag_core.replay.spans import spans_of_frame, spans_of_otlp, spans_of_protobuf

PROTOBUF = {".pb", ".bin", ".protobuf", ".otlp"}
SUFFIXES = {".json", ".jsonl", ".parquet", *PROTOBUF}


def problem(e: Exception) -> str:
    """What is wrong, in words: a missing key is named as missing.

    >>> problem(KeyError("spanId")), problem(ValueError("not JSON"))
    ('missing spanId', 'not JSON')
    """
    if isinstance(e, KeyError):
        return f"missing {e.args[0] if e.args else 'a field'}"
    return str(e) or type(e).__name__


def read_lines(text: str, name: str) -> Imported:
    """JSON Lines: OTLP exports and plain traces, line by line."""
    out, spans = Imported(), []
    for n, line in enumerate(text.splitlines(), 1):
        if not line.strip():
            continue
        where = f"{name}: line {n}"
        try:
            row = json.loads(line)
        except ValueError as e:
            out.skipped.append(Skipped(where, where, f"not JSON ({e})"))
            continue
        try:
            if isinstance(row, dict) and "resourceSpans" in row:
                spans += spans_of_otlp(row)
            else:
                out.traces.append(trace_of_line(row, where))
        except (ValueError, TypeError, KeyError) as e:
            out.skipped.append(Skipped(where, where, problem(e)))
    out.extend(traces_of(spans))
    return out


def read_file(path: Path) -> Imported:
    """The traces of one file (see the module docstring)."""
    name, suffix = path.name, path.suffix.lower()
    try:
        if suffix == ".parquet":
            return traces_of(spans_of_frame(pd.read_parquet(path)))
        if suffix in PROTOBUF:
            return traces_of(spans_of_protobuf(path.read_bytes()))
        text = path.read_text(encoding="utf-8")
        if suffix == ".jsonl":
            return read_lines(text, name)
        try:
            data = json.loads(text)
        except ValueError as e:
            raise ReplayFileError(f"not valid JSON ({e})") from e
        return traces_of(spans_of_otlp(data))
    except (ReplayFileError, UnicodeDecodeError, OSError, KeyError, TypeError) as e:
        return Imported([], [Skipped(name, name, problem(e))])
    except Exception as e:  # a damaged parquet file raises its own kinds
        return Imported([], [Skipped(name, name, f"cannot be read ({type(e).__name__}: {e})")])


def read_traces(path: str | Path) -> Imported:
    """Every trace under `path` (a file or a folder)."""
    path = Path(path)
    if path.is_dir():
        out = Imported()
        for f in sorted(p for p in path.rglob("*") if p.is_file() and p.suffix.lower() in SUFFIXES):
            out.extend(read_file(f))
        return out
    if not path.is_file():
        raise ReplayFileError(f"{path.name}: no such file or folder")
    if path.suffix.lower() not in SUFFIXES:
        raise ReplayFileError(
            f"{path.name}: not a trace file (expected one of {', '.join(sorted(SUFFIXES))})"
        )
    return read_file(path)
