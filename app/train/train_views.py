"""The Train page's parts: the query walk (cached per input), its map, and the fine-tuning panel
whose run goes to the shared background worker (`jobs`)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
import streamlit as st

from app import stack, state
from app.train import train_charts
from app.ui import expected_answers, jobs, safe_text, views
from app.ui.sidebar import KEEP
from rag_core.loupe.evaluation import read_questions
from rag_core.loupe.maps import projection
from rag_core.loupe.model_stacks import stacks
from rag_core.loupe.storage import caches
from rag_core.loupe.training import (
    PARTS,
    TrainSettings,
    conditionals,
    discard_damaged,
    file_sha256,
    fine_tune,
    heldout,
    keep_upload,
    query_walk,
    read_manifest,
    run_folder,
    run_state,
)
from rag_core.loupe.vocabulary import ASSETS, AnswerSettings, StackSpec, first_line

TRAIN_FILE = ASSETS / "train" / "questions.jsonl"
# A run started here is measured on dev, the split for choosing; test stays for reporting.
DEV = ASSETS / "eval" / "dev.jsonl"


def _count(path: Path) -> int:
    """Questions in a JSONL file: its non-empty lines."""
    return sum(1 for line in path.read_text(encoding="utf-8").splitlines() if line.strip())


HELD_OUT = {"none": None, f"eval dev split ({_count(DEV)} questions: several minutes before and after)": DEV}
JOB = "train"


@st.cache_resource(show_spinner=False, max_entries=32)
def _conditionals(stack_key: str, question: str, index_name: str, answer: str) -> query_walk.Conditionals:
    """The answer's per-passage conditionals, shared by every walk of this (question, index, answer)."""
    pipe = state.pipeline(index_name)
    return conditionals(pipe, question, answer)


@st.cache_resource(show_spinner="Walking the query (a new passage costs one generator pass)…", max_entries=64)
def walk(
    stack_key: str,
    question: str,
    index_name: str,
    answer: str,
    marginal: str,
    k: int,
    scale: float | None,
    step_size: float,
    steps: int,
    start: tuple[float, ...] | None = None,
) -> query_walk.Walk:
    """The cached walk; `start`: a query vector moved by hand on the Map, instead of q(question)."""
    cond = _conditionals(stack_key, question, index_name, " ".join(answer.split()))
    return query_walk.walk(
        state.pipeline(index_name),
        question,
        answer,
        marginal,
        k,
        scale,
        step_size,
        steps,
        start=None if start is None else np.array(start, dtype=np.float32),
        conditionals=cond,
    )


def moved_start(question: str, index_name: str) -> tuple[float, ...] | None:
    """The query vector the user moved on the Map for this question and index, if any."""
    moved = st.session_state.get("_moved_q")
    if moved and moved["question"] == question and moved["index"] == index_name:
        return tuple(moved["vector"])
    return None


@st.cache_resource(show_spinner="Laying out the map…", max_entries=8)
def _layout(index_name: str, stamp: str) -> tuple[projection.PassageMap, dict[str, int]]:
    """The shipped UMAP layout where it covers the index, PCA (instant) otherwise; and id -> row."""
    idx = state.index(index_name)
    x = np.asarray(idx.vectors, dtype=np.float32)  # (N, D)
    pmap = projection.from_shipped_base(idx, x, 2) or projection.fit_map(idx, "pca", 2)
    return pmap, {p.id: i for i, p in enumerate(idx.passages)}


def walk_map(w: query_walk.Walk, index_name: str, cloud_size: int = 1500):
    """The walk on the map, with the `cloud_size` passages nearest the starting query around it."""
    idx = state.index(index_name)
    pmap, row_of = _layout(index_name, f"{idx.manifest.get('ids_checksum')}:{idx.manifest.get('built_at')}")
    path = pmap.place(np.stack([s.query for s in w.steps]), scale=w.scale)  # (S, 2)
    seen = list(
        dict.fromkeys(i for s in w.steps for i in s.ids)
    )  # every passage of any step's top K, in order
    rows = np.array([row_of[i] for i in seen])  # (P,)
    near = np.argsort(-(pmap.vectors @ w.steps[0].query))[:cloud_size]  # (n,) nearest by inner product
    title = {p: idx.passages[r].title for p, r in zip(seen, rows)}
    hover = [f"<b>{safe_text.plot_text(title[p])}</b>" for p in seen]
    first, last = set(w.steps[0].ids), set(w.steps[-1].ids)
    cloud_hover = [safe_text.plot_text(idx.passages[r].title) for r in near]
    fig = train_charts.walk_map(
        pmap.coords[near],
        cloud_hover,
        path,
        pmap.coords[rows],
        hover,
        [p in first for p in seen],
        [p in last for p in seen],
    )
    how = "the shipped UMAP layout" if pmap.shipped else "PCA (no UMAP layout of this index is at hand)"
    return fig, how


def pull_on_map(pmap: projection.PassageMap, question: str, index_name: str, asked: AnswerSettings):
    """Map positions of the query and of the query after one step along the gradient of the
    expected answer: the one typed on the Train page, else the one the Diagnose box would offer;
    (None, None) when there is neither."""
    kept = st.session_state.get("_train_answer")
    if not kept or kept["question"] != question:
        kept = {
            "answer": expected_answers.prefill(question).split("|")[0].strip(),
            "marginal": "sequence",
            "step_size": query_walk.DEFAULT_STEP_SIZE,
        }
    if not kept["answer"].strip():
        return None, None
    w = walk(
        state.stack_key(),
        question,
        index_name,
        kept["answer"],
        kept["marginal"],
        asked.k,
        asked.scale,
        kept["step_size"],
        1,
    )
    a, b = pmap.place(np.stack([w.steps[0].query, w.steps[1].query]), scale=w.scale)  # (dims,) each
    return a, b


def moves_table(w: query_walk.Walk) -> pd.DataFrame:
    """Per step: what entered and left the top K, log p(y|x), the gap, the generator passes."""
    title = {h.passage.id: h.passage.title for s in w.steps for h in s.hits}
    return pd.DataFrame(
        [
            {
                "step": s.step,
                "log p(y|x)": s.log_likelihood,
                "gap": 0.5 * float((s.posterior - s.prior).abs().sum()),
                "entered": ", ".join(title[i] for i in s.entered),
                "left": ", ".join(title[i] for i in s.left),
                "generator passes": s.generator_passes,
            }
            for s in w.steps
        ]
    )


# ------------------------------------------------------------------------------ fine-tuning
@st.cache_resource(show_spinner=False)
def _live() -> list[float]:
    """The loss of the running fine-tune, step by step, for the live curve (one run per server)."""
    return []


def _work(
    stack: StackSpec,
    answering: AnswerSettings,
    settings: TrainSettings,
    questions: Path,
    out: Path,
    held_out: Path | None,
    resume: bool,
):
    """The background job: `fine_tune` with Cancel turned into a stop at the end of the current step
    (with a checkpoint, so the next start resumes) instead of an exception in the middle of it."""

    def work(progress):
        losses, asked = _live(), []
        losses.clear()

        def report(message: str, fraction: float) -> None:
            try:
                progress(message, fraction)
            except jobs.Cancelled:
                asked.append(True)

        return fine_tune(
            stack,
            answering,
            settings,
            questions,
            out,
            held_out,
            force=not resume and out.exists(),
            resume=resume,
            progress=report,
            should_stop=lambda: bool(asked),
            on_step=lambda _, loss: losses.append(loss),
        )

    return work


def _questions_file(upload) -> Path | None:
    if upload is None:
        return TRAIN_FILE
    try:
        path = keep_upload(caches.folder("training"), upload.getvalue())
        read_questions(str(path))
        return path
    except (ValueError, OSError, UnicodeDecodeError) as e:
        why = first_line(e)
        st.error("That question file cannot be used: " + safe_text.md_text(why))  # it may quote the file
        return None


def _run_settings() -> tuple[str, str, int, str]:
    """What trains, the marginal, the steps and the held-out figures.

    They name the run's folder, so they are kept across page visits: a user who started a run and
    looked at another page comes back to that run (its progress, or its resume offer)."""
    c1, c2, c3, c4 = st.columns(4)
    part = c1.selectbox("What trains", PARTS, key="ft_part", persist_state=KEEP)
    marginal = c2.selectbox(
        "Marginal",
        ["sequence", "token"],
        key="ft_marginal",
        format_func=lambda m: f"RAG-{m.title()}",
        persist_state=KEEP,
    )
    steps = int(
        c3.number_input(
            "Steps",
            1,
            500,
            20,
            key="ft_steps",
            help="optimiser steps of 4 questions each",
            persist_state=KEEP,
        )
    )
    held = c4.selectbox("Held-out figures", list(HELD_OUT), key="ft_held", persist_state=KEEP)
    return part, marginal, steps, held


def fine_tune_panel(asked: AnswerSettings) -> None:
    st.subheader("Fine-tune on a question file")
    st.caption(
        "The loop the paper trains with: for each question, retrieve the top K with the current query "
        "encoder, then lower −log p(answer|question) under the chosen marginal. The query encoder learns "
        "through the prior only (passage vectors and index frozen); "
        "the generator learns through LoRA adapters. "
        "It runs in the background on a copy of the models: the rest of the app stays usable."
    )
    part, marginal, steps, held = _run_settings()
    shipped = sum(1 for line in TRAIN_FILE.read_text(encoding="utf-8").splitlines() if line.strip())
    upload = st.file_uploader(
        f"Questions JSONL (empty: the {shipped:,} shipped training questions)",
        type=["jsonl"],
        key="ft_upload",
    )
    questions = _questions_file(upload)
    if questions is None:
        return
    settings = TrainSettings(part=part, marginal=marginal, k=asked.k, steps=steps, scale=asked.scale)
    # a run trains the session's model stack (the models the user is looking at) on the sidebar's
    # index, K and scale; nothing else of the sidebar's
    stack, answering = state.stack_spec(), AnswerSettings(index=asked.index, k=asked.k, scale=asked.scale)
    out = run_folder(caches.folder("training"), settings, file_sha256(questions), stack, asked.index)
    now, job = run_state(out), jobs.get(JOB)
    if job is not None and job.running:
        jobs.progress_panel(JOB)
        _live_curve()
        return
    label = {
        "new": "Start fine-tuning",
        "resume": "Resume from the checkpoint",
        "replace": "Start again",
        "done": "Train again from scratch",
        "damaged": "Start again",
    }[now]
    if now == "damaged":
        st.warning(
            "The files of an earlier run with these settings were damaged (a write was cut short); "
            "starting again replaces them."
        )
    st.caption(
        f"Trains the model {safe_text.md_text(state.stack_name())}, retrieving from the index "
        f"“{safe_text.md_text(asked.index)}” (the sidebar's) with K={asked.k}."
    )
    if st.button(label, key="ft_start", type="primary" if now != "done" else "secondary"):
        if now == "damaged":
            discard_damaged(out)
        jobs.start(
            JOB,
            _work(stack, answering, settings, questions, out, HELD_OUT[held], now == "resume"),
            label=f"Fine-tuning {safe_text.md_text(state.stack_name())} · {out.name}",
        )
        st.rerun()
    if job is not None and job.error:
        st.error("The fine-tuning stopped: " + safe_text.md_text(job.error))
    manifest = read_manifest(out)
    if manifest and manifest.get("losses"):
        result(manifest, out)


def _live_curve() -> None:
    @st.fragment(run_every=2)
    def draw() -> None:
        losses = _live()
        if losses:
            st.plotly_chart(
                train_charts.loss_curve(list(losses)), key="ft_live_loss", config={"displayModeBar": False}
            )

    draw()


def result(m: dict, out: Path) -> None:
    status = (
        "finished" if m.get("status") == "done" else f"stopped at step {m.get('steps_done')} (resume above)"
    )
    st.caption(
        f"Run {m.get('steps_done')}/{m.get('steps')} steps, {status}, {m.get('seconds', 0):.0f} s on "
        f"{m.get('device')}; data {m['data']['file']} ({m['data']['questions']} questions)."
    )
    st.plotly_chart(train_charts.loss_curve(m["losses"]), key="ft_loss", config={"displayModeBar": False})
    if m.get("status") == "done" and m.get("outputs"):
        opened = stack.current().key == stacks.run_stack_key(out)
        st.button(
            "Open this model in the app",
            key="ft_open",
            on_click=stack.open_run,
            args=(str(out),),
            disabled=opened,
            help="Every page then shows the tuned model, read against the passage encoder it was "
            "trained with; the sidebar's Model switches back.",
        )
        if opened:
            st.caption("Every page now shows this model (the sidebar's Model names it).")
        st.code(f'python -m rag_core ask "…" --run {out}', language="bash")
    h = m.get("heldout")
    if h:
        st.caption(
            f"Held out: {h['file']} ({h['before']['n']} questions). Fewer distinct passages and a lower "
            "entropy after training would be the retrieval collapse the paper warns of."
        )
        views.table(
            pd.DataFrame(heldout.comparison_rows(h), columns=["figure", "before", "after"]), hide_index=True
        )
