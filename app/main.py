"""RAG Loupe: `streamlit run app/main.py`. Navigation and the shared sidebar; pages only present."""

from pathlib import Path

import streamlit as st

from app import stack
from app.ui import detours, link, memory, sidebar, stack_views

st.set_page_config(page_title="RAG Loupe", page_icon=":material/search:", layout="wide")
# Our own style rules (no user text in them): an answer or title that is one very long word wraps
# inside its column instead of running past it or being cut with an ellipsis.
st.html("""<style>
[data-testid="stMarkdownContainer"], [data-testid="stText"],
[data-testid="stCaptionContainer"] { overflow-wrap: anywhere; }
[data-testid="stMetricValue"], [data-testid="stMetricValue"] * { white-space: normal !important;
  overflow: visible !important; text-overflow: clip !important; overflow-wrap: anywhere; }
</style>""")

PAGES = Path(__file__).resolve().parent.parent / "pages"
nav = st.navigation(
    [
        st.Page(PAGES / "ask.py", title="Ask", icon=":material/help:", default=True),
        st.Page(PAGES / "map.py", title="Map", icon=":material/scatter_plot:"),
        st.Page(PAGES / "token_vs_sequence.py", title="Token vs Sequence", icon=":material/view_timeline:"),
        st.Page(PAGES / "citations.py", title="Citations", icon=":material/format_quote:"),
        st.Page(PAGES / "index_swap.py", title="Index swap", icon=":material/swap_horiz:"),
        st.Page(PAGES / "by_hand.py", title="By hand", icon=":material/edit:"),
        st.Page(PAGES / "train.py", title="Train", icon=":material/model_training:"),
        st.Page(PAGES / "corpus.py", title="Corpus", icon=":material/library_books:"),
        st.Page(PAGES / "eval.py", title="Eval", icon=":material/analytics:"),
        st.Page(PAGES / "replay.py", title="Replay", icon=":material/replay:"),
        st.Page(PAGES / "exercises.py", title="Exercises", icon=":material/school:"),
    ]
)
stack.begin_run()  # the stacks on offer are read once per page run
link.read_link()  # a link's question and settings, before anything reads them
stack.ensure_loaded()  # the session's model stack, loaded with progress before any page needs it
stack_views.sidebar_choice()
stack_views.stack_line()  # every page's first line names the stack it shows
stack_views.notices()
link.notice()
with st.sidebar:
    link.copy_control()  # on every page, the link to what it shows
sidebar.sidebar()
link.write_link()  # the address bar is the link to what the page shows
detours.on_page(nav.title)  # a detour's notice stays on the page it landed on
detours.follow_back()
try:
    nav.run()
    link.notice_shown()  # reached only when the page ran to its end (not stopped, not rerun)
finally:
    # A full collection after a full run, at most every few seconds server-wide (the config turns
    # off Streamlit's own, which runs after every run and fragment refresh of every session).
    memory.collect_now_and_then()
