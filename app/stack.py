"""Which model stack a session looks at, and the one stack the server holds in memory.

The stacks on offer: the default, the untrained base, the one given on the command line
(`streamlit run app/main.py -- --run DIR`, or any of the CLI's model and index flags, parsed by
`rag_core.flags`), and every finished fine-tuning run. Each session picks one (the sidebar's
Model); the server keeps the models of one stack at a time: loading another frees the first (two
would double the memory of a large stack, and a session that switches back pays one load).

Everything cached per stack is keyed by `key()`, the stack's fingerprint (folders by content), so
a number computed under one stack is never shown under another's name.
"""

from __future__ import annotations

import functools
import logging
import sys
from pathlib import Path

import streamlit as st
from streamlit.runtime import Runtime
from streamlit.runtime.scriptrunner import get_script_run_ctx

from rag_core.loupe.indexes import default_index_name
from rag_core.loupe.model_stacks import (
    LOAD_ERRORS,
    AnswerStore,
    Loupe,
    Models,
    StackHolder,
    parse_stack_args,
    stacks,
)
from rag_core.loupe.storage import caches
from rag_core.loupe.vocabulary import AnswerSettings, StackSpec, first_line

log = logging.getLogger("rag_loupe.app")
OFFERED = "_stacks_offered"  # session_state: the stacks on offer, read once per page run


@st.cache_resource(show_spinner=False, max_entries=4)  # keyed by the server's own argv: one entry
def command_line(argv: tuple[str, ...]) -> tuple[stacks.Stack | None, str | None, str | None]:
    """The server's command line (after `--`), read once: (its stack or None, the index it named,
    the one-line error that made it fall back to the default stack). Logged to the server log."""
    if not argv:
        return None, None, None
    try:
        spec, asked, corpus = parse_stack_args(list(argv))
        stacks.check_available(spec)
    except LOAD_ERRORS as e:
        log.error(
            "the command line %s could not be used: %s; opening the default stack",
            " ".join(argv),
            first_line(e),
        )
        return None, None, first_line(e)
    cli = stacks.cli_stack(spec)
    if stacks.models_of(spec) == stacks.models_of(StackSpec()) and not (corpus or asked.index):
        cli = None  # the default stack under another name would only be listed twice
    log.info("stack from the command line: %s (%s)", cli.name if cli else "default", " ".join(argv))
    return cli, corpus or asked.index, None


MAIN = Path(__file__).resolve().parent / "main.py"


def argv() -> list[str]:
    """The flags after `--` of `streamlit run app/main.py -- ...` (Streamlit hands the script
    [script path, *flags] as sys.argv); none when the app runs inside another program (AppTest in
    pytest), whose own arguments are not ours."""
    return sys.argv[1:] if sys.argv and _is_this_app(sys.argv[0]) else []


@functools.lru_cache(maxsize=4)
def _is_this_app(script: str) -> bool:
    """Whether `script` is this app's main.py (resolved once: a page run asks many times)."""
    try:
        return Path(script).resolve() == MAIN
    except OSError:
        return False


def cli() -> tuple[stacks.Stack | None, str | None, str | None]:
    return command_line(tuple(argv()))


def runtime() -> dict:
    """Device, threads and downloads as the command line set them (defaults without one)."""
    return _flags(tuple(argv()))[0].runtime()


@st.cache_resource(show_spinner=False, max_entries=4)  # keyed by the server's own flags: one entry
def _flags(flags: tuple[str, ...]) -> tuple[StackSpec, AnswerSettings]:
    """The stack and settings the command line gives (the defaults without one, or when it failed:
    `command_line` says why)."""
    _, _, error = command_line(flags)
    if error or not flags:
        return StackSpec(), AnswerSettings()
    return parse_stack_args(list(flags))[:2]  # it parsed: the check came after


def begin_run() -> None:
    """A new page run: the stacks on offer are read afresh (a training run may have finished)."""
    st.session_state.pop(OFFERED, None)


def offered() -> list[stacks.Stack]:
    """The Model choices: default, base, the command line's, the finished training runs. Read once
    per page run (`begin_run`): every state function asks for the session's stack, and reading the
    training cache each time held the interpreter for long with a class on one server."""
    if get_script_run_ctx(suppress_warning=True) is None:  # not in a page run (a test reading it)
        return _offered()
    if OFFERED not in st.session_state:
        st.session_state[OFFERED] = _offered()
    return st.session_state[OFFERED]


def _offered() -> list[stacks.Stack]:
    extra = runtime()
    cs, _, _ = cli()
    out = [stacks.Stack(s.key, s.name, s.spec.with_(**extra), s.kind) for s in stacks.preset_stacks()]
    if cs:
        out.append(cs)
    out += [stacks.Stack(s.key, s.name, s.spec.with_(**extra), s.kind) for s in _runs(_runs_stamp())]
    return out


def _runs_stamp() -> tuple:
    """The training cache's manifests by name and time: a new, finished or replaced run changes it."""
    root, found = caches.folder("training"), []
    for manifest in root.glob("*/training.json"):
        try:
            found.append((manifest.parent.name, manifest.stat().st_mtime_ns))
        except OSError:  # a run removed as we looked
            pass
    return (str(root), *sorted(found))


@st.cache_resource(show_spinner=False, max_entries=4)
def _runs(stamp: tuple) -> list[stacks.Stack]:
    """The finished runs, read once per state of the training cache (the list is asked for many
    times a page run)."""
    return stacks.training_runs(Path(stamp[0]))


def current() -> stacks.Stack:
    """The session's stack: its pick, else the command line's, else the default. (Read only: the
    pick is written by `settle`, before the sidebar's Model widget exists in a run.)"""
    choices = {s.key: s for s in offered()}
    picked = st.session_state.get("stack")
    if picked not in choices or picked in _broken():
        picked = "cli" if "cli" in choices and "cli" not in _broken() else "default"
    return choices[picked]


def settle() -> None:
    """Write the session's stack as `current` reads it (a new session, or a pick no longer offered)."""
    st.session_state["stack"] = current().key


def key() -> str:
    """The current stack's fingerprint: every stack-dependent cache takes it as an argument."""
    return stacks.fingerprint(current().spec)


def door() -> Loupe:
    """The server's one door into the engine: the held stack, its indexes and every answer, shared
    by all sessions, and kept on disk (the `answers` cache) for the next start."""
    return _door(tuple(argv()))


@st.cache_resource(show_spinner=False, max_entries=4)  # keyed by the server's own argv: one entry
def _door(flags: tuple[str, ...]) -> Loupe:
    _, corpus, _ = command_line(flags)
    return Loupe(StackHolder(), corpus, _flags(flags)[0].batch_questions, AnswerStore())


def session_alive(session: str) -> bool:
    """Whether the browser session `session` is still connected to this server (a closed tab is
    not); always true outside a server (AppTest)."""
    return not Runtime.exists() or Runtime.instance().is_active_session(session)


def _broken() -> set:
    """Stacks whose models failed to load in this server (not offered again until a restart)."""
    return door().holder.broken


def held_models() -> Models | None:
    """The models the server holds now (whichever stack), or None."""
    return door().holder.held()


def models(draw: bool = False) -> Models:
    """The current stack's models, loaded if another stack is held (that one is freed first).
    `draw`: show the load's progress (only from a page's own run, never from a cached function)."""
    want, holder = current(), door().holder
    if not draw or holder.holds(want):
        return holder.models(want)
    spot = (
        st.empty()
    )  # the progress shows while the stack loads, then goes: the page's first line names the stack
    with spot.status(f"Loading the model stack {want.name}…", expanded=True):
        note = st.empty()
        loaded = holder.models(want, lambda message: note.caption(message))
    spot.empty()
    return loaded


def device_text() -> str:
    """Where the held stack runs, as the sidebar says it: 'cpu', or 'cuda (bfloat16)'."""
    return door().holder.device_text()


def ensure_loaded() -> None:
    """Load the session's stack at the top of a page run, with progress. A stack that fails to load
    is reported in one line, marked broken, and the session falls back to the default stack."""
    settle()
    want = current()
    try:
        models(draw=True)
    except LOAD_ERRORS as e:
        if want.key == "default":
            raise
        log.error(
            "the stack %s could not be loaded: %s; falling back to the default", want.name, first_line(e)
        )
        _broken().add(want.key)
        st.session_state["stack"] = "default"
        st.session_state["_stack_error"] = f"The model stack {want.name} could not be loaded: {first_line(e)}"
        st.rerun()


def default_index() -> str:
    """The index a session starts on: the command line's (when it opened on that stack), else the default."""
    _, index, _ = cli()
    return index if index and current().key == "cli" else default_index_name()


def extra_indexes() -> list[str]:
    """Indexes only the command line names (a folder, an hf-dataset, a corpus file), offered too."""
    _, index, _ = cli()
    return [index] if index else []


def cli_scale() -> float | None:
    """The command line's --scale, for a session that opens on the command line's stack."""
    cs = cli()[0]
    return _flags(tuple(argv()))[1].scale if cs and current().key == "cli" else None


def label(key: str) -> str:
    return {s.key: s.name for s in offered()}.get(key, key)


def keys() -> list[str]:
    """The Model choices a session may pick (a stack that failed to load is not offered again)."""
    return [s.key for s in offered() if s.key not in _broken()]


def forget_scale() -> None:
    """A new stack starts on its encoder's own scale (MiniLM's 20 is far too sharp for DPR's scores)."""
    st.session_state["scale"] = None


def open_run(folder: str) -> None:
    """The Train page's "Open this model in the app" (a button callback: it runs before the rerun,
    so the sidebar's Model can still be set)."""
    st.session_state["stack"] = stacks.run_stack_key(folder)
    forget_scale()
