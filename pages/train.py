"""Train: the paper's training signal for the retriever on the current question (the query pulled
toward the passages that explain the answer), steps along it, and fine-tuning on a question file."""

import streamlit as st

from app import state
from app.train import train_charts, train_views
from app.ui import expected_answers, views
from app.ui.safe_text import md_text
from rag_core.loupe.training import DEFAULT_STEP_SIZE, WalkError
from rag_core.loupe.vocabulary import first_line

st.title("Train")
st.caption(
    "RAG learns which passages to retrieve without ever being told: it only sees questions and answers. "
    "Differentiating log p(y|x) through the prior gives "
    "∂ log p(y|x)/∂q = scale · Σ_z (p(z|x,y) − p(z|x)) d(z). "
    "In words: the query vector q moves toward every passage that explained the answer better than the "
    "retriever expected (posterior above prior) and away from the rest."
)

asked = state.answer_settings()
question = state.question()
scale = float(asked.scale or state.models().encoder.default_scale)
views.about_query(question, asked.index, f"K={asked.k} · scale {scale:g}")

last = st.session_state.get("_train_answer")  # widget state is dropped on other pages: this copy is not
if "train_expected" not in st.session_state or st.session_state.get("_train_for") != question:
    st.session_state["_train_for"] = question  # a new question (or a return): its own answer, or a prefill
    typed = st.session_state.get("diag_expected", "") if st.session_state.get("_diag_for") == question else ""
    st.session_state["train_expected"] = (
        last["answer"]
        if last and last["question"] == question
        else (typed or expected_answers.prefill(question)).split("|")[0].strip()
    )
c1, c2, c3, c4 = st.columns([2, 1, 1, 1])
answer = c1.text_input(
    "Expected answer y",
    key="train_expected",
    max_chars=300,
    help="The answer whose likelihood the query climbs (filled from the Ask page's Diagnose box).",
)
marginal = c2.radio(
    "Marginal",
    ["sequence", "token"],
    key="train_marginal",
    horizontal=True,
    format_func=lambda m: f"RAG-{m.title()}",
)
step_size = c3.select_slider(
    "Step size η",
    [0.005, 0.01, 0.02, 0.05, 0.1, 0.2],
    value=DEFAULT_STEP_SIZE,
    key="train_eta",
    help="q ← q + η · gradient, then back to unit length (MiniLM's vectors all have length 1).",
)
steps = c4.slider("Steps", 0, 20, 5, key="train_steps")
st.session_state["_train_answer"] = {
    "question": question,
    "answer": answer,
    "marginal": marginal,
    "step_size": float(step_size),
}  # the Map's "training pull" reads it
if not answer.strip():
    st.info("Type the expected answer to see where it pulls the query.")
    train_views.fine_tune_panel(asked)
    st.stop()
start = train_views.moved_start(question, asked.index)  # off unless the user turns it on: q(x) pulls the most
if start is not None and not st.toggle(
    "Start from the query you moved on the Map",
    key="train_from_moved",
    persist_state="session",
    help="Off: start from q(x), the question's own query vector. On: from the point you clicked on the "
    "Map, to watch training pull it back.",
):
    start = None
try:
    w = train_views.walk(
        state.stack_key(),
        question,
        asked.index,
        answer,
        marginal,
        asked.k,
        asked.scale,
        float(step_size),
        int(steps),
        start,
    )
except (WalkError, *state.USER_ERRORS) as e:
    st.error(md_text(first_line(e, "the walk could not be taken")))
    st.stop()


def labels(step):
    return [f"z{h.rank} · {h.passage.title[:28]}" for h in step.hits]


first = w.steps[0]
st.subheader("The pull at the start")
if w.still:
    why = (
        "K = 1: the one passage has prior 1 and posterior 1"
        if len(first.hits) == 1
        else "every passage explains the answer equally well, so the posterior equals the prior"
    )
    st.info(
        f"Nothing moves: {why}. Every bracket is 0, so the gradient is the zero vector and the retriever "
        "learns nothing from this answer."
    )
st.caption(
    "Each bar is the bracket of one passage: how much more (green) or less (red) it explains the answer "
    "than the retriever expected. "
    + (
        "RAG-Sequence: posterior minus prior."
        if marginal == "sequence"
        else "RAG-Token: per-token responsibility minus prior, summed over the answer's tokens."
    )
    + " The bars sum to 0."
)
st.plotly_chart(
    train_charts.pull_bars(
        labels(first),
        [h.passage.title for h in first.hits],
        first.bracket,
        first.prior,
        first.posterior,
        marginal,
    ),
    key="train_pull",
    config={"displayModeBar": False},
)

st.subheader("Taking steps")
lls = [s.log_likelihood for s in w.steps]
gaps = [0.5 * float((s.posterior - s.prior).abs().sum()) for s in w.steps]
m1, m2, m3 = st.columns(3)
flat = len(lls) > 1 and not w.still and train_charts.no_measurable_change(lls)
m1.metric(
    "log p(y|x)",
    f"{lls[-1]:.3f}",
    None if flat else f"{lls[-1] - lls[0]:+.3f} since step 0",
    delta_color="normal",
)
m2.metric(
    "gap between prior and posterior",
    f"{gaps[-1]:.3f}",
    None if abs(gaps[-1] - gaps[0]) < 5e-4 else f"{gaps[-1] - gaps[0]:+.3f}",
    delta_color="inverse",
    help="½ Σ_z |p(z|x,y) − p(z|x)|: 0 when the retriever already ranks as the answer would.",
)
m3.metric(
    "generator passes",
    w.generator_passes,
    help="One teacher-forced pass for the first top K, then one per step where a new passage entered.",
)
if flat:
    st.info(
        f"No measurable change: log p(y|x) stays within {train_charts.NO_CHANGE:g} of its start over "
        f"{len(lls) - 1} step(s) (p(y|x) moves by less than 1 %). "
        + ("It starts from the query you moved on the Map; there " if start is not None else "Here ")
        + "the passages of the top K explain the answer about as well as the retriever expected (the "
        "brackets above are small), so little pulls the query."
    )
st.caption(
    "As q climbs, the prior moves toward the posterior and log p(y|x) rises. A passage that enters the "
    "top K (a bigger dot) is read by the generator once; the others are remembered. The log p(y|x) "
    f"axis spans at least {train_charts.MIN_LOG_P_SPAN:g}, so a small change draws as a small slope."
)
st.plotly_chart(
    train_charts.walk_lines(lls, gaps, [len(s.entered) for s in w.steps]),
    key="train_lines",
    config={"displayModeBar": False},
)
t = st.slider("Show step", 0, len(w.steps) - 1, len(w.steps) - 1, key="train_show") if len(w.steps) > 1 else 0
st.plotly_chart(
    train_charts.prior_posterior_bars(labels(w.steps[t]), w.steps[t].prior, w.steps[t].posterior),
    key="train_bars",
    config={"displayModeBar": False},
)
views.table(
    train_views.moves_table(w),
    hide_index=True,
    column_config=views.widths({"step": 50, "log p(y|x)": 90, "gap": 70, "generator passes": 90}),
)

st.subheader("On the map")
fig, how = train_views.walk_map(w, asked.index)
st.caption(
    f"The query's path (red arrows, from the star) on {how}, among the passages nearest to where it "
    "started. Rings: passages of some step's top K, green if they entered it, red if they left it."
)
st.plotly_chart(fig, key="train_map")

st.divider()
train_views.fine_tune_panel(asked)
