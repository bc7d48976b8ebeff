"""Citations: which passages an answer leans on, per answer and per token, and what removing one does."""

import math

import numpy as np
import pandas as pd
import streamlit as st

from app.ui import answer_card, charts, citation_charts, source_views, stuffed_views, views
from app.ui.safe_text import passage_label, passage_tick
from rag_core.loupe.step_by_step import stepper
from rag_core.loupe.vocabulary import DECODING_LABELS, STUFFED, p_text

st.title("Citations")
st.caption(
    "Before the answer, the retriever's prior p(z|x). After it, the posterior p(z|x,y) ∝ p(z|x) p(y|x,z): "
    "the passage that best explains the answer gains, the rest lose. "
    "That posterior is the model's own citation."
)

trace = views.need_trace(stuffed=True)
lpz = trace.log_prior
K = trace.k
labels = [passage_label(trace, z, 26) for z in range(K)]
titles = [h.passage.title for h in trace.hits]
answers = {name: trace.answer(d) for d, name in DECODING_LABELS.items() if trace.answer(d) is not None}
if not answers:
    st.info("This trace has no decoded answer.")
    st.stop()

# --- prior -> posterior ---
cols = st.columns(len(answers))
for col, (name, cand) in zip(cols, answers.items()):
    post = views.citation(lpz, cand)  # (K,)
    with col:
        st.plotly_chart(
            citation_charts.slope_chart(labels, titles, trace.prior, post, f"{name}: “{cand.answer}”"),
            key=f"cit_slope_{name}",
            config=charts.NO_BAR,
        )
        answer_card.note(trace, cand)
if any(np.isnan(c.token_logp.numpy()).any() for c in answers.values()):
    st.caption(
        "Fast rescoring: a passage that never produced the answer counts p(y|x,z) = 0, so its posterior is 0."
    )

# --- responsibility heatmap ---
st.subheader("Token by token: RAG-Token responsibility r_i(z)")
st.caption(
    "r_i(z) = p(z|x) p(y_i|x,z,y_<i) / Σ_z' (…): of the probability RAG-Token gave token i, the share that "
    "came from passage z. Columns sum to 1. A column that looks like the prior means the token does not care "
    "which passage it reads."
)
which = st.radio("Answer", list(answers), horizontal=True, key="cit_which")
cand = answers[which]
w = stepper.walk(lpz, cand)
if w.length:
    st.plotly_chart(
        citation_charts.responsibility_heatmap(w.tokens, w.resp, w.p_doc, trace.prior, titles, labels),
        key="cit_heatmap",
        config=charts.NO_BAR,
    )  # no toolbar over the token labels on top
else:
    st.info("This answer is empty.")

source_views.sentence_section(trace, cand, key="cit_sent")
stuffed_views.worth_section(trace, "cit")
stuffed_views.token_section(trace, "cit")
source_views.sentence_section(trace, trace.answer(STUFFED), key="cit_stuffed_sent", stuffed=True)
stuffed_views.order_section(trace, "cit")

# --- remove a passage ---
st.subheader("Remove a passage")
drop = st.multiselect(
    "Passages to remove",
    list(range(K)),
    format_func=lambda z: labels[z],
    key="cit_drop",
    help="The prior is renormalised over the passages you keep; the conditionals stay as computed.",
)
keep = [z not in drop for z in range(K)]
if not any(keep):
    st.warning("Keep at least one passage.")
    st.stop()

rows, after = [], {}
for name, c in answers.items():
    d = stepper.remarginalise(lpz, c, keep)
    after[name] = d
    rows.append(
        {
            "answer": f"{name}: {c.answer}",
            "p_tok before": math.exp(c.log_p_tok(lpz)),
            "p_tok after": math.exp(d.log_p_tok),
            "p_seq before": math.exp(c.log_p_seq(lpz)),
            "p_seq after": math.exp(d.log_p_seq),
        }
    )
m = st.columns(2 * len(rows))
for j, (name, r) in enumerate(zip(answers, rows)):
    for k, which_p in enumerate(("p_tok", "p_seq")):
        delta = r[which_p + " after"] - r[which_p + " before"]
        m[2 * j + k].metric(
            f"{name} answer · {which_p}",
            f"{p_text(r[which_p + ' after'])}",
            f"{delta:+.3f} after removal" if drop else None,
        )
numbers = pd.DataFrame(rows)
views.table(numbers)

ticks = [passage_tick(trace, z) for z in range(K)]
fig = citation_charts.drop_chart(
    [f"{n}: {c.answer}" for n, c in answers.items()],
    [views.citation(lpz, c) for c in answers.values()],
    [after[n].citation for n in answers],
    ticks,
    titles,
    keep,
)
st.plotly_chart(fig, key="cit_drop_chart")
st.caption(
    "Two kinds of “remove a passage”. Here the answers stay fixed: the same tokens are re-marginalised over "
    "the passages left (prior renormalised, no new model call), "
    "which shows how much each answer leaned on the "
    "removed ones. The Ask page's counterfactuals instead choose the answer again without them, so there the "
    "answer itself can change."
)
