"""Tables and notes of the Token vs Sequence page: labels and frames built from a trace and its
`stepper.walk`, and the verdict box. Model text goes into dataframes as plain cells, into
Markdown only through `safe_text.md_text`.
"""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import streamlit as st

from app.ui.safe_text import md_text, token_label
from rag_core.loupe.step_by_step import stepper
from rag_core.loupe.vocabulary import DECODING_LABELS, RAG_SEQUENCE, Candidate, Trace


def copy_state(src: str, dst: str) -> None:
    """A widget's callback: copy its key into the plain key the page reads (a plain key survives a
    page switch, a widget's does not)."""
    st.session_state[dst] = st.session_state[src]


def verdict_box(verdict: stepper.Agreement | None) -> None:
    """Whether RAG-Token and RAG-Sequence agree (`stepper.compare`), as a warning or a success box
    (nothing for None)."""
    if verdict is not None and verdict.kind == "different answers":
        st.warning(
            f"The two models disagree. RAG-Token answers “{md_text(verdict.token_answer)}”, "
            f"RAG-Sequence answers “{md_text(verdict.sequence_answer)}”. Step through each below to see why."
        )
    elif verdict is not None and verdict.kind == "same answer, different p":
        st.warning(
            f"Same answer, very different probability: p_seq / p_tok = {math.exp(verdict.log_ratio):.2f}."
        )
    elif verdict is not None:
        st.success("Both models give the same answer with similar probability (within a factor of 2).")


def candidate_name(cands: list[Candidate], i: int) -> str:
    """'RAG-Token #1 · born in Hawaii' for cands[i]; where two candidates of one decoding read the
    same, their tokens are spelled out (whitespace visible) to tell them apart."""
    c = cands[i]
    kind = DECODING_LABELS[c.decoding]
    twins = sum(o.decoding == c.decoding and o.answer == c.answer for o in cands) > 1
    text = "".join(token_label(t) for t in c.tokens) if twins else c.answer  # same text, other tokens
    return f"{kind} #{c.rank + 1} · {text or '(empty)'}"


def alternatives(cand: Candidate, z: int, i: int) -> str:
    """The top tokens passage z offered at step i, with their probabilities: '␣Paris 0.71   ␣Lyon 0.05'."""
    toks, lps = cand.alt_tokens[z][i], cand.alt_logp[z, i].tolist()
    return "   ".join(f"{token_label(t)} {math.exp(v):.2f}" for t, v in zip(toks, lps) if not math.isnan(v))


# step_frame's columns at 1280 px; a header too long for its column is short, its formula on hover.
STEP_COLUMNS = {
    "passage": 150,
    "prior p(z|x)": 85,
    "p(y_i|x,z,y_<i)": 100,
    "r_i(z)": 60,
    "Π_{j≤i} p(y_j|x,z,y_<j)": (
        "Π p(y_j|…)",
        85,
        "Π_{j≤i} p(y_j|x,z,y_<j): how likely passage z makes the answer up to this step.",
    ),
    "p(z|x,y_≤i)": 85,
    "top alternative tokens under z": (
        "alternatives",
        170,
        "The top alternative tokens under z, with their probabilities.",
    ),
}


def step_frame(w: stepper.Walk, labels: list[str], prior, alts: list[str], i: int) -> pd.DataFrame:
    """Every per-passage number at step i, one row per passage."""
    return pd.DataFrame(
        {
            "passage": labels,
            "prior p(z|x)": prior,
            "p(y_i|x,z,y_<i)": w.p_doc[:, i],
            "r_i(z)": w.resp[:, i],
            "Π_{j≤i} p(y_j|x,z,y_<j)": np.exp(w.logp_prefix[:, i]),
            "p(z|x,y_≤i)": w.posterior[:, i],
            "top alternative tokens under z": alts,
        }
    )


def sequence_frames(trace: Trace, table: stepper.SequenceTable):
    """The thorough and the fast RAG-Sequence tables (candidates × passages, log p(y|x,z)), styled:
    two decimals, log 0 as −∞ and never-scored pairs as “not scored”; the fast one says which
    passages' beams made each answer."""
    cols = [f"z{h.rank}" for h in trace.hits]

    def seq_frame(values: np.ndarray, p: np.ndarray) -> pd.DataFrame:
        f = pd.DataFrame(values, columns=cols)
        f.insert(0, "answer", table.answers)
        f.insert(1, "p_seq", p)
        return f

    def styled(f: pd.DataFrame):
        fmt = {
            c: (lambda v: "not scored" if np.isnan(v) else "−∞" if np.isinf(v) else f"{v:.2f}") for c in cols
        }
        return f.style.format(fmt | {"p_seq": lambda v: "—" if np.isnan(v) else f"{v:.3g}"})

    fast = seq_frame(table.fast, table.p_seq_fast)
    made_by = [", ".join(f"z{trace.hits[z].rank}" for z in sorted(c.sources)) for c in trace.of(RAG_SEQUENCE)]
    fast.insert(2, "made by", made_by)
    return styled(seq_frame(table.thorough, table.p_seq_thorough)), styled(fast)
