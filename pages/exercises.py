"""Exercises: predict a number, a choice or a reason, then reveal the engine's own figure."""

import streamlit as st

from app import stack, state
from app.exercises import exercise_views as views
from app.exercises import progress_store
from app.ui.safe_text import md_text
from rag_core.loupe import exercises as ex

views.follow_goto()
st.title("Exercises")
st.caption(
    "Work each one out before you reveal it: a number, a choice or a reason. The engine computes every "
    "answer live, on the model stack and index in use, so the figure you see is the one the page it "
    "points to shows. Your answers stay in this browser; the server keeps only how many answered."
)

loaded = ex.load_exercises()
for problem in loaded.problems:
    st.warning(f"An exercise was left out: {md_text(problem)}", icon=":material/error:")
if not loaded.exercises:
    st.info("There are no exercises to show.")
    st.stop()

# The browser's kept answers join the session's (the session's win: they are the newest).
forget = st.session_state.pop(views.FORGET, False)
kept = progress_store.synced(views.progress(), forget)
if kept and not forget:
    for key, done in kept.items():
        views.progress().setdefault(key, done)

items = loaded.exercises
done = [e for e in items if e.id in views.progress()]
right = sum(1 for e in done if views.progress()[e.id]["right"])
if kept is None:  # the browser answers on its first run; until then its kept answers are unknown
    st.caption("Reading the answers this browser kept…")
else:
    st.progress(len(done) / len(items), text=f"{len(done)} of {len(items)} answered, {right} right")
    st.text(views.marks(items))

item = views.choose(items)
st.subheader(md_text(item.title))  # a teacher's sheet is text, never Markdown
st.caption(f"Shown on the {item.page} page.")
if item.setup:
    st.text(item.setup)

engine = None
if item.live:
    engine = ex.LoupeEngine(stack.door(), stack.current(), state.answer_settings())
    if not views.live_setup(item, engine):
        st.stop()
else:
    views.toy_setup(item)

st.text(item.prompt)
if item.id not in views.progress():
    options = ex.options(item, engine)
    given = views.answer_form(item, options)
    if given is not None:
        shown = views.reveal(item, engine)
        if shown is not None:
            views.record(item, given, shown)
            st.rerun()  # draw it as revealed, and let the browser keep it
else:
    views.show_revealed(item)
    views.page_button(item)
    views.next_button(items, item)

with st.expander("How the class answered (counts only, no names)"):
    views.class_counts(items)
st.button(
    "Forget my answers",
    on_click=views.forget,
    help="Clears the answers kept in this browser and in this session; the class's counts stay.",
)
