"""The diagnosis of one answer with every check, as the Ask page's Diagnose panel runs it, and the
same as text and JSON for `ask QUESTION --expected ANSWER`.

The model-calling checks (`run_checks`): the expected answer(s) teacher-forced under every passage
(one batched pass from the trace's own prompts), the closed-book answer, and a deeper search for a
passage that contains the answer. Everything else, the counterfactuals included, is read from the
trace's stored conditionals.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from rag_core.analysis import scoring
from rag_core.analysis.diagnosis import counterfactual, deep_search
from rag_core.analysis.diagnosis.counterfactual import NEEDS_CALL
from rag_core.analysis.diagnosis.verdict_rules import VERDICTS
from rag_core.analysis.diagnosis.verdicts import Diagnosis, diagnose
from rag_core.config import DECODING_LABELS, RAG_SEQUENCE, RAG_TOKEN
from rag_core.marginals import prob
from rag_core.pipeline import trace_settings
from rag_core.trace import Trace

STATUS_WORDS = {True: "FIRED", None: "not checked", False: "not this"}
ORDER = {True: 0, None: 1, False: 2}  # how verdicts are listed: fired first, then not checked, then not this


@dataclass
class Checks:
    forced: scoring.ForcedAnswers
    closed_book: str
    deep: deep_search.DeepHit | None


def run_checks(pipe, trace: Trace, expected: list[str]) -> Checks:
    """The three model-calling checks (see the module docstring), under the trace's own settings."""
    forced = scoring.force_answers(pipe, trace, expected)
    closed = pipe.closed_book(trace.question, trace_settings(pipe.settings, trace))
    return Checks(forced, closed, deep_search.deep_search(pipe, trace, expected))


def full_diagnosis(
    trace: Trace, expected: list[str], checks: Checks, decoding: str | None = None
) -> Diagnosis:
    return diagnose(
        trace, expected, decoding, forced=checks.forced, deep=checks.deep, closed_book=checks.closed_book
    )


def single_removals(trace: Trace, forced: scoring.ForcedAnswers | None) -> list[dict]:
    """Both answers with each passage removed in turn (no model call), as rows."""
    rows = []
    for h in trace.hits if trace.k > 1 else []:
        cf = counterfactual.counterfactual(trace, [h.rank], None, None, forced)
        row = {"removed": h.rank, "title": h.passage.title}
        for d in (RAG_TOKEN, RAG_SEQUENCE):
            a = cf.answers.get(d)
            if a is not None:
                p = None if a.log_p is None else prob(a.log_p)
                row[d] = {
                    "answer": a.answer,
                    "p": p,
                    "exact": a.exact,
                    "needs_model_call": a.needs_model_call,
                }
        rows.append(row)
    return rows


def _plain(value):
    """JSON-safe evidence: NaN and infinities as None, tuples as lists."""
    if isinstance(value, float):
        return None if math.isnan(value) or math.isinf(value) else value
    if isinstance(value, dict):
        return {str(k): _plain(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_plain(v) for v in value]
    if hasattr(value, "tolist"):
        return _plain(value.tolist())
    return value


def diagnosis_json(d: Diagnosis, checks: Checks, removals: list[dict]) -> dict:
    return _plain(
        {
            "question": d.question,
            "decoding": d.decoding,
            "answer": d.answer,
            "expected": d.expected,
            "correct": d.correct,
            "closed_book": checks.closed_book,
            "verdicts": [
                {
                    "code": v.code,
                    "title": v.title,
                    "fired": v.fired,
                    "summary": v.summary,
                    "evidence": v.evidence,
                }
                for v in d.verdicts
            ],
            "counterfactuals": removals,
        }
    )


def _removal_text(label: str, row: dict) -> str:
    if row["needs_model_call"]:
        return f"{label} {NEEDS_CALL}"
    return f"{label} {row['answer']!r} (p {row['p']:.3f}{'' if row['exact'] else ', approximate'})"


def diagnosis_text(d: Diagnosis, checks: Checks, removals: list[dict]) -> str:
    name = DECODING_LABELS[d.decoding]
    head = (
        f"{name} answered {d.answer!r}: "
        + ("right" if d.correct else "wrong")
        + f" (expected {' or '.join(map(repr, d.expected))}); closed-book: {checks.closed_book!r}"
    )
    lines = [head, "", "verdicts (fired first):"]
    for v in sorted(d.verdicts, key=lambda v: (ORDER[v.fired], list(VERDICTS).index(v.code))):
        lines.append(f"  {STATUS_WORDS[v.fired]:<12}{v.title}: {v.summary}")
    if removals:
        lines += ["", "counterfactuals, from the stored conditionals (no model call): each passage removed"]
        for r in removals:
            named = tuple(DECODING_LABELS.items())
            parts = [_removal_text(label, r[key]) for key, label in named if key in r]
            lines.append(f"  without #{r['removed']} {r['title']}: " + " · ".join(parts))
    return "\n".join(lines)
