"""The answer card every page draws for a decoding's answer: the answer, its probability under its
own marginal, and, when the model is guessing (`rag_core.analysis.diagnosis.confidence`, one rule for every
page and for `ask --json`), the answer in smaller grey type under a "Low confidence" badge with the
reason in words. The state is never told by colour alone: the badge and the reason say it.

The answer and a runner-up's text are model output: they go through `md_text`, never as Markdown.
"""

from __future__ import annotations

import streamlit as st

from app import state
from app.ui.safe_text import md_text
from rag_core.loupe.diagnosis import confidence as certainty
from rag_core.loupe.stuffed_reading import stuffed_worth
from rag_core.loupe.vocabulary import (
    DECODING_LABELS,
    RAG_SEQUENCE,
    RAG_TOKEN,
    STUFFED,
    STUFFED_LABEL,
    Candidate,
    Trace,
    p_text,
    prob,
)

BADGES = {
    certainty.GUESSING: "Low confidence: unlikely",
    certainty.DISAGREE: "Low confidence: the readings disagree",
    certainty.UNSUPPORTED: "Low confidence: no passage supports it",
}
# Our own rule (no user text): a low-confidence card's answer in smaller, grey type. A keyed
# container carries the class `st-key-<key>`; only cards drawn as low confidence have a key
# starting with "guess-".
STYLE = """<style>
[class*="st-key-guess-"] [data-testid="stMetricValue"] {
  font-size: 1.25rem !important; color: #767676 !important; }
</style>"""


def answer_cards(trace: Trace, where: str = "cards") -> None:
    """Both decodings' answers side by side, each with the other marginal's p of the same answer;
    the stuffed reading's answer beside them when the trace has one."""
    cols = st.columns(3 if trace.stuffed is not None else 2)
    for col, decoding in zip(cols, (RAG_TOKEN, RAG_SEQUENCE)):
        best = trace.answer(decoding)
        with col:
            if best is None:
                st.caption(f"{DECODING_LABELS[decoding]}: not decoded")
                continue
            card(trace, best, DECODING_LABELS[decoding], key=f"{where}-{decoding}")
            other, other_p = (
                ("p_seq", best.log_p_seq(trace.log_prior))
                if decoding == RAG_TOKEN
                else ("p_tok", best.log_p_tok(trace.log_prior))
            )
            st.caption(
                f"{other} of the same answer: {p_text(prob(other_p))}"
                + "".join(f" · {n}" for n in ending_notes(best))
            )
    if trace.stuffed is not None:
        with cols[2]:
            stuffed_card(trace, f"{where}-{STUFFED}")


def stuffed_card(trace: Trace, key: str) -> None:
    """The stuffed reading's answer: p(y|x, all K passages in one prompt), judged by the same rule."""
    best = trace.answer(STUFFED)
    if best is None:
        st.caption(f"{STUFFED_LABEL}: no answer")
        return
    card(trace, best, f"{STUFFED_LABEL} (the {trace.k} passages in one prompt)", key=key)
    st.caption(" · ".join(["p(y | x, all passages read together), no mixture", *ending_notes(best)]))
    position_note(trace, key)


def position_note(trace: Trace, key: str) -> None:
    """Where the stuffed reading leans most on the passage it reads first or last, say that this may
    be the place, not the passage, with the order-sensitivity figure beside it (on demand: the other
    orders are 2K - 1 more prompts)."""
    w = stuffed_worth.of(trace)
    if w is None or trace.k < 2 or w.leans_on not in (0, trace.k - 1):
        return
    where = "first" if w.leans_on == 0 else "last"
    st.caption(
        f"It leans most on passage #{trace.hits[w.leans_on].rank}, which it reads {where}: that may be "
        "the position, not the passage."
    )
    if st.toggle("Does the order change it?", key=f"{key}_position", help="Reads the other orders."):
        readings = state.stuffed_orders(trace)
        if readings is not None:
            changed = sum(stuffed_worth.changes_answer(o, w.answer.answer) for o in readings)
            st.caption(f"{changed} of {len(readings)} other orders change the answer.")


def card(
    trace: Trace, cand: Candidate, label: str, key: str, help: str | None = None
) -> certainty.Confidence:
    """One answer as a metric, "p = …" under its own decoding's marginal; low confidence shown as
    the module says. `key` names the card uniquely on its page."""
    conf = state.confidence(trace, cand)
    judged_metric(
        conf, key, label, md_text(cand.answer) or "(empty)", delta=f"p = {p_text(conf.p)}", help=help
    )
    return conf


def judged_metric(
    conf: certainty.Confidence | None, key: str, label: str, value: str, delta: str, **metric: object
) -> None:
    """An answer drawn as a metric and judged by the rule: smaller grey type under the badge and the
    reason when `conf` is low (None: not judged, drawn plain). `value` is already escaped."""
    st.html(STYLE)
    with st.container(key=f"{'guess' if conf is not None and conf.low else 'sure'}-{key}"):
        metric.setdefault("delta_color", "off")
        if metric["delta_color"] == "off":
            metric.setdefault("delta_arrow", "off")
        st.metric(label, value, delta, **metric)
        if conf is not None:
            low_note(conf)


def note(trace: Trace, cand: Candidate) -> None:
    """Where a page shows an answer without its card (a chart's title): the badge and the reason
    when the model is guessing, nothing otherwise."""
    low_note(state.confidence(trace, cand))


def low_note(conf: certainty.Confidence) -> None:
    """The badge and the reason of a low-confidence answer (nothing for a confident one)."""
    if not conf.low:
        return
    st.badge(BADGES[conf.codes[0]], icon=":material/help:", color="orange")
    st.caption(md_text(conf.summary()[:1].upper() + conf.summary()[1:] + "."))


def ending_notes(c: Candidate) -> list[str]:
    """Plain words for how an answer began and ended, where decoding rules (not the model) decided."""
    notes = []
    if c.forced and c.forced[0] and len(c.forced) > 1:
        notes.append("first token forced by the generator's settings")
    if not c.finished:
        notes.append(
            "end token forced at the token limit"
            if c.forced and c.forced[-1]
            else "unfinished: cut at the token limit"
        )
    return notes
