"""The stuffed reading on the pages: what each passage is worth to its answer beside the mixture's
posterior of the same answer (Ask, Citations), the worth token by token (Citations), and its answer
stepped token by token with the alternatives and every passage left out in turn (Token vs Sequence).
The numbers are `rag_core.analysis.attribution.stuffed_worth`'s; titles and tokens are shown as plain text.
"""

from __future__ import annotations

import math

import pandas as pd
import streamlit as st

from app import state
from app.ui import charts, stuffed_charts, views
from app.ui.safe_text import md_text, passage_label, passage_tick, token_label
from rag_core.loupe.stuffed_reading import StuffedWorth, orders, stuffed_worth
from rag_core.loupe.vocabulary import Trace, p_text

WHAT_IT_IS = (
    "The stuffed reading is how most deployed RAG systems read: the K passages together in one prompt, "
    "in rank order, decoded with the same search as the two marginals. There is no mixture, so no "
    "posterior: what a passage is worth is measured exactly by reading the same prompt without it "
    "(leave-one-out: K more prompts, computed together in one forward)."
)


def _worth(trace: Trace) -> StuffedWorth | None:
    """The worth table, or a note saying why there is none (nothing is drawn then)."""
    w = stuffed_worth.of(trace)
    if w is None:
        st.caption(
            "The stuffed reading was not read for this trace."
            if trace.stuffed is None
            else "The stuffed reading's answer is empty: no passage has anything to be worth."
        )
    return w


def worth_frame(trace: Trace, w: StuffedWorth) -> pd.DataFrame:
    """Per passage: the prior, p(y|x, all but z), the worth, and the mixture's posterior of the
    same answer."""
    rows = []
    for z in range(trace.k):
        row = {
            "passage": passage_label(trace, z),
            "prior p(z|x)": float(trace.prior[z]),
            "p(y|x, all but z)": w.p_without[z],
            "worth (nats)": float(w.worth[z]),
        }
        if w.mixture is not None:
            row["mixture p(z|x,y)"] = float(w.mixture[z])
        rows.append(row)
    return pd.DataFrame(rows)


def agreement_line(trace: Trace, w: StuffedWorth) -> str:
    """The finding in words, from the numbers: the passage the stuffed reading leans on and the one
    the mixture's posterior of the same answer cites (titles escaped)."""
    lean = trace.hits[w.leans_on]
    text = f"The stuffed reading leans most on z{lean.rank} ({md_text(lean.passage.title)})"
    if w.cites is None:
        return text + "."
    cite = trace.hits[w.cites]
    if w.agree:
        return text + ", the passage the mixture's posterior of the same answer cites too."
    cited = f"z{cite.rank} ({md_text(cite.passage.title)})"
    return text + f"; the mixture's posterior of the same answer cites {cited}."


def worth_section(trace: Trace, key: str) -> None:
    """'What each passage is worth to the stuffed reading', beside the mixture's posterior."""
    st.subheader("What each passage is worth to the stuffed reading")
    w = _worth(trace)
    if w is None:
        return
    st.caption(
        f"For the stuffed answer “{md_text(w.answer.answer)}” (p = {p_text(w.p)} with all {trace.k} "
        "passages): "
        "left, how many nats the answer loses when passage z is taken out of the prompt (negative: it is "
        "more likely without z); right, the mixture's posterior p(z|x,y) of the same answer, each passage "
        "read alone. Does the stuffed model lean on the passage the mixture cites?"
    )
    ticks = [passage_tick(trace, z) for z in range(trace.k)]
    titles = [h.passage.title for h in trace.hits]
    st.plotly_chart(
        stuffed_charts.worth_chart(w, ticks, titles, trace.prior), key=f"{key}_worth", config=charts.NO_BAR
    )
    (st.success if w.agree else st.info)(agreement_line(trace, w))
    views.table(
        worth_frame(trace, w), probabilities=("prior p(z|x)", "p(y|x, all but z)", "mixture p(z|x,y)")
    )


def token_section(trace: Trace, key: str) -> None:
    """The worth token by token: which passage carried which token of the stuffed answer."""
    st.subheader("Token by token: what taking a passage out costs the stuffed answer")
    w = _worth(trace)
    if w is None:
        return
    st.caption(
        "log p(y_i|x, all, y_<i) − log p(y_i|x, all but z, y_<i), in nats: red where passage z carried "
        "token i, blue where the token is more likely without it. Each row is one exact reading of the "
        "prompt without z."
    )
    labels = [passage_label(trace, z, 26) for z in range(trace.k)]
    titles = [h.passage.title for h in trace.hits]
    st.plotly_chart(
        stuffed_charts.token_worth_heatmap(w, labels, titles), key=f"{key}_token_worth", config=charts.NO_BAR
    )


def stepped(trace: Trace, key: str) -> None:
    """The stuffed answer token by token: its own p, the tokens it weighed, and each passage out."""
    st.subheader("The stuffed reading, step by step")
    st.caption(WHAT_IT_IS)
    w = _worth(trace)
    if w is None:
        return
    T = len(w.answer.tokens)
    i = 0
    if T > 1:
        i = st.select_slider(
            "Step i of the stuffed answer",
            options=list(range(T)),
            key=f"{key}_stuffed_step",
            format_func=lambda j: f"{j} {token_label(w.answer.tokens[j])}",
        )
    m = st.columns(3)
    token = md_text(token_label(w.answer.tokens[i]))
    m[0].metric("Stuffed token y_i", token, help="␣ marks a space, ↵ a line break.")
    m[1].metric("p(y_i | x, all K, y_<i)", p_text(w.p_token[i]))
    prefix = float(w.answer.token_logp[0, : i + 1].double().sum())  # log p(y_≤i | x, all K)
    m[2].metric("p(y_≤i | x, all K)", p_text(math.exp(prefix)))
    left, right = st.columns(2)
    with left:
        st.markdown(f"**p(y_i | x, all but z, y_<i) at step {i}**")
        ticks = [passage_tick(trace, z) for z in range(trace.k)]
        titles = [h.passage.title for h in trace.hits]
        st.plotly_chart(
            stuffed_charts.step_chart(w, i, ticks, titles), key=f"{key}_stuffed_bars", config=charts.NO_BAR
        )
    with right:
        st.markdown(f"**The tokens the stuffed reading weighed at step {i}**")
        views.table(alternatives_frame(w, i), probabilities=("p",))


def alternatives_frame(w: StuffedWorth, i: int) -> pd.DataFrame:
    """The stuffed row's top tokens at step i with their p (the chosen token is one of them)."""
    toks, lps = w.answer.alt_tokens[0][i], w.answer.alt_logp[0, i].tolist()
    return pd.DataFrame(
        [{"token": token_label(t), "p": math.exp(v)} for t, v in zip(toks, lps) if not math.isnan(v)]
    )


def order_name(trace: Trace, o) -> str:
    """'reversed', 'z3 first', 'z5 last', with the prompt's order: 'z3 first · z3 z1 z2 z4 z5'."""
    kind = o.kind if o.moved is None else f"z{trace.hits[o.moved].rank} {o.kind}"
    return f"{kind} · " + " ".join(f"z{trace.hits[i].rank}" for i in o.order)


def order_frame(trace: Trace, w: StuffedWorth, readings: list) -> pd.DataFrame:
    """Per order: its own answer with its p, whether it changes the answer, and p of the retrieved
    order's answer under it."""
    answer = w.answer.answer
    rows = [
        {
            "order": "as retrieved · " + " ".join(f"z{h.rank}" for h in trace.hits),
            "its answer": answer,
            "p (its answer)": w.p,
            f"p(“{answer}”)": w.p,
            "changes the answer": False,
        }
    ]
    for o in readings:
        rows.append(
            {
                "order": order_name(trace, o),
                "its answer": o.answer,
                "p (its answer)": o.p,
                f"p(“{answer}”)": math.exp(o.logp_answer),
                "changes the answer": stuffed_worth.changes_answer(o, answer),
            }
        )
    return pd.DataFrame(rows)


def order_section(trace: Trace, key: str) -> None:
    """Does the order of the passages change the stuffed answer? (The other orders, on demand.)"""
    st.subheader("Does the order of the passages matter to the stuffed reading?")
    w = _worth(trace)
    others = len(orders(trace.k))
    if w is None or not others:
        if w is not None:
            st.caption("One passage has no other order.")
        return
    st.caption(
        "The same passages reversed, and each moved first and last: each order is decoded afresh, and "
        f"the stuffed answer “{md_text(w.answer.answer)}” is scored under it. A reader that weighs a "
        "passage by where it stands, not by what it says, answers differently here. The mixture has no "
        "order: its answers are the same for every one."
    )
    if not st.toggle(f"Read the {others} other orders (one batch)", key=f"{key}_orders"):
        return
    readings = state.stuffed_orders(trace)
    if readings is None:
        return
    frame = order_frame(trace, w, readings)
    changed = int(frame["changes the answer"].sum())
    st.markdown(f"**{changed} of {len(readings)} other orders change the answer.**")
    st.plotly_chart(stuffed_charts.order_chart(frame, w.answer.answer), key=f"{key}_order_chart")
    views.table(frame, probabilities=(frame.columns[2], frame.columns[3]))
