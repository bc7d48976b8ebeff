"""One OpenInference trace (its spans) as the question, documents, prompt and answer Replay reads.

- the question: the root CHAIN span's `input.value` (plain text, or JSON with a question field);
- the documents: the last RERANKER's `reranker.output_documents.N.document.*` (what reached the
  next step), else every RETRIEVER span's `retrieval.documents.N.document.*`, each text once, first
  seen first; where the prompt was logged, Replay keeps those whose text reached it (`prompt_slots`);
- the prompt and the answer: the last LLM span that logged a prompt (`llm.input_messages.N.message.*`,
  else `llm.prompts`, else a plain-text `input.value`) and its output (`llm.output_messages.0`,
  else `output.value`); without an LLM span, the root's output;
- an expected answer, where a span's `metadata` carries one (`expected`, `reference`, `ground_truth`).
"""

from __future__ import annotations

import json
import re
from collections import defaultdict

from rag_core.replay.records import Imported, LoggedDocument, LoggedTrace, Skipped, unique_ids
from rag_core.replay.spans import Span

QUESTION_KEYS = ("question", "query", "query_str", "input", "q")
EXPECTED_KEYS = ("expected", "reference", "ground_truth", "answers")
DOCS = re.compile(r"^(retrieval\.documents|reranker\.output_documents)\.(\d+)\.document\.(\w+)$")
MESSAGES = re.compile(r"^llm\.input_messages\.(\d+)\.message\.(role|content)$")


def _json(text):
    if isinstance(text, str) and text[:1] in '{["':
        try:
            return json.loads(text)
        except ValueError:
            return None
    return None


def question_of(value) -> str | None:
    """The question in an `input.value`: the text itself, or a question field of its JSON.

    >>> question_of("Who?"), question_of('{"query_str": "Who?"}'), question_of('{"a": {"question": "Q"}}')
    ('Who?', 'Who?', 'Q')
    """
    parsed = _json(value)
    if parsed is None:
        return value.strip() if isinstance(value, str) and value.strip() else None
    if isinstance(parsed, str):
        return parsed.strip() or None
    stack = [parsed]
    while stack:
        node = stack.pop(0)
        if isinstance(node, dict):
            for k in QUESTION_KEYS:
                if isinstance(node.get(k), str) and node[k].strip():
                    return node[k].strip()
            stack += list(node.values())
        elif isinstance(node, list):
            stack += node
    return None


def documents_of(span: Span) -> list[LoggedDocument]:
    """The documents one RETRIEVER or RERANKER span logged, in its order."""
    found: dict[tuple[str, int], dict] = defaultdict(dict)
    for key, value in span.attributes.items():
        m = DOCS.match(key)
        if m:
            found[(m.group(1), int(m.group(2)))][m.group(3)] = value
    kinds = {kind for kind, _ in found}
    kind = "reranker.output_documents" if "reranker.output_documents" in kinds else "retrieval.documents"
    out = []
    for (k, i), d in sorted(found.items(), key=lambda kv: kv[0][1]):
        if k != kind or not isinstance(d.get("content"), str):
            continue
        meta = d.get("metadata")
        meta = _json(meta) if isinstance(meta, str) else meta
        meta = meta if isinstance(meta, dict) else {}
        doc_id = d.get("id") or meta.get("id") or meta.get("doc_id") or f"doc{i + 1}"
        title = meta.get("title") or meta.get("file_name") or meta.get("source") or str(doc_id)
        score = d.get("score")
        out.append(LoggedDocument(str(doc_id), str(title), d["content"], _number(score)))
    return out


def _number(value) -> float | None:
    try:
        return None if value is None else float(value)
    except (TypeError, ValueError):
        return None


def prompt_of(span: Span) -> tuple[str | None, list[tuple[str, str]] | None]:
    """The prompt an LLM span logged: (text, None), (None, messages) or (None, None). RAG Loupe's
    own spans (`ask --otlp`, `eval --otlp`) log the question, not a prompt: none."""
    if "rag_loupe.decoding" in span.attributes:
        return None, None
    msgs: dict[int, dict] = defaultdict(dict)
    for key, value in span.attributes.items():
        m = MESSAGES.match(key)
        if m:
            msgs[int(m.group(1))][m.group(2)] = value
    if msgs:
        return None, [
            (str(m.get("role", "user")), str(m.get("content") or "")) for _, m in sorted(msgs.items())
        ]
    prompts = span.attributes.get("llm.prompts")
    if isinstance(prompts, (list, tuple)) and prompts and isinstance(prompts[-1], str):
        return prompts[-1], None
    if isinstance(prompts, str) and prompts:
        return prompts, None
    value = span.attributes.get("input.value")
    if isinstance(value, str) and value and _json(value) is None:
        return value, None
    return None, None


def answer_of(span: Span) -> str | None:
    out = span.attributes.get("llm.output_messages.0.message.content")
    if isinstance(out, str) and out.strip():
        return out.strip()
    value = span.attributes.get("output.value")
    parsed = _json(value)
    if isinstance(parsed, dict):
        for k in ("response", "answer", "output", "text", "content"):
            if isinstance(parsed.get(k), str):
                return parsed[k].strip()
        return None
    return value.strip() if isinstance(value, str) and value.strip() else None


def expected_of(spans: list[Span]) -> list[str] | None:
    for s in spans:
        meta = s.attributes.get("metadata")
        meta = _json(meta) if isinstance(meta, str) else meta
        if isinstance(meta, dict):
            for k in EXPECTED_KEYS:
                v = meta.get(k)
                if isinstance(v, str) and v.strip():
                    return [v.strip()]
                if isinstance(v, list) and v and all(isinstance(a, str) for a in v):
                    return list(v)
    return None


def trace_of(trace_id: str, spans: list[Span]) -> LoggedTrace | Skipped:
    """One trace's spans as a LoggedTrace, or why it cannot be replayed."""
    where = f"trace {trace_id[:12]}"
    ids = {s.span_id for s in spans}
    spans = sorted(spans, key=lambda s: s.start)
    roots = [s for s in spans if not s.parent_id or s.parent_id not in ids]
    root = roots[0] if roots else spans[0]  # parent links in a loop: the earliest span stands for the root
    question = question_of(root.attributes.get("input.value"))
    rerankers = [s for s in spans if s.kind == "RERANKER" and documents_of(s)]
    found = (
        [documents_of(rerankers[-1])]
        if rerankers
        else [documents_of(s) for s in spans if s.kind == "RETRIEVER"]
    )
    documents, seen = [], set()
    for d in (d for docs in found for d in docs):  # several retrievals: each text once, first seen first
        if d.text not in seen:
            seen.add(d.text)
            documents.append(d)
    documents = unique_ids(documents)
    if question is None:
        retrievers = [s for s in spans if s.kind == "RETRIEVER"]
        question = question_of(retrievers[0].attributes.get("input.value")) if retrievers else None
    llms = [s for s in spans if s.kind == "LLM"]
    prompted = [s for s in llms if prompt_of(s) != (None, None)]
    ours = [s for s in llms if s.attributes.get("rag_loupe.decoding") == "stuffed"]  # our own export
    llm = prompted[-1] if prompted else (ours or llms or [None])[-1]
    prompt, messages = prompt_of(llm) if llm is not None else (None, None)
    answer = (answer_of(llm) if llm is not None else None) or answer_of(root)
    missing = [
        what
        for what, ok in (("question", question), ("retrieved documents", documents), ("answer", answer))
        if not ok
    ]
    if missing:
        return Skipped(trace_id, where, f"no {' and no '.join(missing)} in its spans")
    model = llm.attributes.get("llm.model_name") if llm is not None else None
    return LoggedTrace(
        trace_id, question, documents, answer, prompt, messages, model, expected_of(spans), where
    )


def traces_of(spans: list[Span]) -> Imported:
    """Every trace in a list of spans, grouped by trace id, in the order each first appears."""
    groups: dict[str, list[Span]] = {}
    for s in spans:
        groups.setdefault(s.trace_id, []).append(s)
    out = Imported()
    for trace_id, group in groups.items():
        t = trace_of(trace_id, group)
        (out.skipped if isinstance(t, Skipped) else out.traces).append(t)
    return out
