"""Where an answer came from: per token (from the passages, or already known to the model, with or
without a passage holding it), the strip of coloured tokens Ask and Token vs Sequence show; per
sentence of a passage (leave one sentence out), the bars the Citations page shows."""

from __future__ import annotations

import pandas as pd
import streamlit as st

from app import state
from app.ui import charts, citation_charts, token_charts
from app.ui.safe_text import passage_label
from app.ui.views import table
from rag_core.loupe.stuffed_reading import stuffed_worth
from rag_core.loupe.token_sources import (
    LABELS,
    MEANINGS,
    SHOWN,
    credit_differences,
    differing_steps,
    kind,
    shares,
)
from rag_core.loupe.vocabulary import DECODING_LABELS, RAG_SEQUENCE, RAG_TOKEN, Trace, citation

EXPLAINED = (
    "Each token's probability with the passages is set beside the same model's with no passage "
    "(closed-book, same prefix). A token the passages made at least twice as likely came from "
    "the passages: from one passage when it carries two thirds of that, else from several. Any "
    "other token the model already gives without them: “in a passage, already known” when a "
    "retrieved passage contains its word, “not in any passage” when none does. ␣ marks the space "
    "a token starts with; ↵, in a light grey box, is the line break that ends the answer, credited "
    "to nothing. Hover a token for the numbers."
)


def share_line(found) -> str:
    """'60% from one passage · 40% in a passage, already known': each shown category that holds a token."""
    sh = shares(found, shown=True)
    return " · ".join(f"{sh[k]:.0%} {LABELS[k]}" for k in SHOWN if sh[k] > 0) or "no content token"


def key_line(found) -> str:
    """One line under a strip: what each category it shows measures."""
    shown = {kind(s) for s in found}
    return " · ".join(f"{LABELS[k].capitalize()}: {MEANINGS[k]}" for k in SHOWN if k in shown)


def section(
    trace: Trace,
    decodings=(RAG_TOKEN, RAG_SEQUENCE),
    rank: int = 0,
    key: str = "sources",
    beside_responsibility: bool = False,
) -> None:
    """The heading, the plain-words rule and the strips; `beside_responsibility`: the page also
    shows this answer coloured by r_i(z) (Token vs Sequence), so say where the two strips differ."""
    st.markdown(
        "**Where each token came from**: from the passages, or already known to the model (with or "
        "without a passage that holds it)"
    )
    st.caption(EXPLAINED)
    token_sources(trace, decodings, rank, key, beside_responsibility)


def token_sources(
    trace: Trace,
    decodings=(RAG_TOKEN, RAG_SEQUENCE),
    rank: int = 0,
    key: str = "sources",
    beside_responsibility: bool = False,
) -> None:
    """One strip per decoding's candidate `rank` (0: the answer), side by side, each with the line
    that says what its categories measure."""
    cands = [(d, next((c for c in trace.of(d) if c.rank == rank), None)) for d in decodings]
    cands = [(d, c) for d, c in cands if c is not None and c.token_ids]
    if not cands:
        return
    labels = [passage_label(trace, z) for z in range(trace.k)]
    drawn = {}
    for col, (d, c) in zip(st.columns(len(cands)), cands):
        found = state.token_sources_of(trace, d, c.rank)
        if found is None:
            continue
        drawn[d] = (c, found)
        col.caption(f"{DECODING_LABELS[d]}: {share_line(found)}")
        col.plotly_chart(
            token_charts.source_strip(c.tokens, found, labels),
            config=charts.NO_BAR,
            key=f"{key}_{d}_{c.rank}",
        )
        col.caption(key_line(found))
    if beside_responsibility and len(drawn) == 1:
        st.caption(agreement_line(trace, *next(iter(drawn.values()))))
    elif len(drawn) == 2 and drawn[RAG_TOKEN][0].token_ids == drawn[RAG_SEQUENCE][0].token_ids:
        steps = differing_steps(drawn[RAG_TOKEN][1], drawn[RAG_SEQUENCE][1])
        if steps:
            st.caption(
                f"The same answer, credited differently at step(s) {', '.join(map(str, steps))}: "
                "each strip weighs the passages by its own marginal, RAG-Token by the prior p(z|x) at "
                "every token, RAG-Sequence by p(z|x,y_<i), what the answer so far says about its "
                "passage."
            )


def agreement_line(trace: Trace, cand, found) -> str:
    """Whether this strip and the strip above it (coloured by RAG-Token's responsibility r_i(z))
    show a token in the same passage's colour, and why they may not."""
    if cand.decoding == RAG_TOKEN:
        return (
            "Both strips credit a token by the same responsibility r_i(z): a token shown in a passage's "
            "colour here has that colour in the strip above."
        )
    steps = credit_differences(found, trace.log_prior, cand.token_logp)
    where = (
        f"Here they name a different passage at step(s) {', '.join(map(str, steps))}."
        if steps
        else "Here every token this strip credits to one passage has that passage's colour above too."
    )
    return (
        "Why this strip can differ from the one above: that one colours each token by RAG-Token's "
        "responsibility r_i(z), the passages weighed by the prior p(z|x); this RAG-Sequence answer is "
        "credited under its own marginal, the passages weighed by p(z|x,y_<i) (what the answer so far "
        "says about its passage), so its gains multiply to p_seq. " + where
    )


def sentence_section(trace: Trace, cand, key: str = "sent", stuffed: bool = False) -> None:
    """Which sentence of a passage carried the answer: Δ log p(y|x,z) with each sentence left out;
    `stuffed`: `cand` is the stuffed reading's answer (None: it has none), the passage read inside
    the K passages' one prompt."""
    st.subheader("Which sentence carried the stuffed answer" if stuffed else "Which sentence carried it")
    st.caption(
        (
            f"The {trace.k} passages are read again in one prompt with each sentence of the chosen passage "
            "left out in turn"
            if stuffed
            else "The passage is read again with each sentence left out in turn"
        )
        + ", and the answer scored under each (one batched pass). The bar is how much less likely the "
        "answer becomes without that sentence (Δ log p, in nats): long green bars are the sentences the "
        "answer rests on. Exact: nothing is sampled or fitted."
    )
    worth = stuffed_worth.of(trace) if stuffed else None
    if cand is None or (stuffed and worth is None):
        st.info("The stuffed reading has no answer to explain here." if stuffed else "There is no answer.")
        return
    top = worth.leans_on if stuffed else int(citation(trace.log_prior, cand.token_logp).argmax())
    z = st.selectbox(
        "Passage",
        range(trace.k),
        index=top,
        key=f"{key}_z",
        format_func=lambda i: (
            passage_label(trace, i, 60)
            + ((" (the one it leans on most)" if stuffed else " (the one it cites most)") if i == top else "")
        ),
    )
    if not cand.token_ids:
        st.info("This answer is empty.")
        return
    # On demand, as the other orders are: one more reading per sentence, seconds on a CPU, and
    # the page's other parts need none of it (`ask --sentences` asks for it the same way).
    if not st.toggle("Read it with each sentence left out (one batch)", key=f"{key}_on"):
        return
    att = state.sentence_attribution(trace, cand, z)
    if att is None:
        return
    if not att.sentences:
        st.info("This passage has no text to split into sentences.")
        return
    st.plotly_chart(citation_charts.sentence_bars(att.rows()), key=f"{key}_bars", config=charts.NO_BAR)
    table(
        pd.DataFrame(att.rows())[["rank", "sentence", "delta_logp", "text"]],
        hide_index=True,
        column_config={"text": st.column_config.TextColumn("text", width="large")},
    )
