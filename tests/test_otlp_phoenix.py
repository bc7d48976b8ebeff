"""`ask --otlp`'s spans load into Arize Phoenix: a real Phoenix server, started here on free local
ports with a working folder of its own, takes one query's OTLP (the tiny stack's trace, sent as
OTLP/HTTP protobuf), and Phoenix's client reads the spans back with the span kinds, the retrieved
documents (id, content, score, metadata) and our `rag_loupe.*` attributes as the trace has them.

Phoenix is required here (CI installs it): its client is in .venv (requirements-phoenix.txt), its
server in .venv-phoenix (requirements-phoenix-server.txt: its dependencies need other pins than
requirements.txt's); `make test` installs both. A missing client or server fails this test.

Replay reads the spans Phoenix hands back: a LangChain chain's trace sent to the server, its spans
dataframe read back through the client and saved as Parquet, is the same trace as the OTLP it was
sent as, and `replay` reads it."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import time
import urllib.error
import urllib.request

import pytest
from phoenix.client import Client

from rag_core import marginals
from rag_core.config import AnswerSettings
from rag_core.decoding.stuffed import p_without
from rag_core.marginals import prob
from rag_core.otlp import otlp_json, otlp_message, trace_otlp
from rag_core.replay.sources import read_traces
from rag_core.trace import log_p_under

from conftest import ROOT, run_cli, tiny_pipeline
from trace_producers import ANSWER, corpus_passages, langchain_spans
from trace_producers import QUESTION as QUESTION_LC

SERVER = ROOT / ".venv-phoenix" / "bin" / "phoenix"
QUESTION = "Who wrote Moby-Dick?"
READINGS = ("rag-token", "rag-sequence", "stuffed")
# Phoenix keeps numbers as doubles and we send doubles, so they come back as sent; the margin
# covers only the decimal text of the JSON between its store and its client.
REL = 1e-12


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Phoenix:
    """A Phoenix server process on free local ports, its database and log in `folder`."""

    def __init__(self, folder):
        assert SERVER.is_file(), f"no Phoenix server at {SERVER}: `make test` installs it"
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.log_path = folder / "phoenix.log"
        env = os.environ | {
            "PHOENIX_WORKING_DIR": str(folder),
            "PHOENIX_HOST": "127.0.0.1",
            "PHOENIX_PORT": str(self.port),
            "PHOENIX_GRPC_PORT": str(free_port()),
            "PHOENIX_ALLOW_EXTERNAL_RESOURCES": "false",
            "PHOENIX_TELEMETRY_ENABLED": "false",
            "PHOENIX_DISABLE_AGENT_ASSISTANT": "true",
            "PHOENIX_ENABLE_MCP_SERVER": "false",
        }
        with open(self.log_path, "wb") as log:  # a file, not a pipe: the server can never block on it
            self.proc = subprocess.Popen(
                [str(SERVER), "serve"], env=env, stdout=log, stderr=subprocess.STDOUT, start_new_session=True
            )

    def log(self) -> str:
        return self.log_path.read_text(encoding="utf-8", errors="replace")[-3000:]

    def wait_ready(self, timeout: float = 120.0) -> None:
        end = time.monotonic() + timeout
        while time.monotonic() < end:
            assert self.proc.poll() is None, f"Phoenix exited ({self.proc.returncode}):\n{self.log()}"
            try:
                with urllib.request.urlopen(self.url + "/healthz", timeout=2) as r:
                    if r.status == 200:
                        return
            except (urllib.error.URLError, OSError):
                pass
            time.sleep(0.25)
        pytest.fail(f"Phoenix was not ready in {timeout:.0f} s:\n{self.log()}")

    def stop(self) -> None:
        if self.proc.poll() is None:
            os.killpg(self.proc.pid, signal.SIGTERM)  # its own session: the server and any child
            try:
                self.proc.wait(timeout=20)
            except subprocess.TimeoutExpired:
                os.killpg(self.proc.pid, signal.SIGKILL)
                self.proc.wait()


@pytest.fixture(scope="module")
def phoenix(tmp_path_factory):
    """Started first, so it boots while the trace below is made; the test waits for it."""
    server = Phoenix(tmp_path_factory.mktemp("phoenix"))
    yield server
    server.stop()


@pytest.fixture(scope="module")
def trace(tmp_path_factory):
    pipeline = tiny_pipeline(tmp_path_factory.mktemp("tiny-phoenix"))[0]
    return pipeline.run(QUESTION, AnswerSettings(k=3, decode="all", max_new_tokens=4))


def otlp_protobuf(data: dict) -> bytes:
    """Our OTLP/JSON as the protobuf message an OTLP/HTTP receiver takes."""
    return otlp_message(data).SerializeToString()


def send(phoenix: Phoenix, data: dict) -> str:
    """POST our OTLP/JSON to the server as OTLP/HTTP protobuf, once it is ready: the trace id."""
    phoenix.wait_ready()
    request = urllib.request.Request(
        phoenix.url + "/v1/traces",
        data=otlp_protobuf(data),
        headers={"content-type": "application/x-protobuf"},
        method="POST",
    )
    with urllib.request.urlopen(request, timeout=30) as r:
        assert r.status == 200
    return data["resourceSpans"][0]["scopeSpans"][0]["spans"][0]["traceId"]


def documents(attrs: dict) -> list[dict]:
    """The RETRIEVER span's documents from Phoenix's attributes. Phoenix's REST API gives nested
    attributes as dotted keys and parses each document's JSON metadata into keys of its own:
    `retrieval.documents.0.document.metadata.prior`."""
    docs: dict[int, dict] = {}
    for key, value in attrs.items():
        if key.startswith("retrieval.documents."):
            i, _, field = key.removeprefix("retrieval.documents.").partition(".document.")
            doc = docs.setdefault(int(i), {"metadata": {}})
            if field.startswith("metadata."):
                doc["metadata"][field.removeprefix("metadata.")] = value
            else:
                doc[field] = value
    return [docs[i] for i in sorted(docs)]


@pytest.mark.slow  # Phoenix takes 10-25 s to start (its imports alone: 10 s)
def test_phoenix_reads_back_the_query_spans_with_documents_and_our_attributes(phoenix, trace):
    data = json.loads(trace_otlp(trace))
    trace_id = send(phoenix, data)

    client = Client(base_url=phoenix.url)
    end = time.monotonic() + 30  # Phoenix inserts spans in the background, after the POST returns
    while True:
        spans = client.spans.get_spans(project_identifier="default", trace_ids=[trace_id])
        if len(spans) >= 5 or time.monotonic() > end:
            break
        time.sleep(0.2)
    by_name = {s["name"]: s for s in spans}
    assert sorted(by_name) == sorted(["rag_loupe.query", "retrieve", *READINGS]), phoenix.log()
    assert len(spans) == 5
    kinds = {name: s["span_kind"] for name, s in by_name.items()}
    assert kinds == {"rag_loupe.query": "CHAIN", "retrieve": "RETRIEVER"} | {d: "LLM" for d in READINGS}
    root = by_name["rag_loupe.query"]
    assert root["parent_id"] is None
    assert all(s["context"]["trace_id"] == trace_id for s in spans)
    assert all(s["parent_id"] == root["context"]["span_id"] for s in spans if s is not root)

    got = root["attributes"]
    answers = {d: trace.answer(d).answer for d in READINGS}
    assert (got["input.value"], json.loads(got["output.value"])) == (QUESTION, answers)
    assert (got["rag_loupe.index"], got["rag_loupe.k"], got["rag_loupe.scale"]) == ("tiny", 3, trace.scale)

    got = by_name["retrieve"]["attributes"]
    assert got["input.value"] == QUESTION
    assert got["rag_loupe.prior"] == pytest.approx(trace.prior.tolist(), rel=REL)
    posterior = {
        d: marginals.citation(trace.log_prior, trace.answer(d).token_logp).tolist() for d in READINGS[:2]
    }
    docs = documents(got)
    assert len(docs) == trace.k == 3
    for i, (doc, hit) in enumerate(zip(docs, trace.hits)):
        assert (doc["id"], doc["content"]) == (hit.passage.id, hit.passage.text)
        assert doc["score"] == pytest.approx(float(hit.score), rel=REL)
        meta = doc["metadata"]
        assert (meta["rank"], meta["title"]) == (hit.rank, hit.passage.title)
        assert meta["prior"] == pytest.approx(float(trace.prior[i]), rel=REL)
        for d in READINGS[:2]:
            assert meta[f"posterior_{d}"] == pytest.approx(posterior[d][i], rel=REL)

    for d in READINGS:
        got, c = by_name[d]["attributes"], trace.answer(d)
        assert (got["input.value"], got["output.value"]) == (QUESTION, c.answer)
        assert (got["rag_loupe.decoding"], got["rag_loupe.finished"]) == (d, c.finished)
        assert got["rag_loupe.tokens"] == list(c.tokens)
        assert got["rag_loupe.p"] == pytest.approx(prob(log_p_under(c, d, trace.log_prior)), rel=REL)
        assert json.loads(got["llm.invocation_parameters"])["max_new_tokens"] == 4
        if d in posterior:
            assert got["rag_loupe.posterior"] == pytest.approx(posterior[d], rel=REL)
    loo = p_without(trace.stuffed.leave_one_out)
    assert by_name["stuffed"]["attributes"]["rag_loupe.p_without"] == pytest.approx(loo, rel=REL)


@pytest.mark.slow  # the default stack loads for the command
def test_spans_phoenix_hands_back_replay_as_the_otlp_they_came_from(phoenix, tmp_path):
    spans = langchain_spans(corpus_passages())
    data = otlp_json(spans)
    trace_id = send(phoenix, data)
    client = Client(base_url=phoenix.url)
    end = time.monotonic() + 30  # Phoenix inserts spans in the background
    while True:
        frame = client.spans.get_spans_dataframe(project_identifier="default")
        frame = frame[frame["context.trace_id"] == trace_id]
        if len(frame) >= len(spans) or time.monotonic() > end:
            break
        time.sleep(0.2)
    assert len(frame) == len(spans), phoenix.log()
    saved = tmp_path / "phoenix.parquet"
    frame.to_parquet(saved)
    sent = tmp_path / "sent.json"
    sent.write_text(json.dumps(data))
    (returned,) = read_traces(saved).traces
    (direct,) = read_traces(sent).traces
    assert returned == direct  # question, documents (ids from metadata), chat messages, answer
    out = tmp_path / "out.jsonl"
    got = run_cli("replay", saved, "--json", out, "--threads", "2")
    assert got.returncode == 0, got.stderr
    (obj,) = [json.loads(line) for line in out.read_text().splitlines()]
    assert (obj["question"], obj["answer"], obj["leaned_on"]) == (
        QUESTION_LC,
        ANSWER,
        corpus_passages()[1].id,
    )
