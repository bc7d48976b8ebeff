"""The Diagnose panel's counterfactuals: remove passages, keep fewer or change the scale, and the
answers are chosen again under the new prior, read off the stored numbers where they decide, else
by a model call made on request and cached per (question, index, settings, passages kept, scale)."""

from __future__ import annotations

import hashlib

import pandas as pd
import streamlit as st

from app import state
from app.ui import answer_card
from app.ui.safe_text import md_text
from app.ui.views import table
from rag_core.loupe.diagnosis import counterfactual, scoring
from rag_core.loupe.vocabulary import (
    DECODING_LABELS,
    RAG_SEQUENCE,
    RAG_TOKEN,
    Trace,
    first_line,
    log_p_under,
    p_text,
    prob,
)


def cf_key(trace: Trace, name: str) -> str:
    """The key of one counterfactual control for this trace: a new question (or index, K, scale)
    starts from its own defaults instead of the last question's settings."""
    key = f"{trace.question}\x00{trace.index}\x00{trace.k}\x00{trace.scale}"
    ident = hashlib.sha1(key.encode()).hexdigest()
    return f"cf_{name}_{ident[:12]}"


def answer_p(trace: Trace, cand, decoding: str) -> float:
    """A candidate's probability under its own decoding's marginal and the trace's prior."""
    return prob(log_p_under(cand, decoding, trace.log_prior))


def probability_delta(p: float, before: float | None) -> dict:
    """`st.metric` delta arguments: a signed change with the arrow and colour of its direction, or
    a neutral "p = …" when there is nothing to compare or nothing changed.

    >>> probability_delta(0.072, 0.238)["delta"], probability_delta(0.5, 0.5)["delta_arrow"]
    ('-0.166 (p 0.238 → 0.072)', 'off')
    """
    if before is None or abs(p - before) < 5e-4:
        return {
            "delta": f"p = {p_text(p)}" + ("" if before is None else ", unchanged"),
            "delta_color": "off",
            "delta_arrow": "off",
        }
    return {"delta": f"{p - before:+.3f} (p {p_text(before)} → {p_text(p)})", "delta_color": "normal"}


@st.cache_resource(show_spinner=False, max_entries=64)
def _rerun(key: tuple, drop: tuple[int, ...], k: int, scale: float, _trace: Trace) -> Trace:
    """A counterfactual's model call, once per key: the kept passages decoded again under the new prior."""
    return counterfactual.rerun(state.pipeline(_trace.index), _trace, drop, k, scale)


def _card(col, trace: Trace, cf: counterfactual.Counterfactual, d: str, full: Trace | None) -> None:
    """One counterfactual answer: read off the stored numbers, computed by a model call (`full`),
    or neither yet; judged by the low-confidence rule as every answer card is."""
    a, before = cf.answers[d], trace.answer(d)
    if a.needs_model_call:
        col.metric(DECODING_LABELS[d], counterfactual.NEEDS_CALL, help=md_text(a.note))
        col.caption(md_text(f"{a.note} (button below)"))  # a note can quote a model token
        return
    how = " (computed by a model call)" if a.computed else "" if a.exact else " (approximate)"
    delta = probability_delta(prob(a.log_p), answer_p(trace, before, d) if before else None)
    where = counterfactual.answer_candidate(trace, cf, d, full)
    conf = state.confidence(*where) if where is not None else None
    with col:
        answer_card.judged_metric(
            conf,
            f"counterfactual-{d}",
            DECODING_LABELS[d] + how,
            md_text(a.answer) or "(empty)",
            **delta,
            help=md_text(a.note),
        )
    col.caption(
        md_text(
            (
                "same answer as before"
                if before and a.answer == before.answer
                else f"was {before.answer!r}"
                if before
                else ""
            )
            + f" · {a.note}"
        )
    )


def section(trace: Trace, forced: scoring.ForcedAnswers | None, checks: tuple) -> None:
    """The counterfactual controls and answers of one trace; `checks` is the key of its checks
    (`diagnose_panel.checks_key`), which keys a model call too."""
    st.markdown("**Counterfactuals** — from the stored conditionals; a model call only where they can't tell")
    st.caption(
        "Remove passages, keep fewer or change the scale, and the answer is chosen again under the "
        "new prior, "
        "so it can change: RAG-Sequence exactly, RAG-Token where the stored top tokens prove the "
        "choice (else the card says it needs a model call, which a button makes). With nothing "
        "changed, the answers are the trace's own. The Citations page's “remove a passage” keeps "
        "the answers fixed and shows how their probabilities move."
    )
    c1, c2, c3 = st.columns([2, 1, 1])
    options = [h.rank for h in trace.hits]
    drop = c1.multiselect(
        "Remove passages",
        options,
        key=cf_key(trace, "drop"),
        format_func=lambda r: f"#{r} {trace.hits[r - 1].passage.title}",
    )
    k = c2.slider("Keep the top K", 1, trace.k, trace.k, key=cf_key(trace, "k")) if trace.k > 1 else 1
    scale = c3.number_input(
        "Retriever scale",
        min_value=0.1,
        max_value=1000.0,
        value=float(trace.scale),
        step=1.0,
        key=cf_key(trace, "scale"),
    )
    try:
        cf = counterfactual.counterfactual(trace, drop, k, scale, forced)
    except ValueError as e:
        st.warning(str(e))
        return
    request = (checks, tuple(sorted(drop)), k, scale)
    asked = st.session_state.setdefault("cf_calls", set())  # the model calls this session asked for
    full = None
    if cf.needs_model_call and request in asked:
        try:
            with st.spinner(f"Decoding the {sum(cf.keep)} kept passages again with the generator…"):
                full = _rerun(*request, trace)
                cf = counterfactual.with_computed(cf, full)
        except state.USER_ERRORS as e:
            st.error(first_line(e, "the model call did not work"))
    cols = st.columns(2)
    for col, d in zip(cols, (RAG_TOKEN, RAG_SEQUENCE)):
        if d in cf.answers:
            _card(col, trace, cf, d, full)
    if cf.needs_model_call:
        st.button(
            f"Make the model call: decode the {sum(cf.keep)} kept passages again",
            key=cf_key(trace, "call"),
            on_click=asked.add,
            args=(request,),
            help="The generator decodes the kept passages under the new prior with this trace's "
            "settings (decoding, beams, length limit): about as long as answering the question.",
        )
    prior = pd.DataFrame(
        {
            "rank": [h.rank for h in trace.hits],
            "title": [h.passage.title for h in trace.hits],
            "prior before": trace.prior,
            "prior now": cf.prior,
        }
    )
    table(prior, probabilities=("prior before", "prior now"))
    table(pd.DataFrame(cf.table), hide_index=True, width="stretch")
