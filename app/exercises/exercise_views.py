"""The Exercises page's parts: choosing an exercise, what the student sees before answering (a toy's
numbers, or the question with its retrieved passages), the answer form, the reveal with the page
that shows the figure, and the class's counts for the teacher."""

from __future__ import annotations

import pandas as pd
import plotly.graph_objects as go
import streamlit as st

from app import stack, state
from app.ui import charts, detours
from app.ui.palette import REASONED_GREY, RIGHT_GREEN, WRONG_RED
from app.ui.safe_text import md_text, plot_text
from rag_core.loupe import exercises as ex
from rag_core.loupe.answers import USER_ERRORS
from rag_core.loupe.toys import examples
from rag_core.loupe.vocabulary import REPO_ROOT

EXERCISES_PAGE = REPO_ROOT / "pages" / "exercises.py"
PAGE_FILES = {
    "Ask": "ask.py",
    "Map": "map.py",
    "Token vs Sequence": "token_vs_sequence.py",
    "Citations": "citations.py",
    "Index swap": "index_swap.py",
    "By hand": "by_hand.py",
    "Train": "train.py",
    "Eval": "eval.py",
}
PROGRESS = "exercise_progress"  # session key: {exercise id: {"given", "right", "figure"}}


FORGET = "exercise_forget"  # session key: the next run tells the browser to forget its kept answers


def progress() -> dict:
    return st.session_state.setdefault(PROGRESS, {})


def forget() -> None:
    """'Forget my answers': this session's now, the browser's on the next run."""
    progress().clear()
    st.session_state[FORGET] = True


def choose(items: list[ex.Exercise]) -> ex.Exercise:
    """The exercise the student works on: a pick list in order (labels that never change, so the
    pick stays put when an answer is kept), with a Next button."""
    ids = [e.id for e in items]
    titles = {e.id: f"{n}. {e.title} ({e.page})" for n, e in enumerate(items, 1)}
    ss = st.session_state
    if ss.get("exercise_pick") not in ids:
        ss["exercise_pick"] = ids[0]
    pick = st.selectbox("Exercise", ids, format_func=titles.__getitem__, key="exercise_pick")
    return items[ids.index(pick)]


def marks(items: list[ex.Exercise]) -> str:
    """One mark per exercise, in order: ✓ right, ✗ not, ✎ a reason written, · not yet answered."""
    symbol = {None: "✎", True: "✓", False: "✗"}
    done = progress()
    return " ".join(symbol[done[e.id]["right"]] if e.id in done else "·" for e in items)


def next_button(items: list[ex.Exercise], current: ex.Exercise) -> None:
    ids = [e.id for e in items]
    at = ids.index(current.id)
    if at + 1 < len(ids):
        st.button("Next exercise", on_click=st.session_state.__setitem__, args=("exercise_pick", ids[at + 1]))


def toy_setup(item: ex.Exercise) -> None:
    """A toy's numbers, as the student needs them to work the answer out."""
    spec = examples.load_spec(item.params["toy"])
    rows = []
    for p in spec["passages"]:
        row = {"passage": p["id"], "text": p.get("text", "")}
        row |= {"prior p(z|x)": p["prior"]} if "prior" in p else {"vector d(z)": str(p.get("vector"))}
        rows.append(row)
    if "query_vector" in spec:
        st.text(f"Query vector q(x) = {spec['query_vector']}, scale {spec.get('scale', 1.0)}")
    else:
        st.text(f"Question: {spec.get('question', '')}")
    st.dataframe(pd.DataFrame(rows), hide_index=True)
    tables = [
        {"passage": pid, "after": prefix or "(start)", "next word": word, "p(word | x, z, words so far)": p}
        for pid, table in spec.get("tables", {}).items()
        for prefix, dist in table.items()
        for word, p in dist.items()
    ]
    if tables:
        with st.expander("Each passage's next-word probabilities"):
            st.dataframe(pd.DataFrame(tables), hide_index=True)


def live_setup(item: ex.Exercise, engine: ex.LoupeEngine) -> bool:
    """The question and its retrieved passages (titles only: their numbers are what is asked);
    False when the answer is not ready (waiting in line) or cannot be computed (said on the page)."""
    question, index = item.params["question"], item.params.get("index")
    st.text(f"Question: {question}")
    indexes = ("2016", "2018") if item.figure == "swap_follows" else (index,)
    for name in indexes:
        if state.trace_for(question, name) is None:  # waits in the line; shows a user error
            return False
    if item.figure != "swap_follows":
        trace = engine.trace(question, index)
        st.caption(f"Retrieved from the {md_text(trace.index)} index, K = {trace.k}:")
        st.dataframe(
            passages_frame(trace),
            hide_index=True,
        )
    return True


def passages_frame(trace) -> pd.DataFrame:
    """The retrieved passages as the student sees them before answering: rank, title and text."""
    return pd.DataFrame({"passage": ex.passage_options(trace), "text": [h.passage.text for h in trace.hits]})


def answer_form(item: ex.Exercise, options: tuple[str, ...]):
    """The student's answer (a number, an option, or a reason), or None until they reveal."""
    with st.form(f"exercise_form_{item.id}"):
        if item.ask == ex.NUMBER:
            given = st.number_input("Your answer", min_value=0.0, max_value=1.0, value=None, format="%.3f")
        elif item.ask == ex.CHOICE:
            given = st.radio("Your answer", options, index=None, format_func=md_text)  # titles are text
        else:
            given = st.text_area("Your reason", max_chars=600)
        sent = st.form_submit_button("Reveal the engine's answer")
    if not sent:
        return None
    if given is None or (isinstance(given, str) and not given.strip()):
        st.warning("Work it out first: give an answer, then reveal.")
        return None
    return given


def reveal(item: ex.Exercise, engine: ex.LoupeEngine | None) -> ex.Reveal | None:
    """The engine's figure, computed now; None after an error (said once on the page)."""
    try:
        with st.spinner("The engine is computing the answer…"):
            return ex.reveal(item, engine)
    except USER_ERRORS as e:
        st.error(f"This exercise cannot be computed on the stack and index in use: {md_text(str(e))}")
        return None


def record(item: ex.Exercise, given, shown: ex.Reveal) -> None:
    """Keep the answer in the session (and so in the browser), and count it once for the class."""
    right = ex.grade(item.ask, given, shown, item.tolerance)
    first = item.id not in progress()
    progress()[item.id] = {"given": given, "right": right, "figure": shown.shown, "detail": shown.detail}
    if first:
        stack.door().tally.record(item.id, right)


def show_revealed(item: ex.Exercise) -> None:
    done = progress()[item.id]
    given = done["given"]
    mine = f"{given:.3f}" if isinstance(given, float) else str(given)
    a, b = st.columns(2)
    a.metric("Your answer", md_text(mine) if item.ask != ex.REASON else "a reason")
    b.metric("The engine", md_text(done["figure"]))
    if item.ask == ex.REASON:
        st.text(f"Your reason: {given}")
    elif done["right"]:
        st.success("Right" + (f" (within {item.tolerance:g})" if item.ask == ex.NUMBER else "") + ".")
    else:
        how_far = f" (more than {item.tolerance:g} away)" if item.ask == ex.NUMBER else ""
        st.error(f"Not this time{how_far}.")
    if done.get("detail"):
        st.text(done["detail"])
    st.text(f"Why: {item.explain}")


def page_button(item: ex.Exercise) -> None:
    """Open the page that shows the figure, on the exercise's question (with a way back)."""
    target = REPO_ROOT / "pages" / PAGE_FILES[item.page]
    changes = {}
    if "question" in item.params:
        changes["question"] = item.params["question"]
    if item.params.get("index"):
        changes["index_name"] = item.params["index"]

    def go_there():
        if changes:
            detours.detour(str(EXERCISES_PAGE), "Exercises", **changes)
        st.session_state["exercise_goto"] = str(target)

    st.button(f"See it on the {item.page} page", on_click=go_there, key=f"exercise_go_{item.id}")


def follow_goto() -> None:
    """After 'See it on the … page': go there (called before the page draws)."""
    if goto := st.session_state.pop("exercise_goto", None):
        st.switch_page(goto)


def class_counts(items: list[ex.Exercise]) -> None:
    """How the class answered each exercise (counts only, no names): for the teacher's projector."""
    counts = stack.door().tally.counts()
    if not counts:
        st.caption("No one on this server has revealed an exercise yet.")
        return
    shown = [e for e in items if e.id in counts]
    for e in shown:
        right = counts[e.id]["right"]
        st.caption(f"{md_text(e.title)}: {sum(counts[e.id].values())} revealed, {right} right.")
    names = [plot_text(f"{items.index(e) + 1}. {e.title}", 40) for e in shown]
    fig = go.Figure()
    for outcome, colour in zip(ex.OUTCOMES, (RIGHT_GREEN, WRONG_RED, REASONED_GREY)):
        fig.add_bar(
            y=names,
            x=[counts[e.id][outcome] for e in shown],
            name=outcome,
            orientation="h",
            marker_color=colour,
            hovertemplate="%{y}: %{x} " + outcome + "<extra></extra>",
        )
    fig.update_layout(barmode="stack", height=120 + 28 * len(shown), margin=dict(l=10, r=10, t=10, b=10))
    fig.update_yaxes(autorange="reversed")
    fig.update_xaxes(title="answers revealed on this server")
    st.plotly_chart(fig, key="exercise_class", config=charts.NO_BAR)
