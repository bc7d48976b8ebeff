"""Citations: which passages an answer leans on, per answer and per token, and what removing one does."""
import math

import numpy as np
import pandas as pd
import plotly.graph_objects as go
import streamlit as st
from plotly.subplots import make_subplots

from app import views
from rag_core import marginals, stepper

st.title("Citations")
st.caption("Before the answer, the retriever's prior p(z|x). After it, the posterior p(z|x,y) ∝ p(z|x) p(y|x,z): "
           "the passage that best explains the answer gains, the rest lose. That posterior is the model's own citation.")

trace = views.need_trace()
lpz = trace.log_prior
K = trace.k
labels = [views.passage_label(trace, z, 26) for z in range(K)]
titles = [h.passage.title for h in trace.hits]
answers = {name: trace.answer(d) for name, d in (("RAG-Token", "rag-token"), ("RAG-Sequence", "rag-sequence"))
           if trace.answer(d) is not None}
if not answers:
    st.info("This trace has no decoded answer.")
    st.stop()

# --- prior -> posterior ---
cols = st.columns(len(answers))
for col, (name, cand) in zip(cols, answers.items()):
    post = marginals.citation(lpz, cand.token_logp).numpy()  # (K,)
    with col:
        st.plotly_chart(views.slope_chart(labels, titles, trace.prior, post, f"{name}: “{cand.answer}”"),
                        key=f"cit_slope_{name}", config={"displayModeBar": False})
if any(np.isnan(c.token_logp.numpy()).any() for c in answers.values()):
    st.caption("Fast rescoring: a passage that never produced the answer counts p(y|x,z) = 0, so its posterior is 0.")

# --- responsibility heatmap ---
st.subheader("Token by token: RAG-Token responsibility r_i(z)")
st.caption("r_i(z) = p(z|x) p(y_i|x,z,y_<i) / Σ_z' (…): how much of token i each passage explains. "
           "Columns sum to 1. A column that looks like the prior means the token does not care which passage it reads.")
which = st.radio("Answer", list(answers), horizontal=True, key="cit_which")
cand = answers[which]
w = stepper.walk(lpz, cand)
if w.length:
    toks = [views.token_label(t) for t in w.tokens]
    hover = [[f"token {i}: {views.plot_text(toks[i])}<br>{views.plot_text(titles[z])}<br>r_i(z) = {w.resp[z, i]:.3f}"
              f"<br>p(y_i|x,z,y_&lt;i) = {w.p_doc[z, i]:.3f}<br>prior p(z|x) = {trace.prior[z]:.3f}"
              for i in range(w.length)] for z in range(K)]
    fig = go.Figure(go.Heatmap(z=w.resp, x=list(range(w.length)), y=list(range(K)), zmin=0, zmax=1, colorscale="Blues",
                               hovertext=hover, hoverinfo="text", colorbar=dict(title="r_i(z)"),
                               text=np.round(w.resp, 2), texttemplate="%{text}"))
    fig.update_layout(height=90 + 38 * K, margin=dict(l=10, r=10, t=20, b=10),
                      xaxis=dict(tickmode="array", tickvals=list(range(w.length)),
                                 ticktext=[views.plot_text(t, 14) for t in toks], side="top"),
                      yaxis=dict(tickmode="array", tickvals=list(range(K)), ticktext=[views.plot_text(l) for l in labels],
                                 autorange="reversed"))
    st.plotly_chart(fig, key="cit_heatmap")
else:
    st.info("This answer is empty.")

# --- remove a passage ---
st.subheader("Remove a passage")
drop = st.multiselect("Passages to remove", list(range(K)), format_func=lambda z: labels[z], key="cit_drop",
                      help="The prior is renormalised over the passages you keep; the conditionals stay as computed.")
keep = [z not in drop for z in range(K)]
if not any(keep):
    st.warning("Keep at least one passage.")
    st.stop()

rows, after = [], {}
for name, c in answers.items():
    d = stepper.remarginalise(lpz, c, keep)
    after[name] = d
    rows.append({"answer": f"{name}: {c.answer}", "p_tok before": math.exp(c.log_p_tok(lpz)), "p_tok after": math.exp(d.log_p_tok),
                 "p_seq before": math.exp(c.log_p_seq(lpz)), "p_seq after": math.exp(d.log_p_seq)})
m = st.columns(2 * len(rows))
for j, (name, r) in enumerate(zip(answers, rows)):
    for k, which_p in enumerate(("p_tok", "p_seq")):
        delta = r[which_p + " after"] - r[which_p + " before"]
        m[2 * j + k].metric(f"{name} answer · {which_p}", f"{r[which_p + ' after']:.3f}",
                            f"{delta:+.3f} after removal" if drop else None)
numbers = pd.DataFrame(rows)
st.dataframe(numbers, hide_index=True, width="stretch",
             column_config={c: st.column_config.NumberColumn(c, format="%.4f") for c in numbers.columns[1:]})

fig = make_subplots(rows=1, cols=len(answers), subplot_titles=[views.plot_text(f"{n}: {c.answer}", 40) for n, c in answers.items()],
                    shared_yaxes=True)
for j, (name, c) in enumerate(answers.items(), start=1):
    before = marginals.citation(lpz, c.token_logp).numpy()
    for series, vals, color in (("posterior before", before, "#c6cbf7"), ("posterior after", after[name].citation, "#636EFA")):
        fig.add_trace(go.Bar(name=series, x=[views.passage_tick(trace, z) for z in range(K)], y=vals, marker_color=color,
                             showlegend=j == 1, legendgroup=series, hoverinfo="text",
                             hovertext=[f"{views.plot_text(titles[z])}<br>{series}: {vals[z]:.3f}"
                                        + ("<br>(removed)" if not keep[z] else "") for z in range(K)]), row=1, col=j)
fig.update_xaxes(tickangle=0, tickfont=dict(size=11))
fig.update_layout(barmode="group", height=380, margin=dict(l=10, r=10, t=70, b=10), yaxis=dict(range=[0, 1.05]),
                  legend=dict(orientation="h", y=1.08, yanchor="bottom", x=0))
st.plotly_chart(fig, key="cit_drop_chart")
st.caption("Removing a passage keeps the decoded tokens fixed: the same answers are re-marginalised over the passages "
           "left, with no new model call. Decoding again without the passage might write a different answer.")
