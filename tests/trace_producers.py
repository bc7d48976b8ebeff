"""Real producers of the traces Replay imports, for its tests: a LangChain chain (`langchain-core`: a
retriever over corpus passages, a chat prompt, a fake chat model with a fixed answer) and a
LlamaIndex query engine (`llama-index-core`, a fixed-answer LLM), each instrumented with
OpenInference; their spans come from the OpenTelemetry SDK's in-memory exporter."""

from __future__ import annotations

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

QUESTION = "Who wrote Moby-Dick?"
ANSWER = "Herman Melville"
TITLES = ("Pride and Prejudice", "Moby-Dick", "Mona Lisa")  # the answer's article second


def corpus_passages():
    """The three articles' first passages, the answer's second."""
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
            [
                ("system", "Answer with a short phrase from the context."),
                ("human", "{context}\n\nQuestion: {question}"),
            ]
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
