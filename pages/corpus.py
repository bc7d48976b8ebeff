"""Corpus: upload documents, build a named index over them, list and delete the ones you built."""

import pandas as pd
import streamlit as st

from app import state
from app.ui import jobs
from app.ui.safe_text import md_text
from rag_core.loupe.indexes import PASSAGE_WORDS, passage_word_bounds
from rag_core.loupe.indexes import catalog_actions as actions
from rag_core.loupe.storage import caches
from rag_core.loupe.vocabulary import CorpusError, first_line

st.title("Corpus")
st.caption(
    "Build an index over your own documents. It is saved on disk, appears in the sidebar's Index list "
    "and stays there after a restart."
)

for kind in ("success", "error"):  # the outcome of a build or delete, kept across the rerun that follows it
    if msg := st.session_state.pop(f"corpus_{kind}", None):
        getattr(st, kind)(msg)


@st.cache_data(show_spinner="Reading the files…", max_entries=4)
def _parse(files: tuple[tuple[str, bytes], ...]) -> actions.Uploads:
    return actions.parse_uploads(list(files))


def _say(e: Exception, fallback: str) -> str:
    """An engine error as one line of UI text."""
    msg = first_line(e, fallback)
    return msg[:1].upper() + msg[1:]


def _build_work(passages: list, name: str, replace: bool):
    """The background job: encode and save the index, then drop the app's stale copies of it."""
    encoder = state.models().encoder  # loaded here, in the page's own run

    def work(progress):
        idx = actions.build_user_index(passages, encoder, name, replace, progress)
        state.forget_index(name)
        return name, len(idx)

    return work


def _use(name: str) -> None:
    st.session_state["index_name"] = name


limit = st.get_option("server.maxUploadSize")
files = st.file_uploader(
    "Corpus files (.txt, .md, .jsonl, .csv)",
    type=["txt", "md", "jsonl", "csv"],
    accept_multiple_files=True,
    help=f'Up to {limit} MB a file. .jsonl: one {{"title", "text", "id" (optional)}} a line. '
    ".csv: columns title and text (id optional). .txt / .md: one document titled by its file name.",
)
SHORTEST, LONGEST = passage_word_bounds()
st.caption(
    f'Up to {limit} MB a file. **.jsonl**: one JSON object a line, `{{"title": …, "text": …}}` '
    "(`id` optional). **.csv**: a header row with columns `title` and `text` (`id` optional). "
    "**.txt / .md**: one document, titled by its file name. Long texts are split into passages of about "
    f"{PASSAGE_WORDS} words ({SHORTEST} to {LONGEST}, cut at sentence ends), as the paper split Wikipedia; "
    "rows without text are skipped and counted."
)

if files:
    uploads = _parse(tuple((f.name, f.getvalue()) for f in files))
    if uploads.errors:
        st.error("Could not read " + "; ".join(uploads.errors))
    parsed = uploads.parsed
    if parsed is not None:
        c1, c2, c3 = st.columns(3)
        c1.metric("Passages", f"{len(parsed.passages):,}")
        c2.metric("Documents", f"{parsed.documents:,}")
        c3.metric("Skipped rows", f"{parsed.skipped:,}")
        preview = pd.DataFrame(
            [
                {"id": p.id, "title": p.title, "words": len(p.text.split()), "text": p.text}
                for p in parsed.passages[:200]
            ]
        )
        shown = len(preview) < len(parsed.passages)
        st.caption(
            f"The first {len(preview)} of {len(parsed.passages):,} passages:"
            if shown
            else f"All {len(preview)} passages:"
        )
        st.dataframe(
            preview,
            hide_index=True,
            width="stretch",
            column_config={"text": st.column_config.TextColumn("text", width="large")},
        )
        with st.form("build"):
            name = st.text_input(
                "Index name",
                max_chars=64,
                placeholder="my-notes",
                help="Letters, digits, '_', '.' and '-'; it is the name in the sidebar.",
            )
            replace = st.checkbox("Replace an index of the same name")
            build = st.form_submit_button("Build the index", type="primary")
        if build:
            try:
                name = actions.check_name(name, replace)
            except (CorpusError, ValueError) as e:
                st.error(_say(e, "the build did not work"))
            else:
                job = jobs.start(
                    "build", _build_work(parsed.passages, name, replace), label=f"Building index {name}"
                )
                st.session_state["corpus_job"] = job.id
                st.rerun()

build_job = jobs.get("build")
if build_job is not None and not build_job.running and build_job.id == st.session_state.get("corpus_job"):
    st.session_state.pop("corpus_job")
    if build_job.error:
        st.error(build_job.error[:1].upper() + build_job.error[1:])
    elif build_job.cancelled:
        st.warning("The build was cancelled; nothing was written.")
    else:
        st.success(
            f"Built index {build_job.result[0]!r}: {build_job.result[1]:,} passages. "
            "Pick it in the sidebar's Index list (or below)."
        )
        st.session_state["corpus_pick"] = build_job.result[0]  # below: the index just built
jobs.progress_panel("build")

st.subheader("Your indexes")
rows = actions.user_indexes()
if not rows:
    st.info("None yet: upload files above and build one.")
else:
    st.dataframe(pd.DataFrame(rows), hide_index=True, width="stretch")
    names = [r["name"] for r in rows]
    left, right = st.columns(2)
    with left:
        pick = st.selectbox("Your index", names, key="corpus_pick")
        st.button(
            f"Use {pick} now",
            on_click=_use,
            args=(pick,),
            disabled=st.session_state.get("index_name") == pick,
            help="Makes it the sidebar's index, for every page.",
        )
    with right, st.form("delete"):
        st.markdown("**Delete an index**")
        target = st.selectbox("Index to delete", names, key="corpus_delete_pick")
        sure = st.checkbox("Yes, delete it from disk")
        delete = st.form_submit_button("Delete")
    if delete:
        if not sure:
            st.warning(f"Tick “Yes, delete it from disk” to delete {target}.")
        else:
            try:
                actions.delete_user_index(target)
                state.forget_index(target)
                st.session_state["corpus_success"] = f"Deleted index {target!r}."
                st.rerun()
            except (CorpusError, OSError) as e:
                st.error(_say(e, "the delete did not work"))

with st.expander("Disk used by caches"):
    usage = caches.usage()
    st.dataframe(
        pd.DataFrame(
            [
                {"cache": u.kind, "size": caches.human(u.bytes), "entries": u.entries, "holds": u.what}
                for u in usage
            ]
        ),
        hide_index=True,
        width="stretch",
    )
    st.caption(
        f"All under {md_text(str(usage[0].path.parent))}; "
        "`python -m rag_core cache clear KIND` empties one "
        "(everything but your indexes is rebuilt when needed)."
    )
