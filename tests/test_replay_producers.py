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
from langchain_core.documents import Document
from langchain_core.language_models.fake_chat_models import FakeListChatModel
from langchain_core.output_parsers import StrOutputParser
from langchain_core.prompts import ChatPromptTemplate
from langchain_core.retrievers import BaseRetriever
from langchain_core.runnables import RunnablePassthrough
from llama_index.core import Settings, VectorStoreIndex
from llama_index.core.embeddings import MockEmbedding
from llama_index.core.llms import CompletionResponse, CustomLLM, LLMMetadata
from llama_index.core.llms.callbacks import llm_completion_callback
from llama_index.core.schema import TextNode
from openinference.instrumentation.langchain import LangChainInstrumentor
from openinference.instrumentation.llama_index import LlamaIndexInstrumentor
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from rag_core.corpus import load_wiki
from rag_core.otlp import otlp_json, otlp_message

from conftest import run_cli

QUESTION = "Who wrote Moby-Dick?"
ANSWER = "Herman Melville"
TITLES = ("Pride and Prejudice", "Moby-Dick", "Mona Lisa")  # the answer's article second


@pytest.fixture(scope="module")
def passages():
    by_title = {}
    for p in load_wiki():
        by_title.setdefault(p.title, p)
    return [by_title[t] for t in TITLES]


def exporter_and_provider():
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    return exporter, provider


class ListRetriever(BaseRetriever):
    docs: list

    def _get_relevant_documents(self, query, *, run_manager=None):
        return self.docs


def langchain_spans(passages):
    exporter, provider = exporter_and_provider()
    instrumentor = LangChainInstrumentor()
    instrumentor.instrument(tracer_provider=provider)
    try:
        docs = [Document(page_content=p.text, metadata={"id": p.id, "title": p.title}) for p in passages]
        prompt = ChatPromptTemplate.from_messages(
            [("system", "Answer with a short phrase from the context."), ("human", "{context}\n\nQuestion: {question}")]
        )
        context = ListRetriever(docs=docs) | (lambda ds: "\n\n".join(d.page_content for d in ds))
        chain = (
            {"context": context, "question": RunnablePassthrough()}
            | prompt
            | FakeListChatModel(responses=[ANSWER])
            | StrOutputParser()
        )
        assert chain.invoke(QUESTION) == ANSWER
    finally:
        instrumentor.uninstrument()
    return exporter.get_finished_spans()


class FixedLLM(CustomLLM):
    answer: str = ANSWER

    @property
    def metadata(self):
        return LLMMetadata(model_name="fixed")

    @llm_completion_callback()
    def complete(self, prompt, formatted=False, **kwargs):
        return CompletionResponse(text=self.answer)

    @llm_completion_callback()
    def stream_complete(self, prompt, formatted=False, **kwargs):
        yield CompletionResponse(text=self.answer, delta=self.answer)


def llama_index_spans(passages):
    exporter, provider = exporter_and_provider()
    instrumentor = LlamaIndexInstrumentor()
    instrumentor.instrument(tracer_provider=provider)
    try:
        Settings.llm, Settings.embed_model = FixedLLM(), MockEmbedding(embed_dim=8)
        Settings.tokenizer = str.split  # no tokenizer download: count words
        nodes = [TextNode(text=p.text, id_=p.id, metadata={"title": p.title}) for p in passages]
        engine = VectorStoreIndex(nodes).as_query_engine(similarity_top_k=len(nodes))
        assert str(engine.query(QUESTION)) == ANSWER
    finally:
        instrumentor.uninstrument()
    return exporter.get_finished_spans()


def replayed(tmp_path, file) -> dict:
    out = tmp_path / "out.jsonl"
    got = run_cli("replay", file, "--json", out, "--csv", tmp_path / "out.csv", "--threads", "2")
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


@pytest.mark.slow
def test_a_llama_index_query_engine_trace_replays_from_protobuf(tmp_path, passages):
    spans = llama_index_spans(passages)
    data = otlp_json(spans)
    key = "retrieval.documents.{}.document.content"
    retrieved = [s for s in spans if key.format(0) in s.attributes]
    order = [
        [p.text for p in passages].index(retrieved[0].attributes[key.format(i)])
        for i in range(3)
    ]  # the mock embedding's order, which the prompt keeps
    path = tmp_path / "llama.pb"
    path.write_bytes(otlp_message(data).SerializeToString())
    obj = replayed(tmp_path, path)
    check(obj, passages, order)
    assert obj["template"] == "the logged prompt"
    assert [d["id"] for d in obj["documents"]] == [passages[i].id for i in order]
