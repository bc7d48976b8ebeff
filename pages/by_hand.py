"""By hand: the worked examples (assets/examples) as editable tables, recomputed live by the engine's own
code."""

import json

import pandas as pd
import streamlit as st

from app.by_hand import by_hand_charts
from app.ui import charts, citation_charts, views
from app.ui.safe_text import md_text
from rag_core.loupe.step_by_step import stepper
from rag_core.loupe.toys import by_hand
from rag_core.loupe.toys import examples as toys
from rag_core.loupe.vocabulary import RAG_SEQUENCE, RAG_TOKEN, p_text

st.title("By hand")
st.caption(
    "Small models you can edit. Every number below comes from the same marginals, decoding and trace code "
    "that runs the real model; change a cell and it recomputes."
)
ss = st.session_state


@st.cache_resource(show_spinner=False, max_entries=64)
def _run(spec_json: str) -> toys.ToyResult:
    return toys.run_spec(json.loads(spec_json))


def run(spec: dict) -> toys.ToyResult:
    return _run(json.dumps(spec, sort_keys=True))


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
        st.error(f"Not applied: {md_text(msg)}. The results show the last valid values.")


# ---------------- (a) two passages, two answers ----------------
st.header("Two passages, two answers")
st.caption(
    "RAG-Sequence scores an answer under each passage as a whole; RAG-Token picks the best passage for each "
    "word, so it can prefer a “Frankenstein” answer that no single passage supports."
)
PRESETS = {"Both marginals agree": "obama", "A Frankenstein answer": "frankenstein"}
preset = PRESETS[
    st.radio(
        "Example",
        list(PRESETS),
        horizontal=True,
        key="hand_preset",
        help="Two hand-made models; edit any cell of either.",
    )
]
TOY = toys.load_spec(preset)
prior_in, cond_in = by_hand.prior_table(TOY), by_hand.next_word_table(TOY)
a, b = st.columns([2, 3])
with a:
    prior_ed = st.data_editor(
        prior_in, key=f"hand_{preset}_prior", hide_index=True, disabled=["passage", "title"]
    )
with b:
    cond_ed = st.data_editor(
        cond_in,
        key=f"hand_{preset}_cond",
        hide_index=True,
        num_rows="dynamic",
        column_config={
            "passage": st.column_config.SelectboxColumn(
                "passage", options=[p["id"] for p in TOY["passages"]], required=True
            )
        },
    )
    st.caption(
        "Per passage, the next word after a prefix. Mass left over goes to “<other>”; after a prefix with no "
        "row, the answer ends."
    )
spec, err = checked(preset, lambda: by_hand.two_answer_spec(TOY, prior_ed, cond_ed), TOY)
show_error(err)
result = run(spec)
with a:
    st.caption(
        "Priors normalised to sum to 1, as used: "
        + " · ".join(
            f"p({h.passage.id}|x) = {p_text(p)}" for h, p in zip(result.hits, by_hand.prior_probs(result))
        )
    )
rows = by_hand.answer_rows(result)
m = st.columns(2 * len(rows))
for j, r in enumerate(rows):
    m[2 * j].metric(f"p_seq({md_text(r['answer'])})", f"{p_text(r['p_seq'])}")
    m[2 * j + 1].metric(f"p_tok({md_text(r['answer'])})", f"{p_text(r['p_tok'])}")
left, right = st.columns([2, 3])
with left:
    st.plotly_chart(by_hand_charts.answer_bars(rows), key="hand_obama_chart", config=charts.NO_BAR)
with right:
    st.caption(
        "How the numbers come out: p_seq = Σ_z p(z|x) p(y|x,z); p_tok = the product of the per-word mixtures "
        "Σ_z p(z|x) p(y_i|x,z,y_<i). The last step is the end token “</s>”. The table below has every factor."
    )
    dec = {d: result.decoded.answer(d) for d in (RAG_TOKEN, RAG_SEQUENCE)}
    st.caption(
        "Decoding this toy (2 beams) writes: "
        + " · ".join(f"{d}: {md_text(c.answer) if c else '—'}" for d, c in dec.items())
    )
    stitched = stepper.frankenstein_steps(result.decoded, dec[RAG_TOKEN]) if dec[RAG_TOKEN] else []
    if stitched and dec[RAG_SEQUENCE] and dec[RAG_TOKEN].answer != dec[RAG_SEQUENCE].answer:
        st.warning(
            f"Frankenstein: RAG-Token's “{md_text(dec[RAG_TOKEN].answer)}” changes passage at word(s) "
            f"{', '.join(str(i + 1) for i in stitched)} (the top responsibility moves to another passage); "
            f"RAG-Sequence keeps the answer one passage writes, “{md_text(dec[RAG_SEQUENCE].answer)}”."
        )

views.table(pd.DataFrame(rows))  # full width: one column per factor

# ---------------- (b) the retriever in two dimensions ----------------
st.header("The retriever in two dimensions")
st.caption("Score s(z) = d(z)·q(x), the inner product; prior p(z|x) = softmax(scale · s) over the passages.")
PULSE = toys.load_spec("softmax")
vec_in = by_hand.vector_table(PULSE).iloc[1:]  # the passages; the query has its sliders
a, b = st.columns([2, 3])
with a:
    qx = st.slider("Move the query: q x", -1.5, 1.5, float(PULSE["query_vector"][0]), 0.05, key="hand_q_x")
    qy = st.slider("Move the query: q y", -1.5, 1.5, float(PULSE["query_vector"][1]), 0.05, key="hand_q_y")
    vec_ed = st.data_editor(vec_in, key="hand_pulse_vec", hide_index=True, disabled=["vector"])
    scale = st.number_input(
        "scale",
        value=float(PULSE.get("scale", 1.0)),
        min_value=0.0,
        max_value=100.0,
        step=0.5,
        key="hand_pulse_scale",
    )
spec, err = checked("pulse", lambda: by_hand.vector_spec(PULSE, vec_ed, scale, (qx, qy)), PULSE)
pulse = run(spec)
probs = by_hand.prior_probs(pulse)
with a:
    show_error(err)
    views.table(by_hand.retriever_table(pulse))
fig = by_hand_charts.retriever_plane(
    pulse.hits, probs, [p["vector"] for p in spec["passages"]], spec["query_vector"]
)
with b:
    m = st.columns(len(probs))
    for col, h, p in zip(m, pulse.hits, probs):
        col.metric(f"p({h.passage.id}|x)", f"{p_text(p)}")
    st.plotly_chart(fig, key="hand_pulse_chart", config=charts.NO_BAR)
    st.caption(
        "Marker size grows with p(z|x). Hover a point for its score. Drag the query's sliders: the "
        "passage the query points along gains the prior, and a larger scale sharpens the race."
    )

# ---------------- (c) prior to posterior ----------------
st.header("Prior to posterior")
st.caption(
    "One-word answer y. Bayes: p(z|x,y) = p(z|x) p(y|x,z) / Σ_z' p(z'|x) p(y|x,z'). "
    "The passage that explains the answer better gains belief."
)
POST = toys.load_spec("posterior")
word = POST["candidates"][0]
post_in = by_hand.posterior_table(POST)
a, b = st.columns([2, 3])
with a:
    post_ed = st.data_editor(post_in, key="hand_post", hide_index=True, disabled=["passage"])
    st.caption(" · ".join(f"{p['id']}: {md_text(p['title'])}" for p in POST["passages"]))
spec, err = checked("post", lambda: by_hand.posterior_spec(POST, post_ed), POST)
show_error(err)
res = run(spec)
posterior = by_hand.posterior(res)
with a:
    m = st.columns(len(posterior))
    for col, h, p in zip(m, res.hits, posterior):
        col.metric(f"p({h.passage.id}|x,y)", f"{p_text(p)}")
with b:
    st.plotly_chart(
        citation_charts.slope_chart(
            [h.passage.id for h in res.hits],
            [h.passage.title for h in res.hits],
            by_hand.prior_probs(res),
            posterior,
            f"Answer “{word}”",
            height=320,
        ),
        key="hand_post_chart",
        config=charts.NO_BAR,
    )
