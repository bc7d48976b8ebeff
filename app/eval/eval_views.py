"""The Eval page's parts below the summary: retrieval metrics, the split of answers by whether a
passage held the answer, the tokens that came from the weights, and two runs compared."""

from __future__ import annotations

import math
import time
from pathlib import Path

import pandas as pd
import streamlit as st

from app import state
from app.eval import calibration_chart, comparison_charts
from app.ui import charts, detours, safe_text, sidebar, views
from rag_core.loupe.diagnosis import VERDICTS
from rag_core.loupe.diagnosis import confidence as certainty
from rag_core.loupe.evaluation import (
    CELLS,
    calibration,
    compare_results,
    error_split,
    eval_summary,
    shipped_runs,
)
from rag_core.loupe.evaluation import runs as ev
from rag_core.loupe.indexes import NAMED
from rag_core.loupe.model_stacks import stacks
from rag_core.loupe.vocabulary import CLOSED_BOOK, RAG_SEQUENCE, RAG_TOKEN, READING_LABELS, REPO_ROOT, STUFFED

ASK = REPO_ROOT / "pages" / "ask.py"
EVAL = ASK.with_name("eval.py")
PCT = "percent"
# The comparison's columns, sized to fit the page at 1280 px (views.widths).
# A header longer than its column is cut by the grid: such a column gets a short header and its
# full meaning on hover.
COMPARE_WIDTHS = {
    "question": 160,
    "answers": 95,
    "answer_a": 95,
    "answer_b": 95,
    "em_a": 50,
    "em_b": 50,
    "outcome_a": 85,
    "outcome_b": 85,
    "change": 60,
}
EM_HELP = "1 when the {} answer matches a gold answer exactly (SQuAD normalisation), else 0."
TABLE_MODES = (CLOSED_BOOK, RAG_TOKEN, RAG_SEQUENCE, STUFFED)  # stuffed: in runs made with it
STUFFED_WIDTHS = {
    "question": 300,
    "stuffed": 180,
    "✓": 45,
    "p": 70,
    "leans on": ("leans on", 90, "The rank of the passage whose removal costs the stuffed answer most."),
    "mixture cites": ("cites", 80, "The rank the RAG-Sequence posterior p(z|x,y) of the same answer cites."),
}
RULE_CAPTION = (
    "The rule every page applies to an answer card (and `ask --json`): low confidence when p < "
    f"{certainty.P_GUESS:g}, when another reading of the same passages gave a different answer"
    + (f" and p < {certainty.P_TRUST:g}" if math.isfinite(certainty.P_TRUST) else "")
    + ", or when no "
    f"passage makes the answer more likely than the model alone and p < {certainty.P_SURE:g}. Its thresholds "
    "and the readings it compares were chosen on the dev split."
)
QUESTION_WIDTHS = {  # at 1280 px the columns fit in the main area (tests/test_browser_layout.py)
    "question": 120,
    "expected": ("gold", 50, "The gold answers."),
    "closed-book": ("cb", 55, "The closed-book answer: the generator alone, reading no passage."),
    "rag-token": ("tok", 60, "The RAG-Token answer."),
    "rag-sequence": ("seq", 60, "The RAG-Sequence answer."),
    "closed-book ✓": ("✓ cb", 45, EM_HELP.format("closed-book")),
    "rag-token ✓": ("✓ tok", 50, EM_HELP.format("RAG-Token")),
    "rag-sequence ✓": ("✓ seq", 50, EM_HELP.format("RAG-Sequence")),
    "stuffed": ("stuffed", 65, "The stuffed reading's answer: the K passages read together in one prompt."),
    "stuffed ✓": ("✓ st", 45, EM_HELP.format("stuffed")),
    "answer rank": (
        "rank",
        45,
        "The rank of the best passage holding a gold answer, searched deeper than K "
        "on a miss; empty: none found.",
    ),
    "verdicts": 70,
    "low confidence": (
        "unsure",
        60,
        "The answers the low-confidence rule flags (the one every page uses), with its reasons: "
        f"guessing (p < {certainty.P_GUESS:g}), readings-disagree (another reading of the same passages "
        "answered otherwise), unsupported (no passage makes it more likely than the model alone, and "
        f"p < {certainty.P_SURE:g}). Empty: every answer confident; —: a run saved before the rule.",
    ),
}


def runs_of(stack) -> list[Path]:
    """The saved runs this model stack (a StackSpec) made, newest first, then the shipped ones it
    made (a run of another stack is never offered under this one's name)."""
    return [
        p
        for p in ev.saved_runs() + shipped_runs.current_runs(stack=stack)
        if (run := ev.load_run(p)) is not None and stacks.made_by(run.settings, stack)
    ]


def run_label(path: Path) -> str:
    """'2026-12-01 12:00:26 · dev.jsonl · 143 questions · K=5 · greedy · 2018' for a saved run."""
    run = ev.load_run(path)
    if run is None:
        return f"{path.stem} (unreadable)"
    s = run.settings
    when = (
        "shipped reference"
        if shipped_runs.is_shipped(path)
        else time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(s.get("started", path.stat().st_mtime)))
    )
    beams = int(s.get("beams", 1))
    decoding = "greedy" if beams == 1 else f"{beams} beams"  # greedy and beam runs differ by several points
    return (
        f"{when} · {Path(str(s.get('file', '?'))).name} · {len(run.results)} questions · K={s.get('k')} · "
        f"{decoding} · {s.get('index')}" + (" · with the stuffed reading" if s.get("decode") == "all" else "")
    )


def run_intro(settings, shipped: bool) -> str:
    """Before a run starts: the index and the model stack it will use, and a warning when the shipped
    questions (written for the Wikipedia passages) would be asked of another index. Returns the Run
    button's label, which then names the index it runs on."""
    name, md = settings.index, safe_text.md_text
    st.caption(
        f"Runs on the index “{md(name)}” with the model {md(state.stack_name())}, at the "
        f"sidebar's settings: K={settings.k}, beams {settings.beams}, {settings.rescore} rescoring."
    )
    if not shipped or name in NAMED:
        return "Run"
    named = f"{', '.join(NAMED[:-1])} and {NAMED[-1]}"
    st.warning(
        f"The shipped questions were written for the Wikipedia passages of the {named} indexes. The "
        f"sidebar's index “{md(name)}” is not one of them: its passages are "
        f"{md(sidebar.index_source(name))}. Nearly every answer would be scored wrong for want of its "
        "passage, so the scores would measure the index, not the model. Pick 2018 in the sidebar, or "
        "upload questions written for this index.",
        icon=":material/warning:",
    )
    return f"Run anyway on {md(name)}"


def open_button(key: str, pick_key: str, run: ev.EvalRun) -> None:
    """'Open on the Ask page' for the question picked in the select box `pick_key`: Ask shows it under
    the run's index, K and beams (where the sidebar offers them), says what that changed, and offers
    the way back (`detours.detour`). The change is made in the click's callback, before the sidebar is
    drawn; the page then switches (`follow_open`)."""
    st.button(
        "Open on the Ask page",
        key=key,
        on_click=_open,
        args=(pick_key, run),
        help="Ask then shows this question at the run's index, K and beams (the sidebar follows), says "
        "what it changed, and offers the way back.",
    )


def _open(pick_key: str, run: ev.EvalRun) -> None:
    question = st.session_state.get(pick_key)
    row = next((r for r in run.results if r.question == question), None)
    if row is None:
        return
    s, changes = run.settings, {"question": question}
    if s.get("index") in sidebar.index_choices():
        changes["index_name"] = s["index"]
    for key, (low, high) in (("k", sidebar.K_RANGE), ("beams", sidebar.BEAMS_RANGE)):
        if isinstance(s.get(key), int) and low <= s[key] <= high:
            changes[key] = s[key]
    detours.detour(str(EVAL), "Eval", **changes)
    st.session_state.setdefault("expected_answers", {})[question] = " | ".join(row.answers)
    st.session_state["eval_goto"] = True


def follow_open() -> None:
    """After 'Open on the Ask page' (`open_button`): go there (called before the page draws)."""
    if st.session_state.pop("eval_goto", False):
        st.switch_page(ASK)


def retrieval(run: ev.EvalRun, summary: dict) -> None:
    """Retrieval metrics beside EM, and where each answer's evidence was."""
    st.subheader("Retrieval and where the answers came from")
    r = summary["retrieval"]
    st.caption(
        "A retrieved passage counts as relevant when its title and text contain a gold answer. hit@1: the "
        "top passage is relevant. MRR: 1 / rank of the first relevant passage. nDCG: the relevant ranks "
        "discounted by log2(rank + 1), against the same passages moved to the top."
    )
    cols = st.columns(len(r))
    for col, (name, v) in zip(cols, r.items()):
        col.metric(
            name,
            "—" if v is None else (f"{v:.1%}" if name.startswith(("hit", "recall")) else f"{v:.3f}"),
            help=None if v is not None else "this run was saved before every relevant rank was kept",
        )
    split = pd.DataFrame([{"": c, **{m: summary["split"][m][c] for m in ev.RAG_MODES}} for c in CELLS])
    w = summary["weights_share"]
    share = pd.DataFrame(
        [{"answers": kind, **{m: w[m][kind] for m in ev.RAG_MODES}} for kind in ("right", "wrong")]
    )
    left, right = st.columns(2)
    with left:
        views.table(split, hide_index=True)
        st.caption(
            "Right or wrong, by whether a retrieved passage held a gold answer. “Right from the weights”: "
            "no passage had it, yet the answer is right."
        )
    with right:
        views.table(
            share, {m: st.column_config.NumberColumn(m, format=PCT) for m in ev.RAG_MODES}, hide_index=True
        )
        st.caption(
            "Tokens from the model's weights: per answer, the share of its tokens the passages did not "
            "at least double in probability (against the same model with no passage), averaged over right "
            "and over wrong answers."
        )
    with st.expander("Examples of each case (RAG-Sequence)"):
        for c, v in error_split(run.results, RAG_SEQUENCE).items():
            st.markdown(f"**{c}** ({v['n']})")
            for q in v["examples"]:
                st.text(q)


def confidence(run: ev.EvalRun, summary: dict) -> None:
    """How far each reading's p can be trusted (its reliability diagram and ECE) and how the
    low-confidence rule sorted the run's answers: the share of wrong and of right answers flagged."""
    st.subheader("Can p be trusted?")
    by_mode = calibration.run_reliability(run.results)
    if by_mode:
        st.plotly_chart(
            calibration_chart.reliability_figure(by_mode),
            width="stretch",
            config=charts.NO_BAR,
            key="eval_rel",
        )
        st.caption(
            "Each reading's answers binned by their own p (tenths): the share right against the bin's mean "
            "p, a marker's size its number of answers. On the dotted line p means what it says; ECE is the "
            "gap averaged over answers."
        )
    if not eval_summary.confidence_assessed(summary):
        st.caption(
            "This run was saved before answers were assessed for low confidence: run it again to see "
            "which answers the rule flags."
        )
        return
    judged = eval_summary.confidence_modes(summary)
    for col, mode in zip(st.columns(len(judged)), judged):
        c = summary["confidence"][mode]
        with col:
            st.markdown(f"**{READING_LABELS[mode]}**")
            st.metric(
                "Wrong answers flagged",
                eval_summary.percent(c["wrong_flagged"]),
                f"{eval_summary.percent(c['right_flagged'])} of the right ones",
                delta_color="off",
                delta_arrow="off",
                help=f"{c['low']} of {c['assessed']} answers flagged; EM {eval_summary.percent(c['em_low'])} "
                f"among them, {eval_summary.percent(c['em_sure'])} among the rest.",
            )
    st.caption(RULE_CAPTION)


def question_table(run: ev.EvalRun) -> pd.DataFrame:
    """One row per question: the gold answers, each mode's answer and EM, the evidence rank, the
    verdicts of its wrong RAG answers and the answers the low-confidence rule flags."""
    none = ev.ModeResult("", True, True)
    return pd.DataFrame(
        [
            {
                "question": r.question,
                "expected": " | ".join(r.answers),
                **{m: r.modes[m].answer for m in TABLE_MODES if m in r.modes},
                **{f"{m} ✓": r.modes[m].em for m in TABLE_MODES if m in r.modes},
                "answer rank": r.answer_rank,
                "verdicts": ", ".join(
                    sorted(
                        set(r.modes.get(RAG_SEQUENCE, none).verdicts)
                        | set(r.modes.get(RAG_TOKEN, none).verdicts)
                    )
                ),
                "low confidence": eval_summary.low_confidence_text(r),
            }
            for r in run.results
        ]
    )


def stuffed(run: ev.EvalRun, summary: dict) -> None:
    """The stuffed reading of a run made with it (`eval --stuffed`): per question its answer, and the
    passage it leans on most beside the one the mixture cites for the same answer."""
    agree = summary["stuffed"]
    if not agree["n"]:
        return
    st.subheader("The stuffed reading")
    st.caption(
        "The same K passages read together in one prompt, as deployed RAG systems read them. “Leans on”: "
        "the passage whose removal costs its answer most (exact leave-one-out, K teacher-forced "
        "rows); “mixture cites”: the passage with the highest posterior p(z|x,y) of the same answer "
        f"under RAG-Sequence. They are the same passage in {agree['agree']} of {agree['n']} questions."
    )
    rows = [
        {
            "question": r.question,
            "stuffed": m.answer,
            "✓": m.em,
            "p": m.p_stuffed,
            "leans on": m.top_passage,
            "mixture cites": m.mixture_top,
        }
        for r in run.results
        if (m := r.modes.get(STUFFED)) is not None
    ]
    views.table(pd.DataFrame(rows), views.widths(STUFFED_WIDTHS))


def verdict_counts(summary: dict) -> pd.DataFrame:
    """Why RAG answers were wrong: one row per verdict (they overlap), the wrong answers first."""
    codes = ["wrong", *VERDICTS, "no verdict"]
    names = {"wrong": "wrong answers", "no verdict": "no verdict fired", **VERDICTS}
    return pd.DataFrame(
        [{"": names[c], **{m: summary["verdicts"][m][c] for m in ev.RAG_MODES}} for c in codes]
    )


def compare(runs: list[Path], labels: dict[Path, str], current: Path) -> None:
    """Two saved runs question by question: EM in each, the verdict transitions as a Sankey, the
    questions that flipped each way (each opening on the Ask page). No model call."""
    st.subheader("Compare two runs")
    if len(runs) < 2:
        st.caption("Save a second run (another K, index, scale or decoding) to compare it with this one.")
        return
    a_file = (ev.load_run(current) or ev.EvalRun([], {})).settings.get("file")
    # runs of the same question file first: only those pair up question by question
    others = sorted(
        (p for p in runs if p != current),
        key=lambda p: (ev.load_run(p) or ev.EvalRun([], {})).settings.get("file") != a_file,
    )
    other = st.selectbox(
        "Compare this run (A) with run B", others, format_func=labels.get, key="eval_compare_b"
    )
    a, b = ev.load_run(current), ev.load_run(other)
    if a is None or b is None:
        st.error("One of the two runs cannot be read.")
        return
    both_stuffed = all(any(STUFFED in r.modes for r in run.results) for run in (a, b))
    modes = [*ev.RAG_MODES, *([STUFFED] if both_stuffed else [])]  # the stuffed reading: runs made with it
    if st.session_state.get("eval_compare_mode") not in modes:
        st.session_state.pop("eval_compare_mode", None)  # "stuffed", kept from two runs that had it
    mode = st.radio("Mode", modes, index=1, horizontal=True, key="eval_compare_mode")
    pair(a, b, mode, "eval")


def pair(a: ev.EvalRun, b: ev.EvalRun, mode: str, key: str, names: tuple[str, str] = ("A", "B")) -> None:
    """Run A against run B in `mode`: EM in each, what flipped, the Sankey, the flipped questions.
    `names`: what the metrics call the two runs (two comparisons on one page never share a label)."""
    na, nb = names
    cmp = compare_results(a.results, b.results, mode)
    if not cmp.rows:
        st.info("The two runs share no question: compare runs of the same question file.")
        return
    em_a, em_b = cmp.em()
    c = cmp.counts()
    m = st.columns(4)
    m[0].metric(f"EM in {na}", f"{em_a:.1%}")
    m[1].metric(f"EM in {nb}", f"{em_b:.1%}", delta=f"{100 * (em_b - em_a):+.1f} points")
    m[2].metric(f"fixed (wrong in {na}, right in {nb})", c["fixed"])
    m[3].metric(f"broken (right in {na}, wrong in {nb})", c["broken"])
    if c["only in A"] or c["only in B"]:
        st.caption(f"Not paired: {c['only in A']} questions only in A, {c['only in B']} only in B.")
    st.plotly_chart(
        comparison_charts.transition_sankey(cmp.transitions()), key=f"{key}_sankey", config=charts.NO_BAR
    )
    st.caption(
        "Each question's outcome in A (left) and in B (right): right, or the first verdict that fired."
    )
    frame = cmp.frame()
    views.table(
        frame[frame.change != "same"]
        if st.toggle("Only questions that flipped", True, key=f"{key}_cmp_flip")
        else frame,
        views.widths(COMPARE_WIDTHS),
        hide_index=True,
    )
    flipped = cmp.flipped("fixed") + cmp.flipped("broken")
    if flipped:
        st.selectbox("A question that flipped", flipped, key=f"{key}_cmp_pick")
        open_button(f"{key}_cmp_open", f"{key}_cmp_pick", a)
