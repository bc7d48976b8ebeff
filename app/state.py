"""App state: the sidebar's settings as pages read them, and the session's answers from the door.

The engine sits behind one door (`rag_core.loupe`), held once per server (`app.stack.door`) and
shared by every session: the models of the session's model stack (one stack held at a time), its
indexes, and every answer, cached by (stack, question, settings), so switching pages, steps or
views never recomputes what is known, and a trace of one stack is never shown under another. A
trace's further parts (the stuffed reading, the confidence, the token sources) are computed once
by its `Result`. Pages call `current_trace()` and only present; this module turns the door's user
errors into one message on the page.
"""

from __future__ import annotations

import dataclasses

import streamlit as st
from streamlit.runtime.scriptrunner import get_script_run_ctx

from app import stack as stacks
from rag_core.loupe.answers import USER_ERRORS, Result, on_index
from rag_core.loupe.model_stacks import stacks as engine_stacks
from rag_core.loupe.stuffed_reading import orders
from rag_core.loupe.vocabulary import AnswerSettings, StackSpec, Trace, first_line

DEFAULT_QUESTION = "Who wrote Moby-Dick?"
WAITING = "Your question is "  # the first words of the notice a session waiting in line sees
# How often a waiting page redraws its place, by how far back it stands: near the front every 2 s,
# further back less often, so thirty waiting sessions cost the server little.
POLL_S = ((2, 2.0), (6, 4.0), (None, 8.0))  # (up to this place, seconds); None: any place
ASKED = "_answer_settings"  # session_state: (the sidebar's choices, the AnswerSettings built from them)
DEFAULTS = AnswerSettings()  # the sidebar's first values: AnswerSettings' defaults, the one place they live


def models():
    """Encoder + generator of the session's stack (loaded once, shared by every session on it;
    `main.py` loads it with progress before the page runs)."""
    return stacks.models()


def stack_key() -> str:
    """The session's stack fingerprint: the first argument of every cached model result."""
    return stacks.key()


def index(name: str):
    """A named index (built and cached on disk on first use), shared by all sessions."""
    return index_for(models().encoder, name)


def index_for(encoder, name: str):
    """The index `name` as `encoder`'s passage tower reads it (another stack's, for a comparison)."""
    door = stacks.door()
    if door.index_is_open(encoder, name):
        return door.index_for(encoder, name)
    with st.spinner("Opening the index (its first use builds it: ~10 s)…"):
        return door.index_for(encoder, name)


def forget_index(name: str) -> None:
    """Drop every cached object of an index that was replaced or deleted (its traces included)."""
    stacks.door().forget_index(name)


def pipeline(name: str | None = None):
    """The session's stack on index `name` (else the sidebar's), under the session's settings."""
    asked = _on_index(answer_settings(), name)
    index(asked.index)  # opened with its spinner on first use
    return stacks.door().pipeline(stacks.current(), asked)


def _on_index(asked: AnswerSettings, name: str | None) -> AnswerSettings:
    """`asked` on index `name`, else on its own, else on the default index (`asked` itself when it
    names that index already: a question's settings are built once)."""
    return on_index(asked if not name or name == asked.index else dataclasses.replace(asked, index=name))


def result(trace: Trace) -> Result:
    """The door's Result of a trace of the session's stack: its further parts, computed once."""
    return stacks.door().result(stacks.current(), trace)


def _shown(compute, message: str):
    """`compute()`, or None after a user error (shown on the page in one line; nothing is lost)."""
    try:
        return compute()
    except USER_ERRORS as e:
        st.error(first_line(e, message))
        return None


def with_own_stuffed(trace: Trace) -> Trace:
    """`trace` with the stuffed reading's answers for its own passages, question and settings (for
    the low-confidence rule, which compares all three readings; what each passage is worth is made
    only where a page draws it); a stuffed prompt too long for the generator leaves it without one,
    and then the rule compares the two marginals."""
    if trace.stuffed is not None:
        return trace
    with st.spinner(f"Reading the {trace.k} passages together in one prompt…"):
        return result(trace).with_stuffed_if_it_fits()


def token_sources_of(trace: Trace, decoding: str, rank: int = 0) -> list | None:
    """Where each token of a trace's candidate came from (one extra model row, computed once)."""
    return _shown(lambda: result(trace).token_sources(decoding, rank), "that did not work")


def confidence(trace: Trace, cand, log_prior=None):
    """Whether the model is guessing at this answer (`rag_core.analysis.diagnosis.confidence`),
    from all three readings and the answer's closed-book row, whatever page draws the card: the same
    answer wears the same badge on every page. `log_prior` (K,): a counterfactual's prior."""
    with_own_stuffed(trace)  # with its spinner, the first time
    return result(trace).confidence(cand, log_prior)


def sentence_attribution(trace: Trace, cand, z: int):
    """Leave-one-sentence-out of a candidate's answer over passage `z` (one batched pass, once)."""
    what = "the passages together" if cand.decoding == "stuffed" else "the passage"
    with st.spinner(f"Reading {what} with each sentence left out…"):
        return _shown(lambda: result(trace).sentence_attribution(cand, z), "that did not work")


def trace_for(
    question: str, index_name: str | None = None, settings: AnswerSettings | None = None
) -> Trace | None:
    """The trace of a question under `settings` (the session's without them), computed once; None
    after a user error (the error is shown on the page, nothing else is lost)."""
    asked = _on_index(settings or answer_settings(), index_name)
    index(asked.index)  # opened with its spinner on first use
    door = stacks.door()
    if st.session_state.get("cancelled") == (question, asked):
        return _cancelled()
    sid = session_id()
    ticket = door.ask(sid, stacks.current(), question, asked, alive=lambda: stacks.session_alive(sid))
    if door.line.ahead(ticket) > 0:
        _wait_in_line(ticket, (question, asked))  # the page stops here until its turn
    with st.spinner(f"Answering on the {asked.index} index{_about(door.line.estimate(ticket))}…"):
        trace = _shown(ticket.result, "that did not work")
    return trace


def session_id() -> str:
    """This browser session's id: its name in the answer line (one waiting question per session)."""
    ctx = get_script_run_ctx()
    return ctx.session_id if ctx else "no session"


def _about(seconds: float | None) -> str:
    return "" if seconds is None else f", about {max(round(seconds), 1)} s"


def poll_seconds(place: int) -> float:
    """How often a page waiting at `place` redraws (POLL_S).

    >>> [poll_seconds(place) for place in (1, 2, 3, 6, 7, 20)]
    [2.0, 2.0, 4.0, 4.0, 8.0, 8.0]
    """
    return next(s for up_to, s in POLL_S if up_to is None or place <= up_to)


def _wait_in_line(ticket, asked: tuple) -> None:
    """The session's place in the line and an estimate, redrawn while it waits (POLL_S; the page
    behind it waits too); the page reruns by itself when the question's turn comes, or when its
    place calls for another pace of redrawing. Cancel takes it out of the line."""
    line = stacks.door().line
    every = poll_seconds(line.place(ticket))

    @st.fragment(run_every=every)
    def place() -> None:
        place = line.place(ticket)
        if line.ahead(ticket) == 0 or poll_seconds(place) != every:
            st.rerun()  # its turn (the whole page now waits for the answer itself), or a new pace
        where = "next in line" if place == 1 else f"number {place} in line"
        st.info(f"{WAITING}{where}{_about(line.estimate(ticket))}.", icon=":material/hourglass_top:")
        if st.button("Cancel", key="cancel_question"):
            line.cancel(ticket, session_id())
            st.session_state["cancelled"] = asked
            st.rerun()

    place()
    st.stop()


def _cancelled() -> None:
    """A question the session cancelled: said, with the way to ask it again."""
    st.info("You cancelled this question before its turn came.", icon=":material/cancel:")
    if st.button("Ask it again", key="ask_again"):
        st.session_state.pop("cancelled", None)
        st.rerun()
    return None


def stuffed_orders(trace: Trace) -> list | None:
    """The question's stuffed reading with its passages in the other orders
    (`Pipeline.stuffed_orders`), computed once; None after a user error (the message is shown)."""
    with st.spinner(f"Reading the {trace.k} passages in {len(orders(trace.k))} other orders…"):
        return _shown(lambda: result(trace).stuffed_orders(), "reading the other orders did not work")


def with_stuffed(trace: Trace) -> Trace:
    """`trace` with its stuffed reading (the K passages in one prompt and its exact leave-one-out),
    computed once when a page first draws it."""
    return _stuffed(trace, lambda: result(trace).with_stuffed())


def with_stuffed_answers(trace: Trace) -> Trace:
    """`trace` with the stuffed reading's answers alone, for a page that draws its card but not what
    each passage is worth (Index swap)."""
    return _stuffed(trace, lambda: result(trace).stuffed_answers())


def _stuffed(trace: Trace, compute) -> Trace:
    """`compute()` with its spinner, for a trace without a stuffed reading. After a user error (a
    stuffed prompt longer than the generator reads) the message is shown and the trace comes back
    as it was."""
    if trace.stuffed is not None:
        return trace
    with st.spinner(f"Reading the {trace.k} passages together in one prompt…"):
        found = _shown(compute, "the stuffed reading did not work")
    return trace if found is None else found


def export(trace: Trace, fmt: str) -> bytes | str:
    """The trace in one export format, made when the user downloads it (and kept by its Result)."""
    return result(trace).export(fmt, stuffed=trace.stuffed is not None)


def stack_name() -> str:
    """The session's stack in a few words (job labels: every session sees every job)."""
    return stacks.current().name


def stack_words() -> str:
    """The session's stack in words, retriever then generator ("MiniLM-L6 retriever · SmolLM2-135M
    + RAG adapter"): what a page's first line names."""
    return engine_stacks.in_words(stacks.current().spec)


def stack_spec() -> StackSpec:
    """The session's model stack: its models and the runtime they run on."""
    return stacks.current().spec


def question() -> str:
    return st.session_state.get("question", DEFAULT_QUESTION)


def current_trace() -> Trace | None:
    return trace_for(question())


def answer_settings() -> AnswerSettings:
    """How the session answers a question: the sidebar's settings (whose defaults are
    AnswerSettings': the one place a default lives). Built once per choice of them: every part of
    a page run (the link, the answer, a follow-up) reads the same object."""
    s, base = st.session_state, DEFAULTS
    chosen = {
        "index": s.get("index_name") or stacks.default_index(),
        "k": s.get("k", base.k),
        "beams": s.get("beams", base.beams),
        "rescore": s.get("rescore", base.rescore),
        "scale": s.get("scale"),
        "max_new_tokens": s.get("max_new_tokens", base.max_new_tokens),
        "length_penalty": float(s.get("length_penalty", base.length_penalty)),
    }
    kept = s.get(ASKED)
    if kept is None or kept[0] != chosen:
        kept = s[ASKED] = (chosen, dataclasses.replace(base, **chosen))
    return kept[1]
