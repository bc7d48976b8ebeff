"""RAG Loupe: `streamlit run app/main.py`. Navigation and the shared sidebar; pages only present."""
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

import streamlit as st  # noqa: E402

from app import state  # noqa: E402

st.set_page_config(page_title="RAG Loupe", page_icon="🔎", layout="wide")

PAGES = ROOT / "pages"
nav = st.navigation([
    st.Page(PAGES / "ask.py", title="Ask", icon="❓", default=True),
    st.Page(PAGES / "map.py", title="Map", icon="🗺️"),
    st.Page(PAGES / "token_vs_sequence.py", title="Token vs Sequence", icon="🧩"),
    st.Page(PAGES / "citations.py", title="Citations", icon="📌"),
    st.Page(PAGES / "index_swap.py", title="Index swap", icon="🔁"),
    st.Page(PAGES / "by_hand.py", title="By hand", icon="✍️"),
    st.Page(PAGES / "corpus.py", title="Corpus", icon="📚"),
    st.Page(PAGES / "eval.py", title="Eval", icon="📊"),
])
state.sidebar()
nav.run()
