"""Eval: the latest evaluation run (closed-book, RAG-Token, RAG-Sequence), why RAG answers were
wrong, a drill-down to the Ask page, and a small run from here."""

import hashlib

import pandas as pd
import streamlit as st

from app import state
from app.eval import eval_job, eval_views, training_effect
from app.ui import jobs, views
from app.ui.safe_text import md_text
from rag_core.loupe.evaluation import questions as question_file
from rag_core.loupe.evaluation import runs as ev
from rag_core.loupe.evaluation import shipped_runs
from rag_core.loupe.vocabulary import ASSETS

SPLITS = {
    "dev (for choosing prompts and settings)": ASSETS / "eval" / "dev.jsonl",
    "test (held out: for reporting)": ASSETS / "eval" / "test.jsonl",
}

st.title("Eval")
st.caption(
    "Exact match (SQuAD normalisation, any gold answer), answer contained, and answer-recall@K of the "
    "retrieved passages. Runs come from `python -m rag_core eval QUESTIONS.jsonl` or from the form below."
)
eval_views.follow_open()  # a drill-down's click: go to the Ask page


def _chosen_questions(upload, split: str) -> tuple[list, str, int]:
    """(questions, file name, malformed lines skipped) from the upload or the shipped split."""
    if upload is None:
        questions, skipped = question_file.read_questions(SPLITS[split])
        return questions, str(SPLITS[split].relative_to(ASSETS.parent)), skipped
    lines = upload.getvalue().splitlines()
    questions = [q for q in map(question_file.parse_question_line, lines) if q is not None]
    if not questions:
        raise question_file.EvalDataError(f"no usable question in {upload.name}")
    return questions, upload.name, sum(1 for line in lines if line.strip()) - len(questions)


with st.expander("Run a small evaluation here", expanded=not ev.saved_runs()):
    asked = state.answer_settings()
    split = st.radio("Shipped question set", list(SPLITS), key="eval_split", horizontal=True)
    upload = st.file_uploader(
        "Or your own questions JSONL (instead of the shipped set)",
        type=["jsonl", "json", "txt"],
        key="eval_upload",
    )
    n = st.slider(
        "Questions (the first N)",
        1,
        20,
        5,
        key="eval_n",
        help="Each question costs a few seconds to a minute on a CPU: closed-book, both decodings and "
        "the checks of wrong answers.",
    )
    run_label = eval_views.run_intro(asked, shipped=upload is None)
    job = jobs.get("eval")
    if st.button(
        run_label,
        type="primary",
        key="eval_run",
        disabled=job is not None and job.running,
        help="Runs in the background: other pages stay usable, and an interrupted run resumes.",
    ):
        try:
            questions, name, skipped = _chosen_questions(upload, split)
        except question_file.EvalDataError as e:
            st.error(str(e))
        else:
            job = jobs.start(
                "eval",
                eval_job.eval_work(state.pipeline(asked.index), questions[:n], asked, name, skipped),
                label=f"Evaluation run · {md_text(state.stack_name())}",
            )  # jobs are shown to every session
            st.session_state["eval_job"] = job.id
            st.rerun()
    if job is not None and not job.running and job.id == st.session_state.get("eval_job"):
        if job.error:
            st.error(f"The run stopped: {job.error}")
        elif job.cancelled:
            st.warning(
                "The run was cancelled; its questions so far are kept and the same run resumes from them."
            )
    jobs.progress_panel("eval")

# this stack's runs on this machine, newest first, then the shipped ones
runs = eval_views.runs_of(state.stack_spec())
if job is not None and not job.running and job.result and job.id == st.session_state.pop("eval_job", None):
    st.session_state["eval_selected"] = job.result  # this session's new run, selected once
if not runs:
    st.info(
        "No evaluation run yet. Run `python -m rag_core eval assets/eval/dev.jsonl` or use the form above."
    )
    st.stop()
# The selector is a new widget whenever the list of runs changes, so the browser never sends back a
# choice made in an older list (which would switch the page back to the old run on the next click).
# The browser sends a choice back as its label, so two runs never share one.
labels = {p: eval_views.run_label(p) for p in runs}
repeated = {text for text in labels.values() if list(labels.values()).count(text) > 1}
labels = {p: f"{text} · {p.stem}" if text in repeated else text for p, text in labels.items()}
chosen = st.session_state.get("eval_selected")
path = st.selectbox(
    "Run",
    runs,
    index=runs.index(chosen) if chosen in runs else 0,
    format_func=labels.get,
    key="eval_pick_" + hashlib.sha1("|".join(p.name for p in runs).encode()).hexdigest()[:10],
)
st.session_state["eval_selected"] = path
run = ev.load_run(path)
if run is None:
    st.error(f"{md_text(path.name)} cannot be read; run the evaluation again.")
    st.stop()
summary = run.summary()
if shipped_runs.is_shipped(path):
    st.info(
        "A shipped reference run of the held-out test split, made with today's models, prompt, passages and "
        "settings (checked by fingerprint). Runs made on this machine are listed above it.",
        icon=":material/inventory_2:",
    )

st.subheader("Summary")
rows = [
    {
        "mode": mode,
        "EM": m["em"],
        "contained": m["contained"],
        f"recall@{summary['k']}": m["recall"],
        "questions": m["n"],
    }
    for mode, m in summary["modes"].items()
]
pct = {
    c: st.column_config.ProgressColumn(c, min_value=0.0, max_value=1.0, format="percent")
    for c in ("EM", "contained", f"recall@{summary['k']}")
}
views.table(pd.DataFrame(rows), hide_index=True, width="stretch", column_config=pct)
if run.settings.get("skipped"):
    st.caption(f"{run.settings['skipped']} malformed lines of the questions file were skipped.")

st.subheader("Why RAG answers were wrong")

counts = eval_views.verdict_counts(summary)
views.table(counts, hide_index=True, width="stretch")
st.caption("Verdicts can overlap. Open a question on the Ask page to see each verdict's evidence.")
eval_views.retrieval(run, summary)
eval_views.confidence(run, summary)
eval_views.stuffed(run, summary)

st.subheader("Questions")
table = eval_views.question_table(run)
only_wrong = st.toggle("Only questions RAG got wrong", key="eval_wrong")
if only_wrong:
    table = table[~(table.get("rag-token ✓", True) & table.get("rag-sequence ✓", True))]
views.table(table, views.widths({c: w for c, w in eval_views.QUESTION_WIDTHS.items() if c in table.columns}))
views.export_buttons(run.frame(), "eval", path.stem, "eval_export", "rows")

st.subheader("Drill down")
questions = list(table["question"]) or [r.question for r in run.results]
st.selectbox("Question", questions, key="eval_drill")
eval_views.open_button("eval_open", "eval_drill", run)

eval_views.compare(runs, labels, path)
training_effect.before_after()
