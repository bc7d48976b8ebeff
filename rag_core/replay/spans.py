"""Spans from any of the places OpenInference traces live, as one record with flat attributes:
OTLP/JSON (hex ids, as the OTLP/HTTP JSON encoding writes them, or base64 as protobuf's JSON
mapping does), OTLP protobuf, and the spans dataframe Arize Phoenix's client hands back (its nested
attribute columns flattened back to the dotted keys the conventions name).

>>> s = spans_of_otlp({"resourceSpans": [{"scopeSpans": [{"spans": [{"traceId": "ab" * 16,
...     "spanId": "cd" * 8, "name": "q", "attributes": [{"key": "input.value",
...     "value": {"stringValue": "Who?"}}, {"key": "llm.prompts", "value": {"arrayValue":
...     {"values": [{"stringValue": "P"}]}}}]}]}]}]})
>>> s[0].attributes, s[0].parent_id
({'input.value': 'Who?', 'llm.prompts': ['P']}, '')
>>> flatten("retrieval.documents", [{"document.content": "x"}])
{'retrieval.documents.0.document.content': 'x'}
"""

from __future__ import annotations

import base64
import binascii
import json
import math
from dataclasses import dataclass, field

from google.protobuf.json_format import MessageToDict
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest

from rag_core.replay.records import ReplayFileError

KIND = "openinference.span.kind"


@dataclass
class Span:
    trace_id: str  # hex
    span_id: str  # hex
    parent_id: str  # hex; "" for a root
    name: str
    attributes: dict = field(default_factory=dict)  # flat: "retrieval.documents.0.document.content"
    start: int = 0  # ns, for order

    @property
    def kind(self) -> str:
        return str(self.attributes.get(KIND, "")).upper()


def hex_id(value, width: int) -> str:
    """An id as hex: OTLP/JSON writes hex, protobuf's JSON mapping base64 (`width`: bytes).

    >>> hex_id("q83vEjRWeJA=", 8), hex_id("abcdef1234567890", 8)
    ('abcdef1234567890', 'abcdef1234567890')
    """
    text = str(value or "")
    if len(text) == 2 * width and all(c in "0123456789abcdefABCDEF" for c in text):
        return text.lower()
    try:
        return base64.b64decode(text, validate=True).hex() if text else ""
    except (binascii.Error, ValueError):
        return text


def any_value(v: dict):
    """An OTLP AnyValue as Python: strings, numbers, booleans, arrays and key-value lists."""
    if not isinstance(v, dict) or not v:
        return None
    (kind, inner), *_ = v.items()
    if kind == "arrayValue":
        return [any_value(x) for x in (inner or {}).get("values", [])]
    if kind == "kvlistValue":
        return {kv["key"]: any_value(kv.get("value", {})) for kv in (inner or {}).get("values", [])}
    if kind == "intValue":
        return int(inner)
    if kind == "doubleValue":
        return float(inner)
    return inner


def spans_of_otlp(data: dict) -> list[Span]:
    """The spans of one OTLP ExportTraceServiceRequest in its JSON form."""
    if not isinstance(data, dict) or "resourceSpans" not in data:
        raise ReplayFileError("not an OTLP trace export: it has no resourceSpans")
    out = []
    for rs in data.get("resourceSpans") or []:
        for ss in rs.get("scopeSpans") or rs.get("instrumentationLibrarySpans") or []:
            for s in ss.get("spans") or []:
                attrs = {a["key"]: any_value(a.get("value", {})) for a in s.get("attributes") or []}
                out.append(
                    Span(
                        hex_id(s.get("traceId"), 16),
                        hex_id(s.get("spanId"), 8),
                        hex_id(s.get("parentSpanId"), 8),
                        str(s.get("name", "")),
                        attrs,
                        int(s.get("startTimeUnixNano") or 0),
                    )
                )
    return out


def spans_of_protobuf(data: bytes) -> list[Span]:
    """The spans of one OTLP ExportTraceServiceRequest in protobuf's binary encoding."""
    message = ExportTraceServiceRequest()
    try:
        message.ParseFromString(data)
    except Exception as e:  # protobuf raises its own DecodeError
        raise ReplayFileError(f"not an OTLP protobuf message ({e})") from e
    return spans_of_otlp(MessageToDict(message))


def flatten(prefix: str, value) -> dict:
    """A nested attribute value (lists of dicts, as Phoenix returns documents and messages) back
    into the conventions' dotted keys."""
    if isinstance(value, dict) and not prefix.endswith("metadata"):  # a document's metadata stays whole
        return {k: v for key, item in value.items() for k, v in flatten(f"{prefix}.{key}", item).items()}
    if isinstance(value, (list, tuple)) and any(isinstance(v, dict) for v in value):
        return {k: v for i, item in enumerate(value) for k, v in flatten(f"{prefix}.{i}", item).items()}
    if hasattr(value, "tolist"):  # numpy arrays from a dataframe
        return flatten(prefix, value.tolist())
    return {prefix: value}


def _present(value) -> bool:
    if value is None:
        return False
    if isinstance(value, float) and math.isnan(value):
        return False
    return True


def spans_of_frame(frame) -> list[Span]:
    """The spans of Arize Phoenix's spans dataframe (`client.spans.get_spans_dataframe`, or a saved
    trace dataset read into one): `context.trace_id`, `context.span_id`, `parent_id`, `name`,
    `span_kind` and the `attributes.*` columns."""
    need = {"context.trace_id", "context.span_id"}
    if not need <= set(frame.columns):
        raise ReplayFileError(
            f"not a Phoenix spans table: it lacks {', '.join(sorted(need - set(frame.columns)))}"
        )
    out = []
    for row in frame.reset_index(drop=True).to_dict("records"):
        attrs = {}
        for col, value in row.items():
            if col.startswith("attributes.") and _present(value):
                key = col.removeprefix("attributes.")
                if isinstance(value, str) and key in ("metadata",) and value.startswith("{"):
                    attrs[key] = value
                    continue
                attrs |= flatten(key, json.loads(value) if _json_list(value) else value)
        if _present(row.get("span_kind")):
            attrs.setdefault(KIND, row["span_kind"])
        start = row.get("start_time")
        out.append(
            Span(
                str(row["context.trace_id"]),
                str(row["context.span_id"]),
                str(row.get("parent_id") or "") if _present(row.get("parent_id")) else "",
                str(row.get("name", "")),
                attrs,
                int(getattr(start, "value", 0) or 0) if _present(start) else 0,
            )
        )
    return out


def _json_list(value) -> bool:
    """A list of documents or messages some exports keep as a JSON string."""
    return isinstance(value, str) and value.startswith("[{") and value.endswith("}]")
