"""Ask: a question, both answers with their probabilities, the K passages, the CSV."""
import json

import streamlit as st

from app import state, views
from rag_core.config import ASSETS

st.title("Ask")
st.caption("One question, K retrieved passages, two ways to marginalise over them.")

examples = json.loads((ASSETS / "examples" / "questions.json").read_text(encoding="utf-8"))
labels = ["(type your own)"] + [e["question"] for e in examples]


def _pick_example() -> None:
    choice = st.session_state.get("example")
    if choice and choice != labels[0]:
        st.session_state["question_box"] = choice


st.selectbox("Example questions", labels, key="example", on_change=_pick_example,
             help="Some of these the small default model gets wrong: good ones to diagnose.")
with st.form("ask"):
    text = st.text_input("Question", value=st.session_state.get("question_box", state.question()), key="question_box",
                         max_chars=2000)
    asked = st.form_submit_button("Answer", type="primary")
if asked:
    st.session_state["question"] = text

trace = state.current_trace()
if trace is not None:
    for notice in trace.settings.get("notices", []):
        st.warning(notice)
    views.answer_cards(trace)
    st.subheader(f"The {trace.k} passages")
    st.caption("score s(z) = d(z)·q(x); prior p(z|x) = softmax(scale · s); posterior p(z|x,y) after the whole answer.")
    views.passages_table(trace)
    views.csv_download(trace, "ask-csv")
from app import diagnose_panel; diagnose_panel.render(trace)  # noqa: E702 (the Diagnose panel)
