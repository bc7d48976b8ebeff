"""By hand: the seed's worked examples as editable tables, recomputed live by the engine's own code."""
import copy
import json
import math

import numpy as np
import pandas as pd
import plotly.graph_objects as go
import streamlit as st

from app import views
from rag_core import marginals, toys

st.title("By hand")
st.caption("Small models you can edit. Every number below comes from the same marginals, decoding and trace code "
           "that runs the real model; change a cell and it recomputes.")
ss = st.session_state
START = "(start)"


class BadInput(ValueError):
    """An edit that cannot be a probability model; the message says which cell and why."""


@st.cache_resource(show_spinner=False, max_entries=64)
def _run(spec_json: str) -> toys.ToyResult:
    return toys.run_spec(json.loads(spec_json))


def run(spec: dict) -> toys.ToyResult:
    return _run(json.dumps(spec, sort_keys=True))


def numbers(col: pd.Series, what: str, probability: bool = True) -> list[float]:
    vals = pd.to_numeric(col, errors="coerce")
    if vals.isna().any() or not np.isfinite(vals.to_numpy(dtype=float)).all():
        raise BadInput(f"every {what} needs a number (row {int(vals.isna().to_numpy().argmax()) + 1} does not)")
    if probability and (vals < 0).any():
        raise BadInput(f"a {what} cannot be negative (row {int((vals < 0).to_numpy().argmax()) + 1})")
    if probability and (vals > 1).any():
        raise BadInput(f"a {what} cannot be above 1 (row {int((vals > 1).to_numpy().argmax()) + 1})")
    return vals.astype(float).tolist()


def checked(name: str, build, default: dict) -> tuple[dict, str | None]:
    """The spec from the edited tables, or the last good one and one error message (no traceback)."""
    try:
        spec = build()
        run(spec)
    except (ValueError, KeyError, TypeError, RuntimeError) as e:  # BadInput and ToyError are ValueErrors
        return ss.get(f"hand_ok_{name}", default), str(e) or "that edit does not make a valid model"
    ss[f"hand_ok_{name}"] = spec
    return spec, None


def show_error(msg: str | None) -> None:
    if msg:
        st.error(f"Not applied: {views.md_text(msg)}. The results show the last valid values.")


# ---------------- (a) two passages, two answers ----------------
st.header("Two passages, two answers")
st.caption("RAG-Sequence scores an answer under each passage as a whole; RAG-Token picks the best passage for each "
           "word, so it can prefer a “Frankenstein” answer that no single passage supports.")
OBAMA = toys.load_spec("obama")
prior_in = pd.DataFrame([{"passage": p["id"], "title": p["title"], "prior p(z|x)": p["prior"]} for p in OBAMA["passages"]])
cond_in = pd.DataFrame([{"passage": z, "after": pre or START, "next word": word, "p(word|x,z,after)": p}
                        for z, table in OBAMA["tables"].items() for pre, dist in table.items() for word, p in dist.items()])
a, b = st.columns([2, 3])
with a:
    prior_ed = st.data_editor(prior_in, key="hand_obama_prior", hide_index=True, disabled=["passage", "title"])
    st.caption("Priors are normalised to sum to 1.")
with b:
    cond_ed = st.data_editor(cond_in, key="hand_obama_cond", hide_index=True, num_rows="dynamic", column_config={
        "passage": st.column_config.SelectboxColumn("passage", options=[p["id"] for p in OBAMA["passages"]], required=True)})
    st.caption("Per passage, the next word after a prefix. Mass left over goes to “<other>”; after a prefix with no "
               "row, the answer ends.")


def obama_spec() -> dict:
    spec = copy.deepcopy(OBAMA)
    for p, v in zip(spec["passages"], numbers(prior_ed["prior p(z|x)"], "prior")):
        p["prior"] = v
    rows = cond_ed.dropna(how="all")
    probs = numbers(rows["p(word|x,z,after)"], "probability")
    tables: dict = {p["id"]: {} for p in spec["passages"]}
    for (_, r), p in zip(rows.iterrows(), probs):
        word, after = str(r["next word"] if pd.notna(r["next word"]) else "").strip(), r["after"]
        after = "" if pd.isna(after) or str(after).strip() in ("", START) else " ".join(str(after).split())
        if r["passage"] not in tables or not word or " " in word:
            raise BadInput("each row needs a passage and one next word (no spaces)")
        dist = tables[r["passage"]].setdefault(after, {})
        dist[word] = dist.get(word, 0.0) + p
        if sum(dist.values()) > 1 + 1e-9:
            raise BadInput(f"under {r['passage']} the next-word probabilities after “{after or START}” add up to more than 1")
    spec["tables"] = tables
    return spec


spec, err = checked("obama", obama_spec, OBAMA)
show_error(err)
result = run(spec)
lpz = result.log_prior
rows = []
for c in result.trace.of("rag-sequence"):
    p_doc = marginals.doc_sequence_logp(c.token_logp).exp().tolist()  # (K,) p(y|x,z)
    mix = marginals.token_mixture(lpz, c.token_logp).exp().tolist()  # (T,)
    row = {"answer": c.answer, "p_seq": math.exp(c.log_p_seq(lpz)), "p_tok": math.exp(c.log_p_tok(lpz))}
    row |= {f"p(y|x,{h.passage.id})": p for h, p in zip(result.hits, p_doc)}
    row |= {f"mixture at y_{j + 1}": v for j, v in enumerate(mix)}
    rows.append(row)
order = {a: i for i, a in enumerate(OBAMA["candidates"])}
rows.sort(key=lambda r: order.get(r["answer"], 99))
m = st.columns(2 * len(rows))
for j, r in enumerate(rows):
    m[2 * j].metric(f"p_seq({r['answer']})", f"{r['p_seq']:.3f}")
    m[2 * j + 1].metric(f"p_tok({r['answer']})", f"{r['p_tok']:.3f}")
left, right = st.columns([2, 3])
with left:
    fig = go.Figure([go.Bar(name=n, x=[views.plot_text(r["answer"]) for r in rows], y=[r[n] for r in rows], marker_color=col,
                            text=[f"{r[n]:.3f}" for r in rows], textposition="outside", hoverinfo="text",
                            hovertext=[f"{views.plot_text(r['answer'])}: {n} = {r[n]:.3f}" for r in rows])
                     for n, col in (("p_seq", "#EF553B"), ("p_tok", "#636EFA"))])
    fig.update_layout(barmode="group", height=300, margin=dict(l=10, r=10, t=30, b=10), yaxis=dict(range=[0, 1]),
                      legend=dict(orientation="h", y=1.0, yanchor="bottom", x=0))
    st.plotly_chart(fig, key="hand_obama_chart", config={"displayModeBar": False})
with right:
    st.caption("How the numbers come out: p_seq = Σ_z p(z|x) p(y|x,z); p_tok = the product of the per-word mixtures "
               "Σ_z p(z|x) p(y_i|x,z,y_<i). The last step is the end token “</s>”.")
    st.dataframe(pd.DataFrame(rows), hide_index=True,
                 column_config={c: st.column_config.NumberColumn(c, format="%.3f") for c in rows[0] if c != "answer"})
    dec = {d: result.decoded.answer(d) for d in ("rag-token", "rag-sequence")}
    st.caption("Decoding this toy (2 beams) writes: " + " · ".join(
        f"{d}: {views.md_text(c.answer) if c else '—'}" for d, c in dec.items()))

# ---------------- (b) the retriever in two dimensions ----------------
st.header("The retriever in two dimensions")
st.caption("Score s(z) = d(z)·q(x), the inner product; prior p(z|x) = softmax(scale · s) over the passages.")
PULSE = toys.load_spec("softmax")
vec_in = pd.DataFrame([{"vector": "q (query)", "x": PULSE["query_vector"][0], "y": PULSE["query_vector"][1]}]
                      + [{"vector": p["id"], "x": p["vector"][0], "y": p["vector"][1]} for p in PULSE["passages"]])
a, b = st.columns([2, 3])
with a:
    vec_ed = st.data_editor(vec_in, key="hand_pulse_vec", hide_index=True, disabled=["vector"])
    scale = st.number_input("scale", value=float(PULSE.get("scale", 1.0)), min_value=0.0, max_value=100.0, step=0.5,
                            key="hand_pulse_scale")


def pulse_spec() -> dict:
    spec = copy.deepcopy(PULSE)
    xs, ys = numbers(vec_ed["x"], "coordinate", False), numbers(vec_ed["y"], "coordinate", False)
    spec["query_vector"] = [xs[0], ys[0]]
    for p, x, y in zip(spec["passages"], xs[1:], ys[1:]):
        p["vector"] = [x, y]
    spec["scale"] = float(scale)
    return spec


spec, err = checked("pulse", pulse_spec, PULSE)
pulse = run(spec)
probs = pulse.log_prior.exp().tolist()
with a:
    show_error(err)
    st.dataframe(pd.DataFrame({"passage": [h.passage.id for h in pulse.hits], "s(z) = d·q": [h.score for h in pulse.hits],
                               "p(z|x)": probs}), hide_index=True,
                 column_config={"s(z) = d·q": st.column_config.NumberColumn(format="%.3f"),
                                "p(z|x)": st.column_config.NumberColumn(format="%.3f")})
q = spec["query_vector"]
fig = go.Figure()
for j, (h, p) in enumerate(zip(pulse.hits, probs)):
    x, y = spec["passages"][j]["vector"]
    fig.add_trace(go.Scatter(x=[0, x], y=[0, y], mode="lines+markers+text", name=views.plot_text(h.passage.id),
                             line=dict(color=views.passage_color(j), width=2), marker=dict(size=[0, 10 + 40 * p]),
                             text=["", views.plot_text(f"{h.passage.id}  p={p:.3f}")], textposition="top right",
                             hoverinfo="text", hovertext=["", f"{views.plot_text(h.passage.id)} ({x:g}, {y:g})<br>"
                                                              f"s = {h.score:.3f}<br>p(z|x) = {p:.3f}"]))
fig.add_trace(go.Scatter(x=[0, q[0]], y=[0, q[1]], mode="lines+markers+text", name="query q",
                         line=dict(color="black", width=3, dash="dash"), marker=dict(size=[0, 14], symbol="star"),
                         text=["", "q"], textposition="bottom right", hoverinfo="text",
                         hovertext=["", f"query q ({q[0]:g}, {q[1]:g})"]))
fig.update_layout(height=380, margin=dict(l=10, r=10, t=10, b=10), legend=dict(orientation="h", y=1.0, yanchor="bottom"),
                  yaxis=dict(scaleanchor="x", scaleratio=1, zeroline=True), xaxis=dict(zeroline=True))
with b:
    m = st.columns(len(probs))
    for col, h, p in zip(m, pulse.hits, probs):
        col.metric(f"p({h.passage.id}|x)", f"{p:.3f}")
    st.plotly_chart(fig, key="hand_pulse_chart", config={"displayModeBar": False})
    st.caption("Marker size grows with p(z|x). Hover a point for its score.")

# ---------------- (c) prior to posterior ----------------
st.header("Prior to posterior")
st.caption("One-word answer y. Bayes: p(z|x,y) = p(z|x) p(y|x,z) / Σ_z' p(z'|x) p(y|x,z'). "
           "The passage that explains the answer better gains belief.")
POST = toys.load_spec("posterior")
word = POST["candidates"][0]
post_in = pd.DataFrame([{"passage": p["id"], "prior p(z|x)": p["prior"],
                         f"p({word}|x,z)": POST["tables"][p["id"]][""][word]} for p in POST["passages"]])
a, b = st.columns([2, 3])
with a:
    post_ed = st.data_editor(post_in, key="hand_post", hide_index=True, disabled=["passage"])
    st.caption(" · ".join(f"{p['id']}: {views.md_text(p['title'])}" for p in POST["passages"]))


def post_spec() -> dict:
    spec = copy.deepcopy(POST)
    priors, conds = numbers(post_ed["prior p(z|x)"], "prior"), numbers(post_ed[f"p({word}|x,z)"], "probability")
    for p, pr, c in zip(spec["passages"], priors, conds):
        p["prior"] = pr
        spec["tables"][p["id"]] = {"": {word: c}}
    return spec


spec, err = checked("post", post_spec, POST)
show_error(err)
res = run(spec)
cand = res.trace.candidates[0]
posterior = marginals.citation(res.log_prior, cand.token_logp).tolist()
with a:
    m = st.columns(len(posterior))
    for col, h, p in zip(m, res.hits, posterior):
        col.metric(f"p({h.passage.id}|x,y)", f"{p:.3f}")
with b:
    st.plotly_chart(views.slope_chart([h.passage.id for h in res.hits], [h.passage.title for h in res.hits],
                                      res.log_prior.exp().tolist(), posterior, f"Answer “{word}”", height=320),
                    key="hand_post_chart", config={"displayModeBar": False})
