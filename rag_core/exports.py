"""One frame, three formats: CSV, Parquet and JSON Lines, for the trace and for eval rows.

The same dataframe (`Trace.to_frame`, `EvalRun.frame`) is written in every format, so a column
means the same thing in each; docs/trace-schema.md lists the columns and their schema versions.
CSV is made spreadsheet-safe (formula-like text cells quoted with a leading '); Parquet and JSON
Lines keep every value exactly as computed, and Parquet carries the schema version in its metadata
(key `rag_loupe_schema`, e.g. b"trace/4") and, for a trace, the settings it was decoded with (key
`rag_loupe_settings`, JSON), so a script can read them without loading a row.

>>> import pandas as pd
>>> frame = pd.DataFrame({"query": ["=1+1"], "p": [0.5]})
>>> frame_bytes(frame, "jsonl", "trace").decode()
'{"query":"=1+1","p":0.5}\\n'
"""

from __future__ import annotations

import io
import json
from pathlib import Path

import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq

from rag_core.trace import SCHEMA_VERSION, SETTING_COLUMNS, neutralise, write_csv

FORMATS = ("csv", "parquet", "jsonl")
SCHEMAS = {"trace": SCHEMA_VERSION, "eval": 4}  # the schema version of each frame (docs/trace-schema.md)
EVAL_TEXT_COLUMNS = (
    "question",
    "answer",
    "answers",
    "title",
)  # the eval rows' text a spreadsheet must not run
# The eval rows leave a cell empty ("") where a mode has no value (closed-book's recall and
# probabilities); typed formats get a null there instead, and one type a column.
EVAL_TYPES = {
    "recall": "Int64",
    "answer_rank": "Int64",
    "p_seq": "Float64",
    "p_tok": "Float64",
    "weights_share": "Float64",
    "low_confidence": "Int64",
    "p_stuffed": "Float64",
    "top_passage": "Int64",
    "mixture_top_passage": "Int64",
}
MIME = {"csv": "text/csv", "parquet": "application/vnd.apache.parquet", "jsonl": "application/jsonl"}
SCHEMA_KEY = b"rag_loupe_schema"
SETTINGS_KEY = b"rag_loupe_settings"
DOCS = "docs/trace-schema.md"  # where the columns of every export are documented, in the repository


def format_of(path: str | Path) -> str:
    """The format a file name asks for: .csv, .parquet or .jsonl."""
    suffix = Path(path).suffix.lower().lstrip(".")
    if suffix not in FORMATS:
        raise ValueError(
            f"cannot tell the export format of {Path(path).name!r}: use .csv, .parquet or .jsonl"
        )
    return suffix


def frame_bytes(frame: pd.DataFrame, fmt: str, kind: str) -> bytes:
    """`frame` in format `fmt`; `kind` ("trace" or "eval") names its schema."""
    if fmt == "csv" and kind == "trace":
        return write_csv(frame).encode("utf-8")
    if fmt == "csv":
        safe = frame.copy()
        for col in EVAL_TEXT_COLUMNS:
            if col in safe:
                safe[col] = safe[col].map(neutralise)
        return safe.to_csv(index=False).encode("utf-8")
    if kind == "eval":
        frame = frame.copy()
        for col, dtype in EVAL_TYPES.items():
            if col in frame:
                frame[col] = pd.to_numeric(frame[col].replace("", None)).astype(dtype)
    if fmt == "jsonl":
        # 15 significant digits (pandas writes 10 by default): the numbers read back as computed
        return frame.to_json(orient="records", lines=True, force_ascii=False, double_precision=15).encode(
            "utf-8"
        )
    if fmt == "parquet":
        table = pa.Table.from_pandas(frame, preserve_index=False)
        meta = {SCHEMA_KEY: f"{kind}/{SCHEMAS[kind]}".encode()}
        if kind == "trace":
            meta[SETTINGS_KEY] = json.dumps(frame_settings(frame)).encode()
        table = table.replace_schema_metadata({**(table.schema.metadata or {}), **meta})
        buf = io.BytesIO()
        pq.write_table(table, buf)
        return buf.getvalue()
    raise ValueError(f"unknown export format {fmt!r} (one of {', '.join(FORMATS)})")


def frame_settings(frame: pd.DataFrame) -> dict:
    """The settings a trace frame was decoded with, from its setting columns (every row holds the
    same): what a Parquet export carries in its metadata. Empty for a frame with no rows.

    >>> frame_settings(pd.DataFrame({"k": [5, 5], "scale": [20.0, 20.0], "beams": [None, None]}))
    {'k': 5, 'scale': 20.0, 'beams': None}
    """
    if frame.empty:
        return {}
    first = frame.iloc[0]
    return {
        c: (None if pd.isna(first[c]) else first[c].item() if hasattr(first[c], "item") else first[c])
        for c in SETTING_COLUMNS
        if c in frame
    }


def write_frame(frame: pd.DataFrame, path: str | Path, kind: str) -> None:
    """Write `frame` to `path` in the format its suffix names."""
    Path(path).write_bytes(frame_bytes(frame, format_of(path), kind))


def read_frame(path: str | Path) -> pd.DataFrame:
    """Read an export back (the round trip the tests check)."""
    fmt = format_of(path)
    if fmt == "csv":
        return pd.read_csv(path, keep_default_na=False, na_values=[""])
    if fmt == "jsonl":
        return pd.read_json(path, orient="records", lines=True, dtype=False, convert_dates=False)
    return pq.read_table(path).to_pandas()


def settings_of(path: str | Path) -> dict:
    """The settings a Parquet trace export carries in its metadata ({} when it has none)."""
    value = (pq.read_schema(path).metadata or {}).get(SETTINGS_KEY)
    return json.loads(value) if value else {}


def schema_of(path: str | Path) -> str | None:
    """The schema a Parquet export was written with ("trace/4"), None when it has none."""
    meta = pq.read_schema(path).metadata or {}
    value = meta.get(SCHEMA_KEY)
    return value.decode() if value else None
