"""Index swap: the paper's §4.5 hot-swap experiment. One frozen model, a 2016 and a 2018 index."""
from pathlib import Path

import pandas as pd
import streamlit as st

from app import jobs, state, views
from rag_core import experiments as ex

ROOT = Path(__file__).resolve().parent.parent
ss = st.session_state
DEFAULT_SWAP_QUESTION = "Who is the President of the United States?"

st.title("Index swap")
st.caption("RAG's knowledge lives in its index, so it can be updated without retraining (Lewis et al. 2020, §4.5): "
           "the same frozen model answers on an index of 31 December 2016 and one of 31 December 2018.")

# --- pending jump to the Token vs Sequence page (set by the "explain" button's callback) ---
if ss.pop("swap_goto", False):
    st.switch_page(str(ROOT / "pages" / "token_vs_sequence.py"))

leaders = ex.leaders_frame()
holders = {q: (h16, h18) for q, h16, h18 in zip(leaders["question"], leaders["holder_2016"], leaders["holder_2018"])}
questions = list(leaders["question"])


def _pick() -> None:
    ss["swap_question"] = ss["swap_pick"]


if ss.get("swap_pick") not in questions:
    ss["swap_pick"] = ss.get("swap_question") if ss.get("swap_question") in questions else DEFAULT_SWAP_QUESTION
st.selectbox("A world-leader question", questions, key="swap_pick", on_change=_pick,
             help="Positions whose holder changed between the two snapshots (assets/leaders.csv).")
with st.form("swap_ask"):
    text = st.text_input("Question", value=ss.get("swap_question", DEFAULT_SWAP_QUESTION), max_chars=2000)
    if st.form_submit_button("Answer on both indexes", type="primary"):
        ss["swap_question"] = text
question = ss.get("swap_question", DEFAULT_SWAP_QUESTION)

# --- one question, both indexes, side by side ---
known = holders.get(question.strip())
if known:
    st.caption(f"Holder on 31 Dec 2016: {known[0]} · on 31 Dec 2018: {known[1]}")
cols = st.columns(2)
traces = {}
for col, year in zip(cols, ex.YEARS):
    with col:
        st.subheader(f"{year} index")
        trace = state.trace_for(question, index_name=year)
        traces[year] = trace
        if trace is None:
            continue
        for decoding, label in (("rag-token", "RAG-Token"), ("rag-sequence", "RAG-Sequence")):
            best = trace.answer(decoding)
            if best is None:
                continue
            logp = best.log_p_tok(trace.log_prior) if decoding == "rag-token" else best.log_p_seq(trace.log_prior)
            verdict = ""
            if known:
                c16, c18, both = ex.judge(best.answer, *known)
                verdict = ("names the 2016 holder" if c16 else "names the 2018 holder" if c18
                           else "names both holders (ambiguous)" if both else "names neither holder")
            st.metric(f"{label} ({year} index)", best.answer or "(empty)", f"p = {views.prob(logp):.3f}",
                      delta_color="off", help=verdict or None)
            if verdict:
                st.caption(f"{label}: {verdict}")
        frame = views.passages_frame(trace)
        st.dataframe(frame, hide_index=True, width="stretch",
                     column_config={c: st.column_config.ProgressColumn(c, min_value=0.0, max_value=1.0, format="%.3f")
                                    for c in frame.columns if c.startswith(("prior", "posterior"))}
                     | {"text": st.column_config.TextColumn("text", width="large")})
if all(traces.values()):
    ids = {y: {h.passage.id for h in t.hits} for y, t in traces.items()}
    shared = len(ids["2016"] & ids["2018"])
    st.caption(f"{traces['2016'].k - shared} of the {traces['2016'].k} passages differ between the two indexes; "
               "the models are the same objects in memory (no reload).")

# --- the whole experiment ---
st.divider()
st.subheader(f"The experiment: {len(leaders)} positions × 2 indexes")
cfg = ex.experiment_config()
checksums = {y: state.index(y).manifest.get("passages_checksum") or "" for y in ex.YEARS}
if not all(checksums.values()):
    checksums = ex.index_checksums()
result = ex.cached_result(cfg, checksums, partial=True)
st.caption(f"Settings: K={cfg.k}, scale={cfg.scale or 'the encoder default (20)'}, greedy, up to {cfg.max_new_tokens} "
           "answer tokens. An answer is correct for a year when it names that year's holder (full name or surname, "
           "accents ignored). Same as `python -m rag_core leaders`, whose results this page shares.")

shipped = ex.shipped_result(cfg, checksums)
if result is None or not result.complete:
    done = result.positions if result else 0
    if shipped is not None:
        st.info(f"Showing the shipped reference run ({shipped.created[:10]}; same models, prompt, snapshots and "
                f"settings, checked by fingerprint). {done} of {len(leaders)} positions have been recomputed on this "
                "machine; a run replaces the shipped rows with live ones.", icon=":material/inventory_2:")
    else:
        st.info(f"{done} of {len(leaders)} positions computed so far. The full run answers every question on both "
                "indexes and closed-book: on a CPU this takes a while; it resumes where it stopped.")
    job = jobs.get("leaders")
    if job is None or not job.running:
        if job is not None and job.error:
            st.error(f"The last run stopped: {job.error}. What it computed is kept; resuming continues from there.")
        if st.button("Run the experiment" if not done else "Resume the experiment", type="primary"):
            pipes = {y: state.pipeline(y) for y in ex.YEARS}  # loaded here, in the page's own run
            job = jobs.start("leaders", lambda progress: ex.run_experiment(cfg, lambda: pipes, checksums=checksums,
                                                                             progress=progress))
    if job is not None and job.running:
        @st.fragment(run_every=2)
        def _progress() -> None:
            j = jobs.get("leaders")
            st.progress(j.fraction, text=f"Running in the background (other pages stay usable): {j.message}")
            if not j.running:
                st.rerun()

        _progress()
    if (result is None or not result.complete) and shipped is not None:
        result = ex.overlay(result, shipped)  # live rows replace shipped ones as they come

if result is not None:
    if result.shipped:
        st.caption(f"Tables: the shipped reference run, with {done} position(s) recomputed on this machine.")
    elif not result.complete:
        st.warning(f"Partial result: {result.positions} of {len(leaders)} positions.")
    for decoding in result.decodings():
        st.markdown(f"**{'RAG-Token' if decoding == 'rag-token' else 'RAG-Sequence'}**: accuracy by index (rows) and "
                    "leaders' year (columns); the diagonal should be high, the rest low. The held-out half is the "
                    "result; the prompt and settings were chosen on the tuning half.")
        halves = st.columns(2)
        for col, split, label in zip(halves, ("test", "tune"), ("Held-out half", "Tuning half")):
            t = result.table(decoding, split)
            col.caption(f"{label} ({int(result.frame()['split'].eq(split).sum() / max(1, 2 * len(result.decodings())))} positions)")
            col.dataframe(pd.DataFrame({
                "leaders 2016": t["leaders 2016"].map(lambda x: f"{100 * x:.0f}%"),
                "paper 2016": [f"{100 * ex.PAPER[(y, '2016')]:.0f}%" for y in ex.YEARS],
                "leaders 2018": t["leaders 2018"].map(lambda x: f"{100 * x:.0f}%"),
                "paper 2018": [f"{100 * ex.PAPER[(y, '2018')]:.0f}%" for y in ex.YEARS],
            }, index=t.index), width="content")
        o = result.override(decoding)
        st.caption(f"Answers naming the other year's holder: {o['other_year']} of {o['total']} "
                   f"({o['other_year_in_passages']} of them named in the retrieved passages, "
                   f"{o['other_year_closed_book']} also the model's closed-book answer); naming both "
                   f"(ambiguous): {o['ambiguous']}; naming neither holder: {o['neither']}. Goal (matched ≥ {ex.GOAL_MATCHED:.0%}, mismatched ≤ "
                   f"{ex.GOAL_MISMATCHED:.0%}): {'met' if result.goal_met(decoding) else 'not met'}.")
        st.info(f"Finding: {result.finding(decoding)}", icon=":material/search:")
    cb = result.closed_book_accuracy()
    c1, c2, c3 = st.columns(3)
    c1.metric("Closed-book: names the 2016 holder", f"{100 * cb['2016']:.0f}%")
    c2.metric("Closed-book: names the 2018 holder", f"{100 * cb['2018']:.0f}%")
    c3.metric("Compute time", f"{result.elapsed_s / 60:.0f} min")

    # --- per position ---
    st.subheader("Per position")
    f1, f2 = st.columns(2)
    only_fail = f1.toggle("Failures only", key="swap_fail_only",
                          help="Answers that do not name the holder of the index's own year.")
    dec = f2.radio("Decoding", ["rag-token", "rag-sequence"], horizontal=True, key="swap_decoding")
    frame = result.failures(dec) if only_fail else result.frame()[lambda f: f["decoding"] == dec]
    cols_shown = ["position", "split", "index", "answer", "holder_2016", "holder_2018", "correct_2016",
                  "correct_2018", "ambiguous", "closed_book", "p_answer", "top_passage"]
    st.dataframe(frame[cols_shown], hide_index=True, width="stretch",
                 column_config={"p_answer": st.column_config.NumberColumn("p(answer)", format="%.3f")})

    fails = result.failures(dec)
    if len(fails):
        labels = [f"{r.position} · {r.index} index → {r.answer or '(empty)'}" for r in fails.itertuples()]
        pick = st.selectbox("A failure to explain", range(len(labels)), format_func=lambda i: labels[i], key="swap_fail")
        row = fails.iloc[pick]

        def _explain(q: str = row["question"], idx: str = row["index"]) -> None:
            ss["question"] = q
            ss["index_name"] = idx
            ss["swap_goto"] = True

        st.button("Explain this failure", on_click=_explain,
                  help="Opens the Token vs Sequence page on this question and index, to step through the answer.")
    else:
        st.success(f"No failure for {dec}.")
