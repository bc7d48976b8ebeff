"""Ask's "Compare with": the same question, index and settings under another model stack, side by
side with the session's own (the before and after of a fine-tuning run is the first use).

The server holds one stack; the other is loaded for the comparison alone and freed once its trace
is made (for that moment two stacks are in memory). Its trace is cached by the other stack's
fingerprint, so it is computed once, and never shown under the wrong name.
"""

from __future__ import annotations

import dataclasses
import math

import pandas as pd
import streamlit as st

from app import stack, state
from app.ui import safe_text, views
from rag_core.loupe.diagnosis import confidence as certainty
from rag_core.loupe.vocabulary import DECODINGS, Trace, first_line, p_text, prob

NONE = "(none)"


def section(trace: Trace) -> None:
    """The picker and, once another stack is picked, the two answers and top passages side by side."""
    here = stack.current()
    others = [s for s in stack.offered() if s.key != here.key and s.key in stack.keys()]
    if not others:
        return
    names = {s.key: s.name for s in others}
    st.subheader("Compare with another model")
    pick = st.selectbox(
        "Compare with",
        [NONE, *names],
        key="compare_with",
        format_func=lambda k: names.get(k, k),
        help="The same question, index and settings under another model stack: the answers, their "
        "probabilities and the top passages side by side. The other stack is loaded for this "
        "alone and freed after.",
    )
    if pick == NONE:
        return
    other = next(s for s in others if s.key == pick)
    try:
        with st.spinner(f"Answering with {other.name} (loaded for this comparison)…"):
            theirs, their_confidence = stack.door().compare(
                other, trace.question, dataclasses.replace(state.answer_settings(), index=trace.index)
            )
    except stack.LOAD_ERRORS as e:
        st.error(f"{safe_text.md_text(other.name)} could not answer: {safe_text.md_text(first_line(e))}")
        return
    ours = {d: state.confidence(trace, c) for d in DECODINGS if (c := trace.answer(d)) is not None}
    left, right = st.columns(2)
    sides = ((left, here.name, trace, ours), (right, other.name, theirs, their_confidence))
    for col, name, t, sure in sides:
        with col:
            st.markdown(f"**{safe_text.md_text(name)}**")
            views.table(summary(t, sure), hide_index=True)
            passages = retrieved(t)
            views.table(
                passages,
                hide_index=True,
                height=ROW_PX * (len(passages) + 1) + 3,  # every passage in view, none behind a scroll
                column_config={"title": st.column_config.TextColumn("title", width="large")},
            )


def summary(t: Trace, sure: dict[str, certainty.Confidence]) -> pd.DataFrame:
    """One row per marginal: its answer, p_tok and p_seq of that answer, and the low-confidence
    rule's verdict on it (`sure`: per decoding), in the words of the answer cards."""
    rows = []
    for decoding in DECODINGS:
        c = t.answer(decoding)
        if c is not None:
            rows.append(
                {
                    "decoding": decoding,
                    "answer": c.answer,
                    "p_tok": p_text(prob(c.log_p_tok(t.log_prior))),
                    "p_seq": p_text(prob(c.log_p_seq(t.log_prior))),
                    "confidence": confidence_word(sure.get(decoding)),
                }
            )
    return pd.DataFrame(rows)


def confidence_word(conf: certainty.Confidence | None) -> str:
    """ "low: guessing, readings-disagree" for a flagged answer, "ok" for a confident one, "—" unknown; then
    the support (nats: how much the best passage raises the answer over that stack's own model
    without passages), which is what differs most between two stacks reading the same passages.

    >>> confidence_word(certainty.assess(0.6, support=1.234))
    'ok · support +1.23'
    """
    if conf is None:
        return "—"
    word = f"low: {', '.join(conf.codes)}" if conf.low else "ok"
    known = conf.support is not None and math.isfinite(conf.support)
    return word + (f" · support {conf.support:+.2f}" if known else "")


ROW_PX = 35  # the grid's row height


def retrieved(t: Trace) -> pd.DataFrame:
    """All K passages a stack retrieved, in rank order, with their prior."""
    return pd.DataFrame(
        [
            {"rank": h.rank, "title": h.passage.title, "prior p(z|x)": p_text(float(p))}
            for h, p in zip(t.hits, t.prior)
        ]
    )
