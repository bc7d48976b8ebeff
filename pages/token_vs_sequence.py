"""Token vs Sequence: step through one answer and watch both RAG marginals score it."""

import math

import numpy as np
import streamlit as st

from app.token_vs_sequence import step_views
from app.ui import answer_card, charts, source_views, stuffed_views, token_charts, views
from app.ui.safe_text import md_text, passage_label, passage_tick, token_label
from rag_core.loupe.step_by_step import stepper
from rag_core.loupe.vocabulary import RAG_SEQUENCE, RAG_TOKEN, p_text

st.title("Token vs Sequence")
st.caption(
    "RAG-Token mixes the passages at every token: Π_i Σ_z p(z|x) p(y_i|x,z,y_<i). "
    "RAG-Sequence lets each passage write the whole answer, then mixes: Σ_z p(z|x) Π_i p(y_i|x,z,y_<i)."
)

trace = views.need_trace(stuffed=True)
lpz = trace.log_prior
ss = st.session_state

answer_card.answer_cards(trace, "tvs")
step_views.verdict_box(stepper.compare(trace))

# --- which answer, which step (state survives page switches: plain keys, copied into the widgets) ---
cands = trace.of(RAG_TOKEN) + trace.of(RAG_SEQUENCE)


ids = [(c.decoding, c.rank) for c in cands]
chosen = ss.get("tvs_answer") if ss.get("tvs_answer") in ids else ids[0]
ss["tvs_answer_w"] = ids.index(chosen)
pick = st.selectbox(
    "Answer to step through",
    range(len(cands)),
    format_func=lambda i: step_views.candidate_name(cands, i),
    key="tvs_answer_w",
    on_change=lambda: ss.update(tvs_answer=ids[ss["tvs_answer_w"]]),
)
cand = cands[pick]
w = stepper.walk(lpz, cand)
T, K = w.length, trace.k
labels = [passage_label(trace, z, 24) for z in range(K)]
ticks_z = [passage_tick(trace, z) for z in range(K)]
titles = [h.passage.title for h in trace.hits]

m = st.columns(3)
m[0].metric("p_tok (whole answer)", f"{p_text(math.exp(cand.log_p_tok(lpz)))}")
m[1].metric("p_seq (whole answer)", f"{p_text(math.exp(cand.log_p_seq(lpz)))}")
m[2].metric("tokens T", T)
if T == 0:
    st.info("This answer is empty: there is nothing to step through.")
    st.stop()

sources = stepper.top_sources(lpz, cand.token_logp)
frank = stepper.frankenstein_steps(trace, cand)
if frank:
    st.warning(
        f"Frankenstein answer: the passage with the top responsibility r_i(z) changes at step(s) {frank} — "
        "the RAG-Token mixture stitches this answer from different passages (colours below)."
    )
elif all(z is None for z in sources):
    st.caption(
        "No token moves the responsibilities r_i(z) more than 5 points from the prior: the prior decides "
        "which passage each token is credited to (faded boxes)."
    )
else:
    st.caption("Not a Frankenstein: every informative token has the same top-responsibility passage.")

step = min(int(ss.get("tvs_step", 0)), T - 1)


def _move(delta: int) -> None:
    ss["tvs_step"] = max(0, min(T - 1, int(ss.get("tvs_step", 0)) + delta))


nav = st.columns([1, 12, 1], vertical_alignment="bottom")
nav[0].button("◀", key="tvs_prev", on_click=_move, args=(-1,), disabled=step == 0, help="previous token")
nav[2].button("▶", key="tvs_next", on_click=_move, args=(1,), disabled=step == T - 1, help="next token")
if T > 1:
    ss["tvs_step_w"] = step
    nav[1].select_slider(
        "Step i",
        options=list(range(T)),
        key="tvs_step_w",
        on_change=step_views.copy_state,
        args=("tvs_step_w", "tvs_step"),
        format_func=lambda i: f"{i} {token_label(w.tokens[i])}",
    )

st.plotly_chart(
    token_charts.token_strip(w.tokens, w.resp, sources, labels, step), key="tvs_strip", config=charts.NO_BAR
)
st.caption(
    "How to read the strip: each box is one token of the answer, in the colour of the passage that explains "
    "it best (the largest responsibility r_i(z); key below the boxes). A faded box is a token no passage "
    "stands out for: its responsibilities stay within 5 points of the prior, so it would come out much the "
    "same whichever passage was read. ␣ is a space; ↵ is the line break that ends an answer (the default "
    "generator's end token). The outlined box is the step shown below."
)
source_views.section(trace, (cand.decoding,), cand.rank, key="tvs_sources", beside_responsibility=True)

i = step
m = st.columns(4)
m[0].metric("Token y_i", md_text(token_label(w.tokens[i])), help="␣ marks a space, ↵ a line break.")
m[1].metric("RAG-Token mixture p(y_i|x,y_<i)", f"{p_text(w.p_mix[i])}")
m[2].metric("p_tok(y_≤i)", f"{p_text(math.exp(w.log_p_tok[i]))}")
m[3].metric("p_seq(y_≤i)", f"{p_text(math.exp(w.log_p_seq[i]))}")
alts = [step_views.alternatives(cand, z, i) for z in range(K)]
left, right = st.columns(2)
with left:
    st.markdown(f"**p(y_i | x, z, y_<i) per passage at step {i}**")
    st.plotly_chart(
        token_charts.step_bars(ticks_z, titles, w.p_doc[:, i], trace.prior, alts, w.p_mix[i]),
        key="tvs_cond",
        config=charts.NO_BAR,
    )
with right:
    st.markdown("**Which passage gets the credit for y_i**")
    st.caption(
        "Responsibility r_i(z): of the probability RAG-Token gave this token, the share that came from "
        "passage z (0.8 = passage z wrote 80% of it). The prefix posterior p(z|x,y_≤i) is RAG-Sequence's "
        "belief, after the answer so far, that z is the passage the whole answer is written from."
    )
    st.plotly_chart(
        token_charts.credit_bars(ticks_z, titles, trace.prior, w.resp[:, i], w.posterior[:, i]),
        key="tvs_credit",
        config=charts.NO_BAR,
    )

frame = step_views.step_frame(w, labels, trace.prior, alts, i)
views.table(frame, views.widths(step_views.STEP_COLUMNS))
if np.isnan(w.p_doc).any():
    st.caption("Empty cells: fast rescoring never scored this answer under that passage; it counts as p = 0.")

# --- over all steps ---
tab1, tab2 = st.tabs(["Prefix posterior p(z|x,y_≤i)", "Running product Π p(y_j|x,z,y_<j)"])
with tab1:
    st.caption(
        "Before the first token each passage has its prior. Every token then moves belief toward the "
        "passages under which the answer so far is likely, and away from the others; after the last token "
        "this is the citation, p(z|x,y)."
    )
    st.plotly_chart(
        token_charts.over_steps(
            w.posterior,
            labels,
            titles,
            w.tokens,
            i,
            "RAG-Sequence belief in each passage as the answer grows",
            "p(z|x,y_≤i)",
        ),
        key="tvs_posterior",
    )
with tab2:
    st.plotly_chart(
        token_charts.over_steps(
            np.exp(w.logp_prefix),
            labels,
            titles,
            w.tokens,
            i,
            "Each passage's own probability of the prefix (log axis)",
            "Π p(y_j|x,z,y_<j)",
            log=True,
        ),
        key="tvs_running",
    )

# --- RAG-Sequence candidates x passages, thorough and fast ---
st.subheader("RAG-Sequence candidates × passages: log p(y|x,z)")
st.caption(
    "RAG-Sequence runs a beam search under each passage, pools the answers found, then needs p(y|x,z) for "
    "every (answer, passage) pair. Thorough rescoring computes each missing pair with one more forward pass, "
    "so the marginal is exact. Fast rescoring skips them and counts an answer as impossible under any "
    "passage whose own beams did not find it: cheaper, and it can change which answer wins."
)
table = stepper.sequence_table(trace)
if table.answers:
    thorough, fast = step_views.sequence_frames(trace, table)
    st.markdown("**Thorough**: every hypothesis scored under every passage")
    views.table(thorough)
    st.markdown("**Fast**: p(y|x,z) = 0 (log −∞) unless z's own beam produced y")
    views.table(fast)
    best_th, best_fast = (
        int(np.nanargmax(table.p_seq_thorough)) if table.complete else None,
        int(np.argmax(table.p_seq_fast)),
    )
    if best_th is not None and best_th != best_fast:
        st.warning(
            f"Rescoring changes the answer here: thorough picks “{md_text(table.answers[best_th])}”, "
            f"fast would pick “{md_text(table.answers[best_fast])}”."
        )
    if table.complete:
        st.caption(
            "Fast scores come from the thorough table by zeroing the passages that did not produce the "
            "answer; no new model call. Where a rank order differs, the rescoring choice changed the answer."
        )
    else:
        st.info(
            "This trace was decoded with fast rescoring, so the pairs it never scored are empty in the "
            "thorough table. Pick “thorough” in the sidebar to score every pair."
        )
stuffed_views.stepped(trace, "tvs")
