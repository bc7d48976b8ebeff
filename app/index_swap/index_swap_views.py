"""Pieces of the Index swap page: one index's answers with the judge's verdict, and the text and
tables of the experiment's result. Answers and passages go into metrics and dataframes as plain
text, never into Markdown.
"""

from __future__ import annotations

import pandas as pd
import streamlit as st

from app import state
from app.ui import answer_card, detours, views
from rag_core.loupe.index_swap import judge, results, stack_comparison
from rag_core.loupe.vocabulary import DECODE_NAMES, READING_LABELS, STUFFED, AnswerSettings, Trace

# The page's two readings of the same K passages, as `AnswerSettings.decode`: the experiment runs in either.
READINGS = {
    "both": "RAG-Token and RAG-Sequence (the paper)",
    "stuffed": "Stuffed (the K passages in one prompt)",
}


def reading_names(reading: str) -> str:
    """The decodings of a reading (an `AnswerSettings.decode`), as the sidebar's job label names them.

    >>> reading_names("both"), reading_names("stuffed")
    ('RAG-Token and RAG-Sequence', 'Stuffed')
    """
    return " and ".join(READING_LABELS[d] for d in DECODE_NAMES[reading])


# The per-position table: column -> (header, width in px), sized to fit the page at 1280 px.
POSITION_COLUMNS = {
    "position": ("position", 120),
    "index": ("index", 50),
    "answer": ("answer", 100),
    "holder_2016": ("holder 2016", 95),
    "holder_2018": ("holder 2018", 95),
    "correct_2016": ("✓ 2016", 58),
    "correct_2018": ("✓ 2018", 58),
    "ambiguous": ("both", 45),
    "closed_book": ("closed-book", 95),
    "p_answer": ("p(answer)", 75),
}
# The accuracy tables, two side by side at 1280 px: short headers, their meaning on hover.
ACCURACY_COLUMNS = {
    "": 80,
    **{
        f"leaders {y}": (y, 72, f"Share of the answers that name the {y} holder, on this row's index.")
        for y in results.YEARS
    },
    **{
        f"paper {y}": ("paper", 72, f"The paper's number for the same cell (its §4.5), {y} leaders.")
        for y in results.YEARS
    },
}


def verdict(answer: str, known: tuple[str, str] | None) -> str:
    """Which holder an answer names, given the (2016, 2018) holders; "" when they are not known."""
    if not known:
        return ""
    c16, c18, both = judge.judge(answer, *known)
    return (
        "names the 2016 holder"
        if c16
        else "names the 2018 holder"
        if c18
        else "names both holders (ambiguous)"
        if both
        else "names neither holder"
    )


def verdict_kind(answer: str, known: tuple[str, str] | None, year: str) -> str:
    """How the answer reads on the `year` index: "right" (that year's holder), "other-year" (the
    other year's holder: the index did not win), "unclear" (both or neither) or "" (not known).

    >>> verdict_kind("Donald Trump", ("Barack Obama", "Donald Trump"), "2016")
    'other-year'
    """
    if not known:
        return ""
    c16, c18, _ = judge.judge(answer, *known)
    if (c16, c18) == (year == "2016", year == "2018"):
        return "right"
    return "other-year" if c16 or c18 else "unclear"


# Colour by what the answer did. A wrong-year answer is red text, not an error box: the page works.
# (The text is ours: which holder the answer names, never the answer itself.)
SHOW = {
    "right": st.success,
    "other-year": lambda text: st.markdown(f":red[**{text}**]"),
    "unclear": st.warning,
}


def answers_on(trace: Trace, year: str, known: tuple[str, str] | None, reading: str) -> None:
    """The reading's answers on one index (the two marginals', or the stuffed one's) as answer
    cards (low confidence shown as on every page), each with its verdict, then the passages."""
    for decoding in DECODE_NAMES[reading]:
        label = READING_LABELS[decoding]
        best = trace.answer(decoding)
        if best is None:
            continue
        said = verdict(best.answer, known)
        answer_card.card(
            trace, best, f"{label} ({year} index)", key=f"swap-{year}-{decoding}", help=said or None
        )
        if said:
            kind = verdict_kind(best.answer, known, year)
            extra = {
                "right": ": right for this index",
                "other-year": ", the other year's: wrong for this index",
            }
            SHOW[kind](f"{label}: {said}{extra.get(kind, '')}")
    views.passages_table(trace, compact=True)


def answer_on_both(question: str, holders: dict[str, tuple[str, str]], reading: str) -> None:
    """One question, both indexes, side by side, in the page's reading, with the known holders when
    it is a listed position."""
    views.question_notes(question)  # what was cut from it, if anything
    known = holders.get(question.strip())
    if known:
        st.caption(f"Holder on 31 Dec 2016: {known[0]} · on 31 Dec 2018: {known[1]}")
    traces = {}
    for col, year in zip(st.columns(2), results.YEARS):
        with col:
            st.subheader(f"{year} index")
            traces[year] = trace = state.trace_for(question, index_name=year)
            if trace is not None:
                if reading == "stuffed":
                    trace = state.with_stuffed_answers(trace)  # its card only: no passage's worth
                answers_on(trace, year, known, reading)
    if all(traces.values()):
        st.caption(difference_note(traces))


def difference_note(traces: dict[str, Trace]) -> str:
    """How many of the retrieved passages differ between the 2016 and the 2018 index, and how many
    of those are one article whose text the other year rewrote (the same title on both).

    >>> import torch
    >>> from rag_core.loupe.vocabulary import Hit, Passage
    >>> def t(*ps):
    ...     hits = [Hit(r, Passage(*p), 0.0) for r, p in enumerate(ps, 1)]
    ...     return Trace("q", "i", hits, torch.zeros(len(hits)), 1.0, [])
    >>> old, new = t(("a", "A", "x"), ("b", "B", "old")), t(("a", "A", "x"), ("c", "B", "new"))
    >>> note = difference_note({"2016": old, "2018": new})
    >>> note.startswith("1 of the 2 passages differ"), "(1 of them under the same title on both" in note
    (True, True)
    """
    ids = {y: {h.passage.id for h in t.hits} for y, t in traces.items()}
    shared = len(ids["2016"] & ids["2018"])
    both = ids["2016"] & ids["2018"]
    titles = {y: [h.passage.title for h in t.hits if h.passage.id not in both] for y, t in traces.items()}
    # differing passages (counted on the 2016 side) of an article on both sides: its text rewritten
    rewritten = sum(title in titles["2018"] for title in titles["2016"])
    return (
        f"{traces['2016'].k - shared} of the {traces['2016'].k} passages differ between the two indexes"
        + (
            f" ({rewritten} of them under the same title on both, its text rewritten for the other year)"
            if rewritten
            else ""
        )
        + "; the models are the same objects in memory (no reload)."
    )


def accuracy_frame(t: pd.DataFrame) -> pd.DataFrame:
    """An accuracy table (rows: index year) as percentages, next to the paper's numbers."""
    return pd.DataFrame(
        {
            "leaders 2016": t["leaders 2016"].map(lambda x: f"{100 * x:.0f}%"),
            "paper 2016": [f"{100 * results.PAPER[(y, '2016')]:.0f}%" for y in results.YEARS],
            "leaders 2018": t["leaders 2018"].map(lambda x: f"{100 * x:.0f}%"),
            "paper 2018": [f"{100 * results.PAPER[(y, '2018')]:.0f}%" for y in results.YEARS],
        },
        index=t.index,
    )


def split_positions(result, split: str) -> int:
    """How many positions fall in `split` ("test" or "tune")."""
    return int(result.frame()["split"].eq(split).sum() / max(1, 2 * len(result.decodings())))


def override_note(result, decoding: str) -> str:
    """The caption under the accuracy tables: how often an answer names the other year's holder,
    and the goal."""
    o = result.override(decoding)
    return (
        f"Answers naming the other year's holder: {o['other_year']} of {o['total']} "
        f"({o['other_year_in_passages']} of them named in the retrieved passages, "
        f"{o['other_year_closed_book']} also the model's closed-book answer); naming both "
        f"(ambiguous): {o['ambiguous']}; naming neither holder: {o['neither']}. "
        f"Goal (matched ≥ {results.GOAL_MATCHED:.0%}, "
        f"mismatched ≤ {results.GOAL_MISMATCHED:.0%}): {'met' if result.goal_met(decoding) else 'not met'}."
    )


def failure_labels(fails: pd.DataFrame) -> list[str]:
    """'President of the United States · 2016 index → Barack Obama' for each failing row."""
    return [f"{r.position} · {r.index} index → {r.answer or '(empty)'}" for r in fails.itertuples()]


def failure_actions(fails: pd.DataFrame, decoding: str, holders: dict, here: str) -> None:
    """Pick a failing row, then explain it (a marginal's: Token vs Sequence, from the first token; the
    stuffed reading's: Citations, what each passage is worth to it) or diagnose it (Ask, with this
    index's holder as the expected answer). Both set the question and the sidebar's index, and the
    page they land on says so and offers the way back (`detours.detour`)."""
    ss = st.session_state
    if not len(fails):
        st.success(f"No failure for {READING_LABELS[decoding]}.")
        return
    labels = failure_labels(fails)
    # The pick is the failure's label, never its position: a live run adds rows between two reruns,
    # and a position would then point at another failure. Widget state goes with the page, so the
    # label is also kept apart, and coming back from a detour shows the failure the user picked.
    if ss.get("swap_fail") not in labels:
        ss.pop("swap_fail", None)
        if ss.get("swap_fail_label") in labels:
            ss["swap_fail"] = ss["swap_fail_label"]
    ss["swap_fail_label"] = st.selectbox("A failure to explain", labels, key="swap_fail")

    def picked() -> pd.Series:
        """The failure picked when a button is clicked. A pick made just before the click reaches
        the server in the same rerun as the click, and the buttons' callbacks come from the run
        before it: they read the pick now, never the row this run was drawn with."""
        label = ss.get("swap_fail")
        return fails.iloc[labels.index(label if label in labels else ss["swap_fail_label"])]

    def _explain() -> None:
        row = picked()
        detours.detour(here, "Index swap", question=row["question"], index_name=row["index"])
        if row["decoding"] == STUFFED:
            ss["swap_goto"] = "citations.py"
        else:
            ss.update(tvs_answer=(row["decoding"], 0), tvs_step=0, swap_goto="token_vs_sequence.py")

    def _diagnose() -> None:
        row = picked()
        q, idx = row["question"], row["index"]
        detours.detour(here, "Index swap", question=q, index_name=idx)
        ss.setdefault("expected_answers", {})[q] = holders[q][results.YEARS.index(idx)]
        ss["swap_goto"] = "ask.py"

    b1, b2 = st.columns(2)
    b1.button(
        "Explain this failure",
        on_click=_explain,
        width="stretch",
        help=(
            "Citations on this question and index: what each passage is worth to the stuffed reading. "
            if decoding == STUFFED
            else "Token vs Sequence on this question and index, from the first token. "
        )
        + "It sets the question and the sidebar's index; the page you land on offers the way back.",
    )
    b2.button(
        "Diagnose this",
        on_click=_diagnose,
        width="stretch",
        help="The Ask page's Diagnose panel on this question and index, with this index's holder as the "
        "expected answer. It sets the question and the sidebar's index; Ask offers the way back.",
    )


def held_out_headers() -> dict:
    """The before/after table's cells ('2016 index · 2018 leaders'): headers that fit 120 px, the
    whole cell's meaning on hover."""
    return {
        stack_comparison.cell_name(i, y): (
            f"{i} index · {y}",
            120,
            f"On the {i} index, the share of answers that name the {y} holder: "
            + ("the matched cell, should be high." if i == y else "a mismatched cell, should be low."),
        )
        for i, y in stack_comparison.CELLS
    }


def before_after(checksums: dict[str, str], reading: str) -> None:
    """The held-out half under the untrained base and the trained default (their shipped runs in
    `reading`, an `AnswerSettings.decode` of READINGS), beside the paper's cells: what RAG training changed
    in the experiment."""
    shipped = stack_comparison.shipped_by_stack(checksums, AnswerSettings(decode=reading))
    if len(shipped) < 2:
        return
    st.subheader("Before and after training (held-out half)")
    frame = stack_comparison.held_out_rows(shipped)
    cells = [c for c in frame.columns if c not in ("model", "decoding")]
    frame[cells] = frame[cells].map(lambda x: f"{100 * x:.0f}%")  # as the tables above write accuracy
    views.table(
        frame,
        {
            "model": st.column_config.Column("model", width=190),
            "decoding": st.column_config.Column("decoding", width=95),
            **views.widths(held_out_headers()),
        },
        hide_index=True,
    )
    st.caption(
        "Matched cells should be high and the others low. The base reads worked examples; the trained "
        "default was fine-tuned on other questions and on the tuning half's positions, never on these."
        + (
            " Its fine-tuning read each passage alone (the RAG-Sequence marginal), never the K together: "
            "the stuffed rows show what that training does to a reading it never saw."
            if reading == STUFFED
            else ""
        )
    )
