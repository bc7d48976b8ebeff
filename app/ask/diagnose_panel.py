"""The Diagnose panel of the Ask page: why is this answer wrong? Verdicts with their evidence, the
expected answer teacher-forced next to the produced one, and counterfactuals read off the stored
numbers, with a model call, on request, only where those cannot decide the answer.

The engine does the work (`rag_core.analysis`: verdicts, counterfactual, deep_search); this file
only presents. The one pass that calls the generator (teacher forcing + closed-book, plus a deeper
search) runs when the user asks for it and is cached per (question, index, settings, expected
answer), so reruns never repeat it. The counterfactuals at its end: `app.ask.counterfactual_panel`."""

from __future__ import annotations

import pandas as pd
import streamlit as st

from app import state
from app.ask import counterfactual_panel
from app.ui import answer_card, expected_answers
from app.ui.safe_text import md_text
from app.ui.views import table
from rag_core.loupe.diagnosis import diagnosis_report, exact_match, verdicts
from rag_core.loupe.vocabulary import (
    DECODING_LABELS,
    RAG_SEQUENCE,
    RAG_TOKEN,
    Trace,
    answer_settings_of,
    p_text,
    prob,
)

# How each verdict reads at a glance: a word and a colour (no emoji: some fonts draw them as boxes).
STATUS = {
    True: ("Fired", "red", ":material/error:"),
    None: ("Not checked", "orange", ":material/help:"),
    False: ("Not this", "gray", ":material/check_circle:"),
}
ORDER = diagnosis_report.ORDER  # fired first


def checks_key(trace: Trace) -> tuple:
    """What the checks of a trace depend on: the stack, the question, the index and every setting its
    answers were decoded with."""
    return (state.stack_key(), trace.question, trace.index, *sorted(answer_settings_of(trace).items()))


@st.cache_resource(show_spinner=False, max_entries=64)
def _checks(key: tuple, expected: tuple[str, ...], _trace: Trace) -> dict:
    """The model-calling part, once per key: teacher-force the expected answer(s), closed-book, and
    a deeper search for the best passage that contains the answer."""
    checks = diagnosis_report.run_checks(state.pipeline(_trace.index), _trace, list(expected))
    return {"forced": checks.forced, "closed_book": checks.closed_book, "deep": checks.deep}


def _has_evidence(v: verdicts.Verdict) -> bool:
    """Whether `_evidence` has something to show for this verdict (else no expander is drawn)."""
    ev = v.evidence or {}
    return {
        "retrieval-miss": bool(ev.get("rank")),
        "evidence-ignored": bool(ev.get("passages")),
        "parametric": "prior" in ev,
        "frankenstein": bool(ev.get("steps")),
        "misleading-passage": "rank" in ev,
        "search-error": "p_expected" in ev,
    }.get(v.code, False)


def _evidence(v: verdicts.Verdict) -> None:
    ev = v.evidence
    if v.code == "retrieval-miss":
        st.markdown(
            f"Best passage containing it in the top {ev['depth']}: **rank {ev['rank']}**, score "
            f"{ev['score']:.3f} (rank 1: {ev['top_score']:.3f}; "
            f"rank {ev['k']}, the last retrieved: {ev['kth_score']:.3f})."
        )
        st.text(f"{ev['title']}: {ev['text']}")
    elif v.code == "evidence-ignored":
        table(pd.DataFrame(ev["passages"]), hide_index=True, width="stretch")
    elif v.code == "parametric":
        frame = pd.DataFrame(
            {
                "rank": range(1, len(ev["prior"]) + 1),
                "prior p(z|x)": ev["prior"],
                "p(y|x,z)": ev["p_answer_given_passage"],
                "posterior p(z|x,y)": ev["posterior"],
            }
        )
        table(frame, hide_index=True, width="stretch")
        st.caption(
            f"closed-book: {md_text(repr(ev.get('closed_book')))} · "
            f"p(y|x,z) varies by a factor {ev['ratio']:.3g} over "
            f"the passages (flat: at most {ev['threshold']:g})"
        )
    elif v.code == "frankenstein":
        table(pd.DataFrame(ev["steps"]), hide_index=True, width="stretch")
        st.caption(
            f"RAG-Token {md_text(repr(ev['rag_token']))}: "
            f"p_tok {p_text(ev['p_tok_token'])}, p_seq {p_text(ev['p_seq_token'])} · "
            f"RAG-Sequence {md_text(repr(ev['rag_sequence']))}: "
            f"p_tok {p_text(ev['p_tok_sequence'])}, p_seq {p_text(ev['p_seq_sequence'])}"
        )
    elif v.code == "misleading-passage":
        extra = f", p(expected|x,z) {p_text(ev['p_expected'])}" if "p_expected" in ev else ""
        st.caption(
            f"rank {ev['rank']} · prior {p_text(ev['prior'])} · posterior {p_text(ev['posterior'])} · "
            f"p(produced|x,z) {p_text(ev['p_produced'])}{extra}"
        )
        st.text(f"{ev['title']}: {ev['text']}")
    elif v.code == "search-error":
        st.caption(
            f"{ev['marginal']}: expected {md_text(repr(ev['expected']))} "
            f"{p_text(ev['p_expected'])} · produced "
            f"{p_text(ev['p_produced'])} · beams {ev['beams']} (raise Beams in the sidebar to search wider)"
        )


def verdict_line(fired: list[str], checked: bool, expected: bool) -> str:
    """The verdicts' headline: those fired; until the model-calling checks ran, never "no verdict
    fired" (which reads as a clean bill of health) but that they have not run.

    >>> verdict_line([], False, False).removeprefix("**Verdict:** ")
    'No checks run yet: only the stored numbers were read; type the expected answer to run the rest.'
    """
    if fired:
        return "**Verdict:** " + ", ".join(f":red[**{t}**]" for t in fired)
    if checked:
        return "**Verdict:** no verdict fired"
    rest = (
        "“Run the checks” above runs the rest." if expected else "type the expected answer to run the rest."
    )
    return "**Verdict:** No checks run yet: only the stored numbers were read; " + rest


def _verdict_list(d: verdicts.Diagnosis, checked: bool) -> None:
    """Fired verdicts first, each as a word and a colour; an expander only where there is evidence."""
    st.markdown(verdict_line([v.title for v in d.verdicts if v.fired], checked, bool(d.expected)))
    for v in sorted(d.verdicts, key=lambda v: ORDER[v.fired]):
        word, colour, icon = STATUS[v.fired]
        label = f":{colour}[**{word}**] · {v.title}: {md_text(v.summary)}"
        if _has_evidence(v):
            with st.expander(label, expanded=bool(v.fired), icon=icon):
                _evidence(v)
        else:
            st.markdown(f"{icon} {label}")


def _three_answers(trace: Trace, closed_book: str) -> None:
    """The key contrast side by side: both RAG answers and the generator's own, with no passage."""
    cols = st.columns(3)
    for col, d in zip(cols, (RAG_TOKEN, RAG_SEQUENCE)):
        c = trace.answer(d)
        with col:
            if c is None:
                st.metric(DECODING_LABELS[d], "—")
            else:
                answer_card.card(trace, c, DECODING_LABELS[d], key=f"diagnose-{d}")
    cols[2].metric(
        "Closed-book (no passage)",
        md_text(closed_book) or "(empty)",
        help="The same generator and prompt with no passage: what its weights alone answer.",
    )


def _scores_table(trace: Trace, d: verdicts.Diagnosis) -> None:
    rows = []
    for a in d.scores:
        post = a.posterior(trace.log_prior)
        lp_seq, lp_tok = a.log_p_seq(trace.log_prior), a.log_p_tok(trace.log_prior)
        rows.append(
            {
                "answer": a.text,
                "kind": "expected" if a.label == "expected" else f"produced ({a.label})",
                "p_seq": prob(lp_seq),
                "p_tok": prob(lp_tok),
                **{f"post #{z + 1}": float(p) for z, p in enumerate(post)},
            }
        )
    table(pd.DataFrame(rows))
    st.caption(
        "p_seq = Σ_z p(z|x) p(y|x,z) · p_tok = Π_i Σ_z p(z|x) p(y_i|x,z,y_<i) · post #r = p(z|x,y) for "
        "the passage of rank r."
    )


def render(trace: Trace | None) -> None:
    """The Diagnose panel for the Ask page's current trace (nothing when there is none)."""
    if trace is None or not trace.candidates:
        return
    st.divider()
    st.subheader("Diagnose: why is this answer wrong?")
    if st.session_state.get("_diag_for") != trace.question:  # a new question: prefill its expected answer
        st.session_state["_diag_for"] = trace.question
        st.session_state["diag_expected"] = expected_answers.prefill(trace.question)
    c1, c2 = st.columns([3, 1])
    text = c1.text_input(
        "Expected answer",
        key="diag_expected",
        max_chars=500,
        help="Aliases separated by |, e.g. “Herman Melville | Melville”. Matching is SQuAD exact "
        "match: case, punctuation and a/an/the do not count.",
    )
    expected = tuple(a.strip() for a in text.split("|") if a.strip())
    decodings = [d for d in (RAG_SEQUENCE, RAG_TOKEN) if trace.answer(d) is not None]
    wrong = [d for d in decodings if expected and not exact_match(trace.answer(d).answer, expected)]
    if st.session_state.get("diag_decoding") not in decodings or st.session_state.get("_diag_pick_for") != (
        trace.question,
        expected,
    ):
        st.session_state["_diag_pick_for"] = (trace.question, expected)  # default: the answer that is wrong
        st.session_state["diag_decoding"] = (wrong or decodings)[0]
    decoding = c2.radio("Answer to diagnose", decodings, format_func=DECODING_LABELS.get, key="diag_decoding")
    key = checks_key(trace)
    want = (key, expected)
    if expected and st.button(
        "Run the checks (one teacher-forced pass, closed-book, deeper search)", key="diag_run_button"
    ):
        st.session_state["diag_run"] = want
    extra = {}
    if expected and st.session_state.get("diag_run") == want:
        with st.spinner("Teacher-forcing the expected answer under every passage…"):
            extra = _checks(key, expected, trace)
    d = verdicts.diagnose(
        trace,
        list(expected),
        decoding,
        forced=extra.get("forced"),
        deep=extra.get("deep"),
        closed_book=extra.get("closed_book", trace.closed_book),
    )
    if d.correct:
        st.success(
            f"{DECODING_LABELS[decoding]}'s answer {md_text(repr(d.answer))} "
            "matches the expected answer: nothing to diagnose."
        )
    elif d.correct is False:
        st.error(
            f"{DECODING_LABELS[decoding]} answered {md_text(repr(d.answer))}; "
            f"expected {md_text(' or '.join(map(repr, d.expected)))}."
        )
    else:
        st.info("Type the expected answer to check it; without one, only the checks that need none run.")
    closed = extra.get("closed_book", trace.closed_book)
    if closed is not None:
        _three_answers(trace, closed)
    if not d.correct:
        _verdict_list(d, bool(extra))
    if extra.get("forced") is not None and extra["forced"].expected:
        st.markdown("**Expected vs produced** (teacher-forced under the same passages)")
        _scores_table(trace, d)
    counterfactual_panel.section(trace, extra.get("forced"), key)
