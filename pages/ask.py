"""Ask: a question, both answers with their probabilities, the K passages, the CSV."""

import json

import streamlit as st

from app import state
from app.ask import compare, diagnose_panel
from app.ui import answer_card, question_box, source_views, stuffed_views, views
from rag_core.loupe.vocabulary import ASSETS

st.title("Ask")
st.caption(
    "One question, K retrieved passages, two ways to marginalise over them, "
    "and the way deployed RAG reads them: all together in one prompt."
)

examples = json.loads((ASSETS / "examples" / "questions.json").read_text(encoding="utf-8"))
labels = ["(type your own)"] + [e["question"] for e in examples]


ss = st.session_state


def _pick_example() -> None:
    """Picking an example asks it: what is on screen is always that question's answer."""
    choice = ss.get("example")
    if choice and choice != labels[0]:
        ss["question_box"] = ss["question"] = choice


def _ask() -> None:
    ss["question"] = ss["question_box"]
    if ss.get("example") != ss["question"]:
        ss["example"] = labels[0]  # a typed question is not the example any more


if ss.get("example") not in labels or (ss["example"] != labels[0] and ss["example"] != state.question()):
    ss["example"] = labels[0]  # the question changed elsewhere (Eval, Index swap): the picker follows
ss.setdefault("question_box", state.question())
st.selectbox(
    "Example questions",
    labels,
    key="example",
    on_change=_pick_example,
    help="Picking one asks it. Some of these the small default model gets wrong: good ones to diagnose.",
)
with st.form("ask"):
    question_box.field("question_box")
    st.form_submit_button("Answer", type="primary", on_click=_ask)

trace = state.current_trace()
if trace is not None:
    views.about(trace)  # with what was cut from the question, if anything
    trace = state.with_stuffed(trace)  # the third reading: the K passages in one prompt
    answer_card.answer_cards(trace, "ask")
    source_views.section(trace, key="ask_sources")
    st.subheader(f"The {trace.k} passages")
    st.caption(
        "score s(z) = d(z)·q(x); prior p(z|x) = softmax(scale · s); "
        "p(z|x,y) tok / seq: the posterior after the "
        "whole RAG-Token / RAG-Sequence answer, the passage that answer leans on."
    )
    views.passages_table(trace)
    stuffed_views.worth_section(trace, "ask")
    views.csv_download(trace, "ask-csv")
    compare.section(trace)
diagnose_panel.render(trace)
