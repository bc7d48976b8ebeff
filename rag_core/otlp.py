"""One query as OpenTelemetry spans with the OpenInference conventions, in OTLP's JSON encoding, so
trace viewers that speak them (Arize Phoenix, Langfuse, Datadog) show a RAG Loupe answer beside
their other traces.

The spans, under one trace:

- a CHAIN span `rag_loupe.query`: the question in, the answers out, and what made them: the
  retriever and the generator (an adapter's id where one is merged), the prompt fingerprint, every
  setting, a fingerprint of the settings and the trace schema's version;
- a RETRIEVER span `retrieve`: `retrieval.documents.{i}.document.{id,content,score}` (score: the
  retriever's s(z)), with the prior p(z|x) and each reading's citation in the document metadata;
- an LLM span per reading (`rag-token`, `rag-sequence`, `stuffed`): the answer out, its probability
  under that reading, the generator and the decoding settings.

Our own numbers are attributes under the `rag_loupe.` prefix (the prior, the posteriors, the
leave-one-out of the stuffed reading). The SDK builds the spans and the OTLP encoder writes them;
only the JSON mapping is ours: OTLP/JSON writes trace and span ids as hex, not the base64 that
protobuf's JSON mapping gives bytes.
"""

from __future__ import annotations

import base64
import hashlib
import json
from collections.abc import Sequence

from google.protobuf.json_format import MessageToDict, ParseDict
from openinference.semconv.trace import DocumentAttributes as Doc
from openinference.semconv.trace import OpenInferenceSpanKindValues as Kind
from openinference.semconv.trace import SpanAttributes as Attr
from opentelemetry.exporter.otlp.proto.common.trace_encoder import encode_spans
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from rag_core import marginals
from rag_core.config import DECODINGS, STUFFED
from rag_core.decoding.stuffed import p_without
from rag_core.marginals import prob
from rag_core.trace import SCHEMA_VERSION, Trace, log_p_under, settings_row

SERVICE = "rag-loupe"
PREFIX = "rag_loupe."
IDS = ("traceId", "spanId", "parentSpanId")


def _documents(trace: Trace, cited: dict[str, list[float]]) -> dict:
    """The RETRIEVER span's document attributes, one block per retrieved passage."""
    out = {}
    for i, (h, p) in enumerate(zip(trace.hits, trace.prior)):
        key = f"{Attr.RETRIEVAL_DOCUMENTS}.{i}."
        meta = {"rank": h.rank, "title": h.passage.title, "prior": float(p)}
        meta |= {f"posterior_{d}": post[i] for d, post in cited.items()}
        out |= {
            key + Doc.DOCUMENT_ID: h.passage.id,
            key + Doc.DOCUMENT_CONTENT: h.passage.text,
            key + Doc.DOCUMENT_SCORE: float(h.score),
            key + Doc.DOCUMENT_METADATA: json.dumps(meta),
        }
    return out


def settings_fingerprint(trace: Trace) -> str:
    """16 hex digits over every setting and model a trace was decoded with (its export's setting
    columns): two traces with one fingerprint were made the same way."""
    text = json.dumps(settings_row(trace), sort_keys=True, default=str)
    return hashlib.sha1(text.encode("utf-8")).hexdigest()[:16]


def _made_by(trace: Trace) -> dict:
    """The root span's attributes naming the stack, the settings and the schema."""
    row = settings_row(trace)
    return {
        PREFIX + "retriever": str(row.get("encoder") or ""),
        PREFIX + "generator": str(row.get("generator") or ""),
        PREFIX + "prompt_fingerprint": str(row.get("prompt_fingerprint") or ""),
        PREFIX + "settings": json.dumps(row, sort_keys=True, default=str),
        PREFIX + "settings_fingerprint": settings_fingerprint(trace),
        PREFIX + "schema_version": SCHEMA_VERSION,
    }


def _reading(trace: Trace, decoding: str) -> dict | None:
    """The LLM span attributes of one reading's chosen answer (None: not decoded)."""
    c = trace.answer(decoding)
    if c is None:
        return None
    settings = {
        k: getattr(trace.settings, k) for k in ("beams", "max_new_tokens", "length_penalty", "rescore")
    }
    attrs = {
        Attr.OPENINFERENCE_SPAN_KIND: Kind.LLM.value,
        Attr.INPUT_VALUE: trace.question,
        Attr.OUTPUT_VALUE: c.answer,
        Attr.LLM_MODEL_NAME: str(trace.settings.generator or ""),
        Attr.LLM_INVOCATION_PARAMETERS: json.dumps(settings),
        PREFIX + "decoding": decoding,
        PREFIX + "p": prob(log_p_under(c, decoding, trace.log_prior)),
        PREFIX + "finished": c.finished,
        PREFIX + "tokens": list(c.tokens),
    }
    if decoding == STUFFED:
        loo = trace.stuffed.leave_one_out if trace.stuffed is not None else None
        if loo is not None:
            attrs[PREFIX + "p_without"] = p_without(loo)
    else:
        attrs[PREFIX + "posterior"] = marginals.citation(trace.log_prior, c.token_logp).tolist()
    return attrs


def spans_of(trace: Trace, readings: Sequence[str] = (*DECODINGS, STUFFED)) -> list[ReadableSpan]:
    """The finished spans of one query (root first), made by the SDK."""
    exporter = InMemorySpanExporter()
    provider = TracerProvider(resource=Resource.create({"service.name": SERVICE}))
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    tracer = provider.get_tracer(SERVICE)
    answers = {d: c.answer for d in readings if (c := trace.answer(d)) is not None}
    cited = {
        d: marginals.citation(trace.log_prior, trace.answer(d).token_logp).tolist()
        for d in answers
        if d != STUFFED
    }
    with tracer.start_as_current_span("rag_loupe.query") as root:
        root.set_attributes(
            {
                Attr.OPENINFERENCE_SPAN_KIND: Kind.CHAIN.value,
                Attr.INPUT_VALUE: trace.question,
                Attr.OUTPUT_VALUE: json.dumps(answers, ensure_ascii=False),
                Attr.OUTPUT_MIME_TYPE: "application/json",
                PREFIX + "index": trace.index,
                PREFIX + "k": trace.k,
                PREFIX + "scale": float(trace.scale),
                **_made_by(trace),
            }
        )
        with tracer.start_as_current_span("retrieve") as span:
            span.set_attributes(
                {
                    Attr.OPENINFERENCE_SPAN_KIND: Kind.RETRIEVER.value,
                    Attr.INPUT_VALUE: trace.question,
                    Attr.EMBEDDING_MODEL_NAME: str(trace.settings.encoder or ""),
                    PREFIX + "prior": [float(p) for p in trace.prior],
                    **_documents(trace, cited),
                }
            )
        for d in answers:
            with tracer.start_as_current_span(d) as span:
                span.set_attributes(_reading(trace, d))
    provider.shutdown()
    return sorted(exporter.get_finished_spans(), key=lambda s: s.start_time)


def otlp_json(spans: Sequence[ReadableSpan]) -> dict:
    """OTLP/JSON of the spans (an ExportTraceServiceRequest): what an OTLP/HTTP JSON receiver takes."""
    data = MessageToDict(encode_spans(list(spans)))

    def hex_ids(node):
        if isinstance(node, dict):
            return {
                k: base64.b64decode(v).hex() if k in IDS and isinstance(v, str) else hex_ids(v)
                for k, v in node.items()
            }
        return [hex_ids(v) for v in node] if isinstance(node, list) else node

    return hex_ids(data)


def otlp_message(data: dict) -> ExportTraceServiceRequest:
    """OTLP/JSON (as `otlp_json` writes it) back into protobuf's OTLP message, for a receiver that
    takes OTLP/HTTP protobuf (`.SerializeToString()`): the ids from hex back to the base64 that
    protobuf's JSON mapping wants for bytes."""

    def b64_ids(node):
        if isinstance(node, dict):
            return {
                k: base64.b64encode(bytes.fromhex(v)).decode()
                if k in IDS and isinstance(v, str)
                else b64_ids(v)
                for k, v in node.items()
            }
        return [b64_ids(v) for v in node] if isinstance(node, list) else node

    return ParseDict(b64_ids(data), ExportTraceServiceRequest())


def trace_otlp(trace: Trace) -> str:
    """One query's OTLP/JSON, as `ask --otlp` writes it and Ask's download gives it."""
    return json.dumps(otlp_json(spans_of(trace)), ensure_ascii=False, indent=1)
