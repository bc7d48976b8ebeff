"""Where an answer came from: per token (one passage, several, or the model's weights), the strip of
coloured tokens Ask and Token vs Sequence show; per sentence of a passage (leave one sentence out),
the bars the Citations page shows."""
from __future__ import annotations

import pandas as pd
import streamlit as st

from app import charts, state
from app.views import passage_label, table
from rag_core.analysis.token_sources import PASSAGE, SEVERAL, WEIGHTS, shares
from rag_core.config import RAG_SEQUENCE, RAG_TOKEN
from rag_core.marginals import citation
from rag_core.trace import Trace

EXPLAINED = ("Each token's probability with the passages is set beside the same model's with no passage "
             "(closed-book, same prefix). A token the passages made at least twice as likely is credited to the "
             "passage that carries two thirds of it, or to several passages; any other token came from the "
             "model's own weights. ␣ marks the space a token starts with; ↵, in a light grey box, is the line "
             "break that ends the answer, credited to nothing. Hover a token for the numbers.")


def share_line(found) -> str:
    sh = shares(found)
    return (f"{sh[PASSAGE]:.0%} of the tokens from one passage · {sh[SEVERAL]:.0%} from several · "
            f"{sh[WEIGHTS]:.0%} from the model's weights")


def section(trace: Trace, decodings=(RAG_TOKEN, RAG_SEQUENCE), rank: int = 0, key: str = "sources") -> None:
    """The heading, the plain-words rule and the strips."""
    st.markdown("**Where each token came from**: one passage, several, or the model's own weights")
    st.caption(EXPLAINED)
    token_sources(trace, decodings, rank, key)


def token_sources(trace: Trace, decodings=(RAG_TOKEN, RAG_SEQUENCE), rank: int = 0, key: str = "sources") -> None:
    """One strip per decoding's candidate `rank` (0: the answer), side by side."""
    cands = [(d, next((c for c in trace.of(d) if c.rank == rank), None)) for d in decodings]
    cands = [(d, c) for d, c in cands if c is not None and c.token_ids]
    if not cands:
        return
    labels = [passage_label(trace, z) for z in range(trace.k)]
    for col, (d, c) in zip(st.columns(len(cands)), cands):
        found = state.token_sources(trace, d, c.rank)
        if found is None:
            continue
        col.caption(f"{'RAG-Token' if d == RAG_TOKEN else 'RAG-Sequence'}: {share_line(found)}")
        col.plotly_chart(charts.source_strip(c.tokens, found, labels), config=charts.NO_BAR, key=f"{key}_{d}_{c.rank}")


def sentence_section(trace: Trace, cand, key: str = "sent") -> None:
    """Which sentence of a passage carried the answer: Δ log p(y|x,z) with each sentence left out."""
    st.subheader("Which sentence carried it")
    st.caption("The passage is read again with each sentence left out in turn, and the answer scored under each "
               "(one batched pass). The bar is how much less likely the answer becomes without that sentence "
               "(Δ log p, in nats): long green bars are the sentences the answer rests on. Exact: nothing is sampled "
               "or fitted.")
    top = int(citation(trace.log_prior, cand.token_logp).argmax())
    z = st.selectbox("Passage", range(trace.k), index=top, key=f"{key}_z",
                     format_func=lambda i: passage_label(trace, i, 60) + (" (the one it cites most)" if i == top else ""))
    if not cand.token_ids:
        st.info("This answer is empty.")
        return
    att = state.sentence_attribution(trace, cand, z)
    if att is None:
        return
    if not att.sentences:
        st.info("This passage has no text to split into sentences.")
        return
    st.plotly_chart(charts.sentence_bars(att.rows()), key=f"{key}_bars", config=charts.NO_BAR)
    table(pd.DataFrame(att.rows())[["rank", "sentence", "delta_logp", "text"]], hide_index=True,
          column_config={"text": st.column_config.TextColumn("text", width="large")})
