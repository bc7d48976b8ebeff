"""Replay: another RAG system's traces, each replayed exactly on this stack's generator with the
prompt its model read, and why each answer is what it is."""

from pathlib import Path

import streamlit as st

from app.replay import replay_views
from app.ui import jobs
from app.ui.safe_text import md_text
from rag_core.loupe.replay import ReplayFileError
from rag_core.loupe.vocabulary import first_line

HERE = str(Path(__file__).resolve())
PAGES = Path(__file__).resolve().parent

if goto := st.session_state.pop("replay_goto", None):  # a trace opened on another page
    st.switch_page(PAGES / goto)

st.title("Replay")
st.caption(
    "Traces of a RAG someone deployed (LangChain, LlamaIndex or Arize Phoenix: OTLP JSON or protobuf "
    "with the OpenInference conventions, Phoenix's spans table as Parquet, or plain JSON Lines). "
    "Each is replayed on this stack's generator with the prompt its model read, each document's span "
    "found in it: whether the logged answer comes back, its probability, what each document is worth "
    "to it (cut out of the prompt), the model with no document, and the verdicts. "
    "`python -m rag_core replay FILE` does the same."
)

with st.form("replay_form"):
    upload = st.file_uploader("A trace file", type=replay_views.TYPES, key="replay_upload")
    folder = st.text_input("Or a file or folder on this server", key="replay_folder")
    gold = st.file_uploader(
        "Expected answers (optional; JSON Lines as Eval reads them, matched by question)",
        type=["jsonl"],
        key="replay_expected",
    )
    orders = st.checkbox("Also read every trace in other document orders (slower)", key="replay_orders")
    go = st.form_submit_button("Replay", type="primary")

if go:
    try:
        if upload is not None:
            source = replay_views.keep_upload(upload.name, upload.getvalue())
        elif folder.strip():
            source = Path(folder.strip()).expanduser()
        else:
            raise ReplayFileError("choose a trace file, or name a file or folder on this server")
        answers = replay_views.expected_answers(gold.getvalue() if gold is not None else None)
        replay_views.start(source, answers, orders)
    except (ReplayFileError, OSError, ValueError) as e:
        st.error(md_text(first_line(e, "that file could not be read")))

job, objects = replay_views.session_results()
if job is None:
    st.info("Give a trace file and press Replay.")
    st.stop()
jobs.progress_panel(job.name, follow=True)
if job.error:
    st.error(f"The replay stopped: {md_text(job.error)}")
if job.cancelled:
    st.warning("Cancelled: a new Replay of the same file resumes from the traces already replayed.")
if not objects:
    st.stop()

done = [o for o in objects if not o.get("skipped")]
st.subheader(f"{len(done)} traces replayed, {sum(o['reproduced'] for o in done)} reproduced")
if len(done) < len(objects):
    st.caption(f"{len(objects) - len(done)} could not be replayed: the table says why.")
failures = st.toggle(
    "Failures only (not reproduced, a verdict fired, low confidence, or wrong)", key="replay_fail"
)
st.dataframe(replay_views.table(objects, failures), hide_index=True, width="stretch")

if not done:
    st.stop()
labels = [f"{o['source']} · {o['question'][:70]}" for o in done]
pick = st.selectbox("One trace", range(len(done)), format_func=lambda i: labels[i], key="replay_pick")
chosen = done[pick]
replay_views.findings(chosen)
cols = st.columns(2)
for col, (page, title) in zip(
    cols, [("citations.py", "Citations"), ("token_vs_sequence.py", "Token vs Sequence")]
):
    col.button(
        f"Open its documents in {title}",
        key=f"replay_open_{page}",
        on_click=replay_views.open_documents,
        args=(chosen, page, HERE),
        help="The trace's documents become an index of their own, and the question is asked on it "
        "with K = the documents: the two marginals over exactly those documents.",
    )
