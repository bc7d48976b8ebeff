"""The question fields, and what the user is told about a question as typed.

One limit everywhere, the engine's `MAX_QUESTION_CHARS`: the engine keeps the end of a longer
question (where a pasted paragraph puts its question) and says what it kept and what it left out
(`pipeline.cut_notice`); every page that answers the question shows that notice where the answer
is. The fields themselves set no `max_chars`: Streamlit's field rejects an edit that would pass its
limit as a whole (a paste one character too long leaves the field as it was before, often empty),
with no message, so a field limit would lose exactly the long pastes the notice is for. A paste is
therefore always kept in full, and the field's help names the limit.
"""

from __future__ import annotations

import streamlit as st

from rag_core.loupe.vocabulary import MAX_QUESTION_CHARS, QuestionError, clean_question

HELP = (
    f"The model reads the last {MAX_QUESTION_CHARS:,} characters of a question, where the question "
    "itself stands. A longer one is kept here in full, and the answer says where it was cut."
)


def field(key: str, label: str = "Question") -> str:
    """A question field (in a form: Enter asks)."""
    return st.text_input(label, key=key, help=HELP)


def notes(raw: str) -> list[str]:
    """What the user must know about `raw`, the question as typed, as sentences of plain text (the
    caller escapes them): the engine's cut, if any, with what it kept and what it left out."""
    try:
        return sentences(clean_question(raw)[1])
    except QuestionError:
        return []  # an empty question has its own message where it is answered


def sentences(notices: list[str]) -> list[str]:
    """The engine's notices about a question (a trace records them) as sentences to show."""
    return [c[0].upper() + c[1:] + "." for c in notices]
