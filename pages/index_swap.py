"""Index swap: the paper's §4.5 hot-swap experiment. One frozen model, a 2016 and a 2018 index."""

from pathlib import Path

import streamlit as st

from app import state
from app.index_swap import index_swap_views
from app.ui import jobs, question_box, views
from app.ui.safe_text import md_text
from app.ui.sidebar import KEEP
from rag_core.loupe.index_swap import experiment_of, results, run_experiment, store
from rag_core.loupe.vocabulary import READING_LABELS

ROOT = Path(__file__).resolve().parent.parent
ss = st.session_state
DEFAULT_SWAP_QUESTION = "Who is the President of the United States?"

st.title("Index swap")
st.caption(
    "RAG's knowledge lives in its index, so it can be updated without retraining (Lewis et al. 2020, §4.5): "
    "the same frozen model answers on an index of 31 December 2016 and one of 31 December 2018."
)

# --- pending jump to another page (set by the "explain" and "diagnose" buttons' callbacks) ---
if goto := ss.pop("swap_goto", None):
    st.switch_page(str(ROOT / "pages" / goto))

leaders = store.leaders_frame()
holders = {
    q: (h16, h18) for q, h16, h18 in zip(leaders["question"], leaders["holder_2016"], leaders["holder_2018"])
}
questions = list(leaders["question"])


OWN = "(a question of your own)"


def _pick() -> None:
    if ss["swap_pick"] != OWN:
        ss["swap_question"] = ss["swap_text"] = ss["swap_pick"]


def _asked() -> None:
    ss["swap_question"] = ss.get("swap_text", "")
    ss["swap_pick"] = ss["swap_question"].strip() if ss["swap_question"].strip() in holders else OWN


reading = st.radio(
    "Reading",
    list(index_swap_views.READINGS),
    format_func=index_swap_views.READINGS.get,
    horizontal=True,
    key="swap_reading",
    persist_state=KEEP,  # a detour (Explain, Diagnose) comes back in the reading it left
    help="The paper reads each passage on its own and mixes the answers (RAG-Token, RAG-Sequence); "
    "deployed RAG reads the K passages together in one prompt. The question below and the experiment "
    "run in the reading picked here.",
)
question = ss.get("swap_question", DEFAULT_SWAP_QUESTION)
ss.setdefault("swap_text", question)  # widget state goes with the page; the plain key stays
if ss.get("swap_pick") not in questions or ss["swap_pick"] != question.strip():
    ss["swap_pick"] = (
        question.strip() if question.strip() in holders else OWN
    )  # the picker follows the question
st.selectbox(
    "A world-leader question",
    [OWN, *questions],
    key="swap_pick",
    on_change=_pick,
    help="Positions whose holder changed between the two snapshots (assets/leaders.csv).",
)
with st.form("swap_ask"):
    question_box.field("swap_text")
    st.form_submit_button("Answer on both indexes", type="primary", on_click=_asked)

# The one question's answers go here, above the experiment, but are computed after it: the
# experiment's tables need no model, so they are on screen at once, even while a first start
# converts the generator and builds the year indexes.
one_question = st.container()


# --- the whole experiment ---
st.divider()
st.subheader(f"The experiment: {len(leaders)} positions × 2 indexes")
exp = experiment_of(state.stack_spec(), decode=reading)  # keyed by stack and reading
JOB = f"leaders-{reading}"  # one run per reading: its progress, error and button stay with it
checksums = store.index_checksums()  # the year indexes' passage checksums, from their files: no index built
result = store.cached_result(exp, checksums, partial=True)
st.caption(
    f"Settings: {index_swap_views.READINGS[reading]}, K={exp.settings.k}, "
    f"scale={exp.settings.scale or f'the encoder default ({state.models().encoder.default_scale:g})'}, "
    f"greedy, up to {exp.settings.max_new_tokens} "
    "answer tokens. An answer is correct for a year when it names that year's holder: the full name, or the "
    "surname with no other first name beside it (accents ignored; a formal first name such as Michael for "
    "Mike counts as another's). Same as `python -m rag_core index-swap`, whose results this page shares."
)

shipped = store.shipped_result(exp, checksums)
if result is None or not result.complete:
    done = result.positions if result else 0
    if shipped is not None:
        st.info(
            f"Showing the shipped reference run ({shipped.created[:10]}; same models, prompt, snapshots and "
            f"settings, checked by fingerprint). "
            f"{done} of {len(leaders)} positions have been recomputed on this "
            "machine; a run replaces the shipped rows with live ones.",
            icon=":material/inventory_2:",
        )
    else:
        st.info(
            f"{done} of {len(leaders)} positions computed so far. "
            "The full run answers every question on both "
            "indexes and closed-book: on a CPU this takes a while; it resumes where it stopped."
        )
    job = jobs.get(JOB)
    if job is None or not job.running:
        if job is not None and job.error:
            st.error(
                f"The last run stopped: {job.error}. What it computed is kept; resuming continues from there."
            )
        elif job is not None and job.cancelled:
            st.warning("The run was cancelled. What it computed is kept; resuming continues from there.")
        st.caption(
            f"Runs on the 2016 and 2018 indexes (not the sidebar's) with the model "
            f"{md_text(state.stack_name())}, at the settings above."
        )
        if st.button("Run the experiment" if not done else "Resume the experiment", type="primary"):
            pipes = {y: state.pipeline(y) for y in results.YEARS}  # loaded here, in the page's own run
            jobs.start(
                JOB,
                lambda progress: run_experiment(exp, lambda: pipes, checksums=checksums, progress=progress),
                label=f"Index swap experiment ({index_swap_views.reading_names(reading)}) · "
                f"{md_text(state.stack_name())}",
            )
            st.rerun()  # the sidebar and the page pick the running job up
    jobs.progress_panel(JOB, follow=True)  # the tables take each position's live rows as it finishes
    if (result is None or not result.complete) and shipped is not None:
        result = store.overlay(result, shipped)  # live rows replace shipped ones as they come

if result is not None:
    if result.shipped:
        st.caption(f"Tables: the shipped reference run, with {done} position(s) recomputed on this machine.")
    elif not result.complete:
        st.warning(f"Partial result: {result.positions} of {len(leaders)} positions.")
    for decoding in result.decodings():
        st.markdown(
            f"**{READING_LABELS[decoding]}**: accuracy by index (rows) and "
            "leaders' year (columns); the diagonal should be high, the rest low. The held-out half is the "
            "result; the tuning half chose the base's worked examples and trained the default, "
            "so it flatters. "
            "The prompt's format was picked before the split, on 40 positions: 21 of them are held out now."
        )
        halves = st.columns(2)
        for col, split, label in zip(halves, ("test", "tune"), ("Held-out half", "Tuning half")):
            col.caption(f"{label} ({index_swap_views.split_positions(result, split)} positions)")
            acc = index_swap_views.accuracy_frame(result.table(decoding, split)).rename_axis("").reset_index()
            col.dataframe(
                acc,
                hide_index=True,
                width="content",  # sized to fit half the page at 1280 px
                column_config=views.widths(index_swap_views.ACCURACY_COLUMNS),
            )
        st.caption(index_swap_views.override_note(result, decoding))
        st.info(f"Finding: {result.finding(decoding)}", icon=":material/search:")
    cb = result.closed_book_accuracy()
    c1, c2, c3 = st.columns(3)
    c1.metric("Closed-book: names the 2016 holder", f"{100 * cb['2016']:.0f}%")
    c2.metric("Closed-book: names the 2018 holder", f"{100 * cb['2018']:.0f}%")
    c3.metric("Compute time", f"{result.elapsed_s / 60:.0f} min")
    index_swap_views.before_after(checksums, reading)

    # --- per position ---
    st.subheader("Per position")
    f1, f2 = st.columns(2)
    only_fail = f1.toggle(
        "Failures only",
        key="swap_fail_only",
        help="Answers that do not name the holder of the index's own year.",
    )
    dec = f2.radio(
        "Decoding",
        result.decodings(),
        format_func=READING_LABELS.get,
        horizontal=True,
        key=f"swap_dec_{reading}",
        persist_state=KEEP,
    )
    frame = result.failures(dec) if only_fail else result.frame()[lambda f: f["decoding"] == dec]
    views.table(
        frame[list(index_swap_views.POSITION_COLUMNS)],
        {
            c: st.column_config.Column(head, width=w)
            for c, (head, w) in index_swap_views.POSITION_COLUMNS.items()
        },
    )

    index_swap_views.failure_actions(
        result.failures(dec), dec, holders, str(ROOT / "pages" / "index_swap.py")
    )

with one_question:
    index_swap_views.answer_on_both(question, holders, reading)
