"""Token vs Sequence: step through one answer and watch both RAG marginals score it."""
import math

import numpy as np
import pandas as pd
import plotly.graph_objects as go
import streamlit as st

from app import views
from rag_core import stepper

st.title("Token vs Sequence")
st.caption("RAG-Token mixes the passages at every token: Π_i Σ_z p(z|x) p(y_i|x,z,y_<i). "
           "RAG-Sequence lets each passage write the whole answer, then mixes: Σ_z p(z|x) Π_i p(y_i|x,z,y_<i).")

trace = views.need_trace()
lpz = trace.log_prior
ss = st.session_state

views.answer_cards(trace)
verdict = stepper.compare(trace)
if verdict is not None and verdict.kind == "different answers":
    st.warning(f"The two models disagree. RAG-Token answers “{views.md_text(verdict.token_answer)}”, "
               f"RAG-Sequence answers “{views.md_text(verdict.sequence_answer)}”. Step through each below to see why.")
elif verdict is not None and verdict.kind == "same answer, different p":
    st.warning(f"Same answer, very different probability: p_seq / p_tok = {math.exp(verdict.log_ratio):.2f}.")
elif verdict is not None:
    st.success("Both models give the same answer with similar probability (within a factor of 2).")

# --- which answer, which step (state survives page switches: plain keys, copied into the widgets) ---
cands = trace.of("rag-token") + trace.of("rag-sequence")


def _name(i: int) -> str:
    c = cands[i]
    kind = "RAG-Token" if c.decoding == "rag-token" else "RAG-Sequence"
    twins = sum(o.decoding == c.decoding and o.answer == c.answer for o in cands) > 1
    text = "".join(views.token_label(t) for t in c.tokens) if twins else c.answer  # same text, other tokens
    return f"{kind} #{c.rank + 1} · {text or '(empty)'}"


def _copy(src: str, dst: str) -> None:
    ss[dst] = ss[src]


ids = [(c.decoding, c.rank) for c in cands]
chosen = ss.get("tvs_answer") if ss.get("tvs_answer") in ids else ids[0]
ss["tvs_answer_w"] = ids.index(chosen)
pick = st.selectbox("Answer to step through", range(len(cands)), format_func=_name, key="tvs_answer_w",
                    on_change=lambda: ss.update(tvs_answer=ids[ss["tvs_answer_w"]]))
cand = cands[pick]
w = stepper.walk(lpz, cand)
T, K = w.length, trace.k
labels = [views.passage_label(trace, z, 24) for z in range(K)]
ticks_z = [views.passage_tick(trace, z) for z in range(K)]
titles = [h.passage.title for h in trace.hits]

m = st.columns(3)
m[0].metric("p_tok (whole answer)", f"{math.exp(cand.log_p_tok(lpz)):.3f}")
m[1].metric("p_seq (whole answer)", f"{math.exp(cand.log_p_seq(lpz)):.3f}")
m[2].metric("tokens T", T)
if T == 0:
    st.info("This answer is empty: there is nothing to step through.")
    st.stop()

sources = stepper.top_sources(lpz, cand.token_logp)
frank = stepper.frankenstein_steps(trace, cand)
if frank:
    st.warning(f"Frankenstein answer: the passage with the top responsibility r_i(z) changes at step(s) {frank} — "
               "the RAG-Token mixture stitches this answer from different passages (colours below).")
elif all(z is None for z in sources):
    st.caption("No token moves the responsibilities r_i(z) more than 5 points from the prior: the prior decides "
               "which passage each token is credited to (faded boxes).")
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
    nav[1].select_slider("Step i", options=list(range(T)), key="tvs_step_w", on_change=_copy, args=("tvs_step_w", "tvs_step"),
                         format_func=lambda i: f"{i} {views.token_label(w.tokens[i])}")


def token_strip() -> go.Figure:
    """The answer as boxes coloured by the top-responsibility passage; faded: r_i(z) stays near the prior."""
    top = w.resp.argmax(axis=0)  # (T,)
    colors = [views.passage_color(int(z)) for z in top]
    hover = [f"step {i}: {views.plot_text(views.token_label(t))}<br>top r_i(z): {views.plot_text(labels[top[i]])} "
             f"({w.resp[top[i], i]:.2f})" + ("" if sources[i] is not None else "<br>responsibility ≈ prior: little evidence")
             for i, t in enumerate(w.tokens)]
    fig = go.Figure(go.Bar(x=list(range(T)), y=[1] * T, marker=dict(color=colors, opacity=[
        1.0 if z is not None else 0.35 for z in sources], line=dict(
        color=["black" if i == step else "white" for i in range(T)], width=[4 if i == step else 1 for i in range(T)])),
        text=[views.plot_text(views.token_label(t)) for t in w.tokens], textposition="inside", insidetextanchor="middle",
        hovertext=hover, hoverinfo="text", width=0.96))
    fig.update_layout(height=110, margin=dict(l=5, r=5, t=5, b=5), bargap=0.02, showlegend=False,
                      xaxis=dict(visible=False), yaxis=dict(visible=False), uniformtext=dict(minsize=10, mode="show"))
    return fig


st.plotly_chart(token_strip(), key="tvs_strip", config={"displayModeBar": False})

i = step
m = st.columns(4)
m[0].metric("Token y_i", views.token_label(w.tokens[i]), help="␣ marks a space, ↵ a line break.")
m[1].metric("RAG-Token mixture p(y_i|x,y_<i)", f"{w.p_mix[i]:.3f}")
m[2].metric("p_tok(y_≤i)", f"{math.exp(w.log_p_tok[i]):.3f}")
m[3].metric("p_seq(y_≤i)", f"{math.exp(w.log_p_seq[i]):.3f}")


def alternatives(z: int) -> str:
    toks, lps = cand.alt_tokens[z][i], cand.alt_logp[z, i].tolist()
    return "   ".join(f"{views.token_label(t)} {math.exp(v):.2f}" for t, v in zip(toks, lps) if not math.isnan(v))


alts = [alternatives(z) for z in range(K)]
left, right = st.columns(2)
axis_z = dict(tickangle=0, tickfont=dict(size=11))
with left:
    st.markdown(f"**p(y_i | x, z, y_<i) per passage at step {i}**")
    hover = [f"{views.plot_text(titles[z])}<br>p(y_i|x,z,y_&lt;i) = {w.p_doc[z, i]:.3f}<br>prior {trace.prior[z]:.3f}"
             f"<br>top tokens: {views.plot_text(alts[z])}" for z in range(K)]
    fig = go.Figure(go.Bar(x=ticks_z, y=np.nan_to_num(w.p_doc[:, i]),
                           marker_color=[views.passage_color(z) for z in range(K)], hovertext=hover, hoverinfo="text"))
    fig.add_hline(y=float(w.p_mix[i]), line_dash="dash", annotation_text=f"mixture {w.p_mix[i]:.3f}")
    fig.update_layout(height=320, showlegend=False, margin=dict(l=10, r=10, t=30, b=10), yaxis=dict(range=[0, 1.05]),
                      xaxis=axis_z)
    st.plotly_chart(fig, key="tvs_cond", config={"displayModeBar": False})
with right:
    st.markdown("**Which passage gets the credit for y_i**")
    fig = go.Figure()
    for name, vals, color in (("prior p(z|x)", trace.prior, "#bbbbbb"), ("responsibility r_i(z)", w.resp[:, i], "#636EFA"),
                              ("prefix posterior p(z|x,y_≤i)", w.posterior[:, i], "#EF553B")):
        fig.add_trace(go.Bar(name=name, x=ticks_z, y=vals, marker_color=color,
                             hovertext=[f"{views.plot_text(titles[z])}<br>{name}: {vals[z]:.3f}" for z in range(K)],
                             hoverinfo="text"))
    fig.update_layout(barmode="group", height=320, yaxis=dict(range=[0, 1.05]), xaxis=axis_z,
                      margin=dict(l=10, r=10, t=30, b=10), legend=dict(orientation="h", y=1.0, yanchor="bottom", x=0))
    st.plotly_chart(fig, key="tvs_credit", config={"displayModeBar": False})

frame = pd.DataFrame({"passage": labels, "prior p(z|x)": trace.prior, "p(y_i|x,z,y_<i)": w.p_doc[:, i],
                      "r_i(z)": w.resp[:, i], "Π_{j≤i} p(y_j|x,z,y_<j)": np.exp(w.logp_prefix[:, i]),
                      "p(z|x,y_≤i)": w.posterior[:, i], "top alternative tokens under z": alts})
st.dataframe(frame, hide_index=True, width="stretch", column_config={
    c: st.column_config.NumberColumn(c, format="%.4f") for c in frame.columns[1:-1]})
if np.isnan(w.p_doc).any():
    st.caption("Empty cells: fast rescoring never scored this answer under that passage; it counts as p = 0.")

# --- over all steps ---
ticks = dict(tickmode="array", tickvals=list(range(T)),
             ticktext=[views.plot_text(f"{j} {views.token_label(t)}", 14) for j, t in enumerate(w.tokens)])


def over_steps(values: np.ndarray, title: str, ytitle: str, log: bool = False) -> go.Figure:
    fig = go.Figure()
    for z in range(K):
        fig.add_trace(go.Scatter(x=list(range(T)), y=values[z], mode="lines+markers", name=views.plot_text(labels[z]),
                                 line=dict(color=views.passage_color(z)), hoverinfo="text",
                                 hovertext=[f"{views.plot_text(titles[z])}<br>step {j} {views.plot_text(views.token_label(t))}"
                                            f"<br>{ytitle} = {v:.4g}" for j, (t, v) in enumerate(zip(w.tokens, values[z]))]))
    fig.add_vline(x=i, line_dash="dot", line_color="black")
    fig.update_layout(title=title, height=360, xaxis=ticks, margin=dict(l=10, r=10, t=50, b=10),
                      yaxis=dict(title=ytitle, type="log" if log else "linear"))
    return fig


tab1, tab2 = st.tabs(["Prefix posterior p(z|x,y_≤i)", "Running product Π p(y_j|x,z,y_<j)"])
with tab1:
    st.plotly_chart(over_steps(w.posterior, "RAG-Sequence belief in each passage as the answer grows", "p(z|x,y_≤i)"),
                    key="tvs_posterior")
with tab2:
    st.plotly_chart(over_steps(np.exp(w.logp_prefix), "Each passage's own probability of the prefix (log axis)",
                               "Π p(y_j|x,z,y_<j)", log=True), key="tvs_running")

# --- RAG-Sequence candidates x passages, thorough and fast ---
st.subheader("RAG-Sequence candidates × passages: log p(y|x,z)")
table = stepper.sequence_table(trace)
if table.answers:
    cols = [f"z{h.rank}" for h in trace.hits]
    sources_col = [", ".join(f"z{trace.hits[z].rank}" for z in sorted(c.sources)) for c in trace.of("rag-sequence")]

    def seq_frame(values: np.ndarray, p: np.ndarray) -> pd.DataFrame:
        f = pd.DataFrame(values, columns=cols)
        f.insert(0, "answer", table.answers)
        f.insert(1, "p_seq", p)
        return f

    def styled(f: pd.DataFrame):
        """Two decimals; log 0 as −∞ and never-scored pairs as “not scored”."""
        fmt = {c: (lambda v: "not scored" if np.isnan(v) else "−∞" if np.isinf(v) else f"{v:.2f}") for c in cols}
        return f.style.format(fmt | {"p_seq": lambda v: "—" if np.isnan(v) else f"{v:.4f}"})

    a, b = st.columns(2)
    with a:
        st.markdown("**Thorough**: every hypothesis scored under every passage")
        st.dataframe(styled(seq_frame(table.thorough, table.p_seq_thorough)), hide_index=True)
    with b:
        st.markdown("**Fast**: p(y|x,z) = 0 (log −∞) unless z's own beam produced y")
        fast = seq_frame(table.fast, table.p_seq_fast)
        fast.insert(2, "made by", sources_col)
        st.dataframe(styled(fast), hide_index=True)
    best_th, best_fast = int(np.nanargmax(table.p_seq_thorough)) if table.complete else None, int(np.argmax(table.p_seq_fast))
    if best_th is not None and best_th != best_fast:
        st.warning(f"Rescoring changes the answer here: thorough picks “{views.md_text(table.answers[best_th])}”, "
                   f"fast would pick “{views.md_text(table.answers[best_fast])}”.")
    if table.complete:
        st.caption("Fast scores come from the thorough table by zeroing the passages that did not produce the answer; "
                   "no new model call. Where a rank order differs, the rescoring choice changed the answer.")
    else:
        st.info("This trace was decoded with fast rescoring, so the pairs it never scored are empty in the thorough "
                "table. Pick “thorough” in the sidebar to score every pair.")
