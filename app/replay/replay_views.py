"""The Replay page's parts: the trace file kept on the server, the background job that replays it
(resumable: results are appended to a file named by the trace file's content and the stack), the
table of every trace, one trace's findings, and the detour that opens a trace's documents in
Citations or Token vs Sequence."""

from __future__ import annotations

import hashlib
from pathlib import Path

import pandas as pd
import plotly.graph_objects as go
import streamlit as st

from app import state
from app.ui import charts, detours, jobs
from app.ui.safe_text import md_text, plot_text
from app.ui.sidebar import K_RANGE
from rag_core.loupe.evaluation import parse_question_line
from rag_core.loupe.indexes import build_user_index
from rag_core.loupe.replay import SUFFIXES, Imported, ReplayFileError, read_done, read_traces, replay_all
from rag_core.loupe.storage import caches
from rag_core.loupe.vocabulary import Passage, p_text

SESSION_JOB = "replay_job"  # the session's own replay: (job name, results file)
TYPES = sorted(s.lstrip(".") for s in SUFFIXES)


def keep_upload(name: str, data: bytes) -> Path:
    """An uploaded trace file kept in the cache folder under its content's hash (the same file
    uploaded again is the same path, so its replay resumes)."""
    digest = hashlib.sha1(data).hexdigest()[:16]
    path = caches.folder("replay") / f"{digest}{Path(name).suffix.lower()}"
    if not path.exists():
        path.write_bytes(data)
    return path


def expected_answers(data: bytes | None) -> dict[str, list[str]]:
    """Expected answers by question (lines as Eval reads them)."""
    if not data:
        return {}
    rows = [parse_question_line(line) for line in data.splitlines()]
    return {" ".join(q.question.split()).casefold(): q.answers for q in rows if q is not None}


def with_expected(imported: Imported, answers: dict[str, list[str]]) -> Imported:
    for t in imported.traces:
        t.expected = answers.get(" ".join(t.question.split()).casefold(), t.expected)
    return imported


def start(source: Path, answers: dict[str, list[str]], orders: bool) -> None:
    """Replay every trace of `source` in the background on the session's stack: a job of its own
    per file, stack and expected answers (two sessions replaying the same file share it; another
    file is another job), its results appended to a file it resumes from."""
    if not source.exists():
        raise ReplayFileError(f"{source.name}: no such file or folder")
    models, stack = state.models(), state.stack_key()
    key = hashlib.sha1(f"{source.resolve()}|{stack}|{orders}|{sorted(answers.items())}".encode()).hexdigest()[
        :16
    ]
    store = caches.folder("replay") / f"results-{key}.jsonl"

    def work(progress):
        progress(f"Reading {md_text(source.name)}…", 0.0)
        imported = with_expected(read_traces(source), answers)  # a file that cannot be read: the job's error
        if not imported.traces:
            raise ReplayFileError(f"{source.name}: no trace that can be replayed")
        return replay_all(models.generator, imported, store, orders, progress=progress, lock=models.lock)

    name = f"replay-{key}"
    jobs.start(name, work, label=f"Replay of {md_text(source.name)} · {md_text(state.stack_name())}")
    st.session_state[SESSION_JOB] = (name, str(store))


def session_results() -> tuple[jobs.Job | None, list[dict]]:
    """The session's replay job and its results: the finished list, or while it runs and after a
    Cancel, the traces it has written so far."""
    name, store = st.session_state.get(SESSION_JOB, (None, None))
    job = jobs.get(name) if name else None
    if job is None:
        return None, []
    if job.result is not None:
        return job, job.result
    return job, list(read_done(Path(store)).values())


def table(objects: list[dict], failures_only: bool) -> pd.DataFrame:
    """One row per trace: what the replay found."""
    rows = []
    for o in objects:
        fired = [v["code"] for v in o.get("verdicts", []) if v["fired"]]
        low = bool(o.get("confidence", {}).get("low"))
        failed = o.get("skipped") or not o.get("reproduced") or fired or low or o.get("correct") is False
        if failures_only and not failed:
            continue
        rows.append(
            {
                "where": o.get("source", ""),
                "question": o.get("question", ""),
                "logged answer": o.get("answer", ""),
                "prompt": o.get("template", ""),
                "reproduced": None if o.get("skipped") else bool(o.get("reproduced")),
                "p(logged)": None if o.get("skipped") else p_text(o["p_answer"]),
                "leaned on": o.get("leaned_on") or "",
                "verdicts": ", ".join(fired),
                "low confidence": None if o.get("skipped") else low,
                "skipped": o.get("skipped") or "",
            }
        )
    return pd.DataFrame(rows)


def worth_chart(o: dict) -> go.Figure:
    """Per document: p of the logged answer without it, beside p with every document, and the
    posterior of the document alone in the generator's own reading."""
    docs = o["documents"]
    ticks = [f"{d['position']}. {plot_text(d['title'], 18)}" for d in docs]
    fig = go.Figure()
    fig.add_bar(
        x=ticks,
        y=[d["p_without"] for d in docs],
        name="p(logged answer) without it",
        hovertemplate="%{x}<br>without it: %{y:.3g}<extra></extra>",
    )
    fig.add_bar(
        x=ticks,
        y=[d["posterior"] for d in docs],
        name="posterior p(z|x,y), alone",
        hovertemplate="%{x}<br>posterior: %{y:.3g}<extra></extra>",
    )
    fig.add_hline(y=o["p_answer"], line_dash="dash", annotation_text="with every document")
    fig.update_layout(
        barmode="group",
        height=340,
        margin={"t": 40, "b": 10},
        yaxis_title="probability",
        title={"text": f"Read with {plot_text(o['template'], 90)}", "font": {"size": 12}},
    )
    return fig


def findings(o: dict) -> None:
    """One trace: the answers, the chart, the verdicts, the documents (all text shown as text)."""
    st.caption(
        f"Imported trace ({md_text(o['source'])}), replayed by {md_text(o['generator'])} with "
        f"{md_text(o['template'])}."
    )
    cols = st.columns(4)
    cols[0].metric("Logged answer", md_text(o["answer"]) or "(empty)")
    cols[1].metric(
        "Replay's answer",
        md_text(o["replayed"]) or "(empty)",
        "reproduced" if o["reproduced"] else "differs",
        delta_color="off",
    )
    cols[2].metric("p(logged answer)", p_text(o["p_answer"]))
    cols[3].metric(
        "With no document",
        md_text(o["closed_book"]) or "(empty)",
        f"p(logged) = {p_text(o['p_closed'])}",
        delta_color="off",
    )
    if o["confidence"]["low"]:
        st.warning("Low confidence: " + md_text("; ".join(o["confidence"]["reasons"])))
    st.plotly_chart(worth_chart(o), key="replay_worth", config=charts.NO_BAR)
    for v in o["verdicts"]:
        mark = {True: "🔴", False: "⚪", None: "·"}[v["fired"]]
        st.text(f"{mark} {v['code']}: {v['summary']}")
    frame = pd.DataFrame(
        [
            {
                k: d[k]
                for k in ("position", "id", "title", "p_without", "worth", "p_alone", "posterior", "text")
            }
            for d in o["documents"]
        ]
    )
    st.dataframe(frame, hide_index=True, width="stretch")
    if o["not_in_prompt"]:
        st.text("Retrieved but not in the prompt: " + ", ".join(o["not_in_prompt"]))


def open_documents(o: dict, page: str, here: str) -> None:
    """Button callback: the trace's documents as a user index of their own, then a detour to `page`
    with its question, that index and K = the documents (our retriever orders them there)."""
    passages = [Passage(d["id"], d["title"], d["text"]) for d in o["documents"]]
    name = "replay-" + hashlib.sha1(o["trace_id"].encode()).hexdigest()[:8]
    build_user_index(passages, state.models().encoder, name, replace=True)
    state.forget_index(name)
    note = (
        f"an imported trace ({o['source']}), its {len(passages)} documents as an index of their own, "
        f"read by {state.stack_name()}"
        + (
            f" (K at most {K_RANGE[1]}: the top {K_RANGE[1]} by our retriever)"
            if len(passages) > K_RANGE[1]
            else ""
        )
    )
    detours.detour(
        here, "Replay", note, question=o["question"], index_name=name, k=min(len(passages), K_RANGE[1])
    )
    st.session_state["replay_goto"] = page
