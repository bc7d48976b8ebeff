"""A replay as what users' tools read: one JSON object per trace (`replay --json`), a table with one
row per trace and document (`--csv`), and OpenTelemetry spans carrying the findings (`--otlp`).

JSON keys: `trace_id`, `source`, `question`, `answer` (logged), `expected`, `generator`, `template`,
`replayed` (the replay's greedy answer), `reproduced`, `p_answer`, `p_replayed`, `closed_book`,
`p_closed`, `documents` (prompt order: `position`, `id`, `title`, `text`, `score`, `p_without`,
`worth`, `p_alone`, `posterior`, `holds_answer`, `holds_expected`), `not_in_prompt` (ids),
`leave_one_out` ({id: p without it}), `leaned_on` (id), `supported`, `correct`, `verdicts`
(`code`, `fired`, `summary`, `evidence`), `confidence`, `orders` (each order's own answer and its `p`,
and `p_logged`: the logged answer's p in that order), and `skipped` (null, or the reason
a trace was not replayed; such an object has the question and answer where they were read).
"""

from __future__ import annotations

import json
import math
from collections.abc import Sequence
from dataclasses import asdict

import pandas as pd
from openinference.semconv.trace import DocumentAttributes as Doc
from openinference.semconv.trace import OpenInferenceSpanKindValues as Kind
from openinference.semconv.trace import SpanAttributes as Attr
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from rag_core.otlp import SERVICE, otlp_json
from rag_core.replay.records import Skipped
from rag_core.replay.run import Replay

PREFIX = "rag_loupe.replay."


def replay_json(r: Replay) -> dict:
    """One replayed trace as the JSON object `replay --json` prints."""
    leaned = r.leaned_on
    return {
        "trace_id": r.trace.trace_id,
        "source": r.trace.source,
        "question": r.trace.question,
        "answer": r.trace.answer,
        "expected": r.trace.expected,
        "generator": r.generator,
        "template": r.template,
        "replayed": r.replayed,
        "reproduced": r.reproduced,
        "p_answer": r.p_answer,
        "p_replayed": r.p_replayed,
        "closed_book": r.closed_book,
        "p_closed": r.p_closed,
        "documents": [asdict(d) for d in r.documents],
        "not_in_prompt": [d.id for d in r.not_in_prompt],
        "leave_one_out": {d.id: d.p_without for d in r.documents},
        "leaned_on": leaned.id if leaned is not None else None,
        "supported": r.supported,
        "correct": r.correct,
        "verdicts": [
            {"code": v.code, "fired": v.fired, "summary": v.summary, "evidence": v.evidence}
            for v in r.verdicts
        ],
        "confidence": r.confidence.to_json(),
        "orders": [
            {
                "kind": o.kind,
                "moved": o.moved,
                "order": list(o.order),
                "answer": o.answer,  # this order's own greedy answer, and its p
                "p": o.p,
                "p_logged": math.exp(o.logp_answer),  # p of the logged answer in this order
            }
            for o in r.orders
        ],
        "skipped": None,
    }


def summary(objects: Sequence[dict]) -> str:
    """What a run found, in one line: replayed, reproduced, right (where expected answers were
    given), low confidence, and how often each verdict fired.

    >>> summary([{"skipped": "no answer"}, {"skipped": None, "reproduced": True, "correct": False,
    ...   "confidence": {"low": True}, "verdicts": [{"code": "position", "fired": True}]}])
    'replayed 1 traces (1 skipped): 1 reproduced; 0 of 1 right; 1 low confidence; fired: position 1'
    """
    done = [o for o in objects if not o.get("skipped")]
    judged = [o for o in done if o.get("correct") is not None]
    fired: dict[str, int] = {}
    for o in done:
        for v in o["verdicts"]:
            if v["fired"]:
                fired[v["code"]] = fired.get(v["code"], 0) + 1
    parts = [
        f"replayed {len(done)} traces ({len(objects) - len(done)} skipped): "
        f"{sum(bool(o['reproduced']) for o in done)} reproduced",
        f"{sum(bool(o['correct']) for o in judged)} of {len(judged)} right"
        if judged
        else "no expected answers",
        f"{sum(bool(o['confidence']['low']) for o in done)} low confidence",
        "fired: " + (", ".join(f"{k} {n}" for k, n in fired.items()) or "none"),
    ]
    return "; ".join(parts)


def skipped_json(s: Skipped) -> dict:
    return {"trace_id": s.trace_id, "source": s.source, "skipped": s.reason}


ROW_KEYS = (
    "trace_id",
    "question",
    "answer",
    "template",
    "replayed",
    "reproduced",
    "p_answer",
    "leaned_on",
    "correct",
)


def replay_frame(objects: Sequence[dict]) -> pd.DataFrame:
    """`--csv`: one row per trace and document the model read (a skipped trace: one row, its reason)."""
    rows = []
    for o in objects:
        head = {k: o.get(k) for k in ROW_KEYS}
        head["fired"] = " ".join(v["code"] for v in o.get("verdicts", []) if v["fired"])
        head["low_confidence"] = o["confidence"]["low"] if o.get("confidence") else None
        head["skipped"] = o.get("skipped")
        docs = o.get("documents") or [{}]
        for d in docs:
            rows.append(
                head
                | {
                    "doc_position": d.get("position"),
                    "doc_id": d.get("id"),
                    "doc_score": d.get("score"),
                    "p_without": d.get("p_without"),
                    "worth": d.get("worth"),
                    "p_alone": d.get("p_alone"),
                    "posterior": d.get("posterior"),
                    "holds_answer": d.get("holds_answer"),
                }
            )
    return pd.DataFrame(rows)


def findings_otlp(o: dict) -> dict:
    """One replayed trace's findings as OpenInference spans in OTLP/JSON: a CHAIN span
    `rag_loupe.replay` (question in, logged answer out, the findings as `rag_loupe.replay.*`
    attributes) and a RETRIEVER span of the documents read, each document's findings in its
    metadata. Where the logged trace id is an OTLP one (32 hex digits) the spans join that trace,
    so a trace viewer shows them beside the original spans."""
    exporter = InMemorySpanExporter()
    provider = TracerProvider(resource=Resource.create({"service.name": SERVICE}))
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    tracer = provider.get_tracer(SERVICE)
    fired = [v["code"] for v in o["verdicts"] if v["fired"]]
    with tracer.start_as_current_span("rag_loupe.replay") as root:
        root.set_attributes(
            {
                Attr.OPENINFERENCE_SPAN_KIND: Kind.CHAIN.value,
                Attr.INPUT_VALUE: o["question"],
                Attr.OUTPUT_VALUE: o["answer"],
                PREFIX + "trace_id": o["trace_id"],
                PREFIX + "generator": o["generator"],
                PREFIX + "template": o["template"],
                PREFIX + "replayed": o["replayed"],
                PREFIX + "reproduced": o["reproduced"],
                PREFIX + "p_answer": o["p_answer"],
                PREFIX + "leaned_on": o["leaned_on"] or "",
                PREFIX + "verdicts": fired,
                PREFIX + "low_confidence": o["confidence"]["low"],
                PREFIX + "confidence": o["confidence"]["reasons"],
            }
        )
        with tracer.start_as_current_span("replay.documents") as span:
            attrs = {Attr.OPENINFERENCE_SPAN_KIND: Kind.RETRIEVER.value, Attr.INPUT_VALUE: o["question"]}
            for i, d in enumerate(o["documents"]):
                key = f"{Attr.RETRIEVAL_DOCUMENTS}.{i}."
                meta = {
                    k: d[k]
                    for k in ("position", "p_without", "worth", "p_alone", "posterior", "holds_answer")
                }
                attrs |= {
                    key + Doc.DOCUMENT_ID: d["id"],
                    key + Doc.DOCUMENT_CONTENT: d["text"],
                    key + Doc.DOCUMENT_METADATA: json.dumps(meta),
                }
                if d["score"] is not None:
                    attrs[key + Doc.DOCUMENT_SCORE] = d["score"]
            span.set_attributes(attrs)
    provider.shutdown()
    data = otlp_json(sorted(exporter.get_finished_spans(), key=lambda s: s.start_time))
    tid = str(o["trace_id"]).lower()
    if len(tid) == 32 and all(c in "0123456789abcdef" for c in tid):
        for rs in data["resourceSpans"]:
            for ss in rs["scopeSpans"]:
                for s in ss["spans"]:
                    s["traceId"] = tid
    return data
