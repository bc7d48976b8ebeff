"""The plain trace format: JSON Lines, one answered question a line.

    {"question": "...", "documents": [{"id": "...", "title": "...", "text": "...", "score": 0.8}],
     "answer": "...", "prompt": "...", "messages": [{"role": "user", "content": "..."}],
     "model": "...", "expected": "..." or ["...", "..."]}

`prompt`, `messages`, `model`, `expected` are optional; a document needs its `text`. A line that
cannot be read is listed with its number and what is wrong; the others are read (`sources`).

>>> t = trace_of_line({"question": "Who?", "documents": [{"text": "Ann did."}], "answer": "Ann"}, "line 1")
>>> t.documents[0].id, t.expected
('doc1', None)
>>> trace_of_line({"question": "Who?", "answer": "Ann"}, "line 2")
Traceback (most recent call last):
ValueError: missing documents
"""

from __future__ import annotations

from rag_core.replay.records import LoggedDocument, LoggedTrace, unique_ids


def _documents(raw) -> list[LoggedDocument]:
    if not isinstance(raw, list):
        raise ValueError("`documents` is not a list")
    out = []
    for i, d in enumerate(raw):
        if isinstance(d, str):
            d = {"text": d}
        text = d.get("text") or d.get("content") if isinstance(d, dict) else None
        if not isinstance(text, str) or not text.strip():
            raise ValueError(f"document {i + 1} has no text")
        doc_id = str(d.get("id") or f"doc{i + 1}")
        score = d.get("score")
        out.append(
            LoggedDocument(
                doc_id,
                str(d.get("title") or doc_id),
                d.get("text") or d.get("content"),
                float(score) if isinstance(score, (int, float)) else None,
            )
        )
    return out


def trace_of_line(row, where: str) -> LoggedTrace:
    """One line's object as a trace; ValueError names what is missing."""
    if not isinstance(row, dict):
        raise ValueError("not a JSON object")
    missing = [k for k in ("question", "documents", "answer") if not row.get(k) or not str(row[k]).strip()]
    if missing:
        raise ValueError(f"missing {', '.join(missing)}")
    messages = row.get("messages")
    if messages is not None:
        if not isinstance(messages, list) or not all(isinstance(m, dict) for m in messages):
            raise ValueError("`messages` is not a list of {role, content}")
        messages = [(str(m.get("role", "user")), str(m.get("content") or "")) for m in messages]
    expected = row.get("expected")
    expected = [expected] if isinstance(expected, str) else expected
    return LoggedTrace(
        str(row.get("id") or where),
        str(row["question"]),
        unique_ids(_documents(row["documents"])),
        str(row["answer"]),
        row.get("prompt") if isinstance(row.get("prompt"), str) else None,
        messages,
        row.get("model"),
        [str(a) for a in expected] if isinstance(expected, list) and expected else None,
        where,
    )
