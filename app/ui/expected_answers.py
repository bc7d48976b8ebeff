"""The expected answer the app offers for a question (the Diagnose box, the Train page's walk):
an example picked on the Ask page, an answer handed over by the Eval page, or the dev set's."""

from __future__ import annotations

import json

import streamlit as st

from rag_core.loupe.vocabulary import ASSETS


@st.cache_data(show_spinner=False)
def _known_answers() -> dict[str, str]:
    """Expected answers of questions the app ships: the dev set, then the examples (which win)."""
    out = {}
    try:
        with (ASSETS / "eval" / "dev.jsonl").open(encoding="utf-8") as f:
            for line in f:
                if line.strip():
                    row = json.loads(line)
                    out[" ".join(row["question"].split())] = " | ".join(row["answers"])
        for ex in json.loads((ASSETS / "examples" / "questions.json").read_text(encoding="utf-8")):
            out[" ".join(ex["question"].split())] = ex["expected"]
    except (OSError, ValueError, KeyError, TypeError):
        pass
    return out


def prefill(question: str) -> str:
    """An example picked on the Ask page, an answer handed over by the Eval page, or the dev set's."""
    picked = st.session_state.get("example")
    pending = st.session_state.get("expected_answers", {})
    if question in pending:
        return pending[question]
    known = _known_answers()
    if picked and " ".join(str(picked).split()) == question and question in known:
        return known[question]
    return known.get(question, "")
