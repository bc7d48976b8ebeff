"""Replay reads what real RAG frameworks trace: a LangChain chain (`langchain-core`: a retriever over
corpus passages, a chat prompt, a fake chat model with a fixed answer) and a LlamaIndex query engine
(`llama-index-core`, a fixed-answer LLM), each instrumented with OpenInference, their spans taken
from the OpenTelemetry SDK's in-memory exporter and written as OTLP (JSON, and protobuf), then
`python -m rag_core replay` on the default stack: the right question, the documents in prompt order,
the logged answer, and the leave-one-out puts the answer's document first. The producers are
required here (requirements-replay.txt; `make test` installs them)."""

from __future__ import annotations

import json

import pytest

from rag_core.otlp import otlp_json, otlp_message

from conftest import run_cli
from trace_producers import ANSWER, QUESTION, corpus_passages, langchain_spans, llama_index_spans


@pytest.fixture(scope="module")
def passages():
    return corpus_passages()


def replayed(tmp_path, file) -> dict:
    out = tmp_path / "out.jsonl"
    got = run_cli(
        "replay",
        file,
        "--json",
        out,
        "--csv",
        tmp_path / "out.csv",
        "--otlp",
        tmp_path / "spans",
        "--threads",
        "2",
    )
    assert got.returncode == 0, got.stderr
    objs = [json.loads(line) for line in out.read_text().splitlines()]
    skipped = [o for o in objs if o["skipped"]]  # other traces of the run (building an index): listed
    assert all(o["skipped"].startswith("no ") for o in skipped), skipped
    assert f"{len(skipped)} skipped" in got.stderr
    (obj,) = [o for o in objs if not o["skipped"]]
    return obj


def check(obj, passages, prompt_order):
    assert (obj["question"], obj["answer"], obj["skipped"]) == (QUESTION, ANSWER, None)
    texts = [d["text"] for d in obj["documents"]]
    assert texts == [passages[i].text for i in prompt_order]
    moby = next(d for d in obj["documents"] if d["text"] == passages[1].text)
    assert obj["leaned_on"] == moby["id"]
    assert obj["leave_one_out"][moby["id"]] < obj["p_answer"]  # the answer loses most without it
    assert obj["template"].startswith("the logged")


@pytest.mark.slow  # the default stack loads in this process, and each replay reads a long prompt
def test_a_langchain_chain_trace_replays_with_its_chat_messages(tmp_path, passages):
    spans = langchain_spans(passages)
    path = tmp_path / "langchain.json"
    path.write_text(json.dumps(otlp_json(spans)))
    obj = replayed(tmp_path, path)
    check(obj, passages, [0, 1, 2])
    assert obj["template"] == "the logged chat messages, in the generator's chat template"
    assert (tmp_path / "out.csv").read_text().count(passages[1].id) >= 1
    # the findings go back as spans of the original trace, for the user's trace viewer
    (written,) = sorted((tmp_path / "spans").iterdir())
    found = json.loads(written.read_text())["resourceSpans"][0]["scopeSpans"][0]["spans"]
    assert {s["traceId"] for s in found} == {f"{spans[0].context.trace_id:032x}"}
    attrs = {a["key"]: a["value"] for s in found for a in s["attributes"]}
    assert attrs["rag_loupe.replay.leaned_on"] == {"stringValue": obj["leaned_on"]}
    assert attrs["rag_loupe.replay.reproduced"] == {"boolValue": obj["reproduced"]}


@pytest.mark.slow
def test_a_llama_index_query_engine_trace_replays_from_protobuf(tmp_path, passages):
    spans = llama_index_spans(passages)
    data = otlp_json(spans)
    key = "retrieval.documents.{}.document.content"
    retrieved = [s for s in spans if key.format(0) in s.attributes]
    order = [
        [p.text for p in passages].index(retrieved[0].attributes[key.format(i)]) for i in range(3)
    ]  # the mock embedding's order, which the prompt keeps
    path = tmp_path / "llama.pb"
    path.write_bytes(otlp_message(data).SerializeToString())
    obj = replayed(tmp_path, path)
    check(obj, passages, order)
    assert obj["template"] == "the logged prompt"
    assert [d["id"] for d in obj["documents"]] == [passages[i].id for i in order]
