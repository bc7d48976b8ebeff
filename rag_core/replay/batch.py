"""Many traces replayed in one run, with progress, a way to stop, and a resume: each finished trace
is appended to a JSON Lines file at once, and a run over the same file with the same generator
reads back what it holds instead of computing it again (`replay --json OUT` resumes from OUT; the
Replay page's background job from its own file). A stop comes from the progress callback (the app's
Cancel raises there): what was appended stays."""

from __future__ import annotations

import hashlib
import json
from contextlib import AbstractContextManager, nullcontext
from pathlib import Path

from rag_core.config import Progress
from rag_core.errors import first_line
from rag_core.replay.records import Imported, LoggedTrace, Skipped
from rag_core.replay.report import replay_json, skipped_json
from rag_core.replay.run import replay
from rag_core.storage.files import append_line


def trace_key(generator: str, orders: bool, t: LoggedTrace) -> str:
    """What a stored result answers: this trace (its text too) on this generator, with or without orders."""
    text = json.dumps([t.question, t.answer, t.prompt, t.messages, [d.text for d in t.documents], t.expected])
    return f"{generator}|{int(orders)}|{t.source}|{t.trace_id}|{hashlib.sha1(text.encode()).hexdigest()[:16]}"


def read_done(path: Path | None) -> dict[str, dict]:
    """The results a file already holds, by key (a line cut short by a stop is passed over)."""
    done = {}
    if path is not None and path.is_file():
        for line in path.read_text(encoding="utf-8").splitlines():
            try:
                o = json.loads(line)
            except ValueError:
                continue
            if isinstance(o, dict) and o.get("key"):
                done[o["key"]] = o
    return done


def replay_all(
    gen,
    imported: Imported,
    store: Path | None = None,
    orders: bool = False,
    limit: int | None = None,
    progress: Progress | None = None,
    lock: AbstractContextManager | None = None,
) -> list[dict]:
    """Every trace replayed (the first `limit`), the skipped ones listed: one JSON object each, the
    unreadable ones first. `store`: the JSON Lines file results are appended to and resumed from;
    `lock`: held around each trace's replay (the app's models lock: other sessions' questions go
    between two traces)."""
    traces = imported.traces[:limit] if limit else imported.traces
    done = read_done(store)
    out = [skipped_json(s) for s in imported.skipped]
    for i, t in enumerate(traces):
        key = trace_key(gen.id, orders, t)
        if key not in done:
            try:
                with lock or nullcontext():
                    o = replay_json(replay(gen, t, orders))
            except (
                Exception
            ) as e:  # a prompt too long, a chat template that refuses the roles: listed, not fatal
                o = skipped_json(Skipped(t.trace_id, t.source, first_line(e))) | {
                    "question": t.question,
                    "answer": t.answer,
                }
            o["key"] = key
            if store is not None:
                append_line(store, json.dumps(o, ensure_ascii=False))
            done[key] = o
        out.append(done[key])
        if progress is not None:
            progress(f"replayed {i + 1} of {len(traces)} traces", (i + 1) / max(len(traces), 1))
    return out
