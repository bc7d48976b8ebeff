"""An evaluation run's figures: the summary of its results (EM, contained, recall@K per mode, why
RAG answers were wrong, how the low-confidence rule sorted them) and the table the CLI prints.
`evaluation.EvalRun` hands its results here; the Eval page draws the same summary.
"""

from __future__ import annotations

from collections import Counter

from rag_core.analysis.diagnosis.confidence import DISAGREE, GUESSING, UNSUPPORTED
from rag_core.analysis.diagnosis.verdict_rules import VERDICTS
from rag_core.analysis.evaluation.question_result import ModeResult, QuestionResult
from rag_core.analysis.evaluation.retrieval_metrics import CELLS, error_split, retrieval_metrics
from rag_core.analysis.matching import exact_match
from rag_core.config import CLOSED_BOOK, RAG_SEQUENCE, RAG_TOKEN, READINGS, STUFFED

MODES = (CLOSED_BOOK, RAG_TOKEN, RAG_SEQUENCE, STUFFED)  # stuffed: runs made with `eval --stuffed`
RAG_MODES = (RAG_TOKEN, RAG_SEQUENCE)
CONFIDENCE_MODES = READINGS  # the readings the rule judges (stuffed: where a run has it)
CONFIDENCE_CODES = (GUESSING, DISAGREE, UNSUPPORTED)
CONFIDENCE_ROWS = {  # the rows of the low-confidence table, as the CLI prints it and the Eval page draws it
    "assessed": "answers assessed",
    "low": "flagged low confidence",
    "em_low": "  EM of the flagged answers",
    "em_sure": "  EM of the other answers",
    "wrong_flagged": "wrong answers flagged",
    "right_flagged": "right answers flagged",
}


def percent(x: float | None) -> str:
    return "—" if x is None else f"{100 * x:.1f}%"


def _decimal(x: float | None) -> str:
    return "—" if x is None else f"{x:.3f}"


def weights_shares(results: list[QuestionResult], mode: str) -> dict[str, float | None]:
    """The mean share of answer tokens that came from the model's weights, over the right and over
    the wrong answers of `mode` (None where no answer has the share: none, or an older run)."""
    out = {}
    for name, em in (("right", True), ("wrong", False)):
        got = [
            r.modes[mode].weights_share
            for r in results
            if mode in r.modes and r.modes[mode].em == em and r.modes[mode].weights_share is not None
        ]
        out[name] = sum(got) / len(got) if got else None
    return out


def confidence_split(results: list[QuestionResult], mode: str) -> dict:
    """How the low-confidence rule sorted `mode`'s answers: how many it flagged among those it
    assessed, and EM among the flagged and among the rest (None where a group is empty). A rule
    that says something has a far lower EM on the answers it flags.

    >>> def r(em, low):
    ...     mode = ModeResult("a", em, em, low_confidence=low)
    ...     return QuestionResult("q", ["a"], "", {"rag-token": mode}, True, 1)
    >>> split = confidence_split([r(True, []), r(False, ["guessing"]), r(True, None)], "rag-token")
    >>> split["low"], split["em_low"], split["wrong_flagged"], split["right_flagged"], split["guessing"]
    (1, 0.0, 1.0, 0.0, 1)
    """
    got = [r.modes[mode] for r in results if mode in r.modes and r.modes[mode].low_confidence is not None]
    low = [m for m in got if m.low_confidence]
    sure = [m for m in got if not m.low_confidence]

    def em(ms: list[ModeResult]) -> float | None:
        return sum(m.em for m in ms) / len(ms) if ms else None

    def flagged(ms: list[ModeResult]) -> float | None:
        return sum(bool(m.low_confidence) for m in ms) / len(ms) if ms else None

    codes = Counter(code for m in low for code in m.low_confidence)
    return {
        "assessed": len(got),
        "low": len(low),
        "em_low": em(low),
        "em_sure": em(sure),
        "wrong_flagged": flagged([m for m in got if not m.em]),
        "right_flagged": flagged([m for m in got if m.em]),
        **{code: codes.get(code, 0) for code in CONFIDENCE_CODES},
    }


def em_by_kind(results: list[QuestionResult], kinds: dict[str, str]) -> dict[str, dict]:
    """EM per question kind (`kinds`: question -> kind, from its file) and mode: {kind: {"n": …,
    mode: EM}}, kinds in order of size; {} when the file names no kind.

    >>> right = QuestionResult("a?", ["x"], "", {"rag-token": ModeResult("x", True, True)}, True, 1)
    >>> wrong = QuestionResult("b?", ["x"], "", {"rag-token": ModeResult("y", False, False)}, True, 1)
    >>> em_by_kind([right, wrong], {"a?": "date", "b?": "date"})
    {'date': {'n': 2, 'rag-token': 0.5}}
    """
    groups: dict[str, list[QuestionResult]] = {}
    for r in results:
        if kinds.get(r.question):
            groups.setdefault(kinds[r.question], []).append(r)
    return {
        kind: {"n": len(rs)}
        | {m: sum(r.modes[m].em for r in rs) / len(rs) for m in MODES if all(m in r.modes for r in rs)}
        for kind, rs in sorted(groups.items(), key=lambda kv: -len(kv[1]))
    }


def kind_table(by_kind: dict[str, dict]) -> str:
    """The EM-by-kind table as the CLI prints it ("" when there is none)."""
    if not by_kind:
        return ""
    modes = [m for m in MODES if any(m in row for row in by_kind.values())]
    lines = [f"{'EM by question kind':<24}{'n':>5}" + "".join(f"{m:>14}" for m in modes)]
    for kind, row in by_kind.items():
        cells = "".join(f"{percent(row.get(m)):>14}" for m in modes)
        lines.append(f"{kind:<24}{row['n']:>5}" + cells)
    return "\n".join(lines)


def distractor_picks(results: list[QuestionResult], distractors: dict[str, tuple[str, ...]]) -> dict:
    """Of the wrong answers to questions that record distractors (`distractors`: question -> the
    other candidates its passage names, from its file), how many are one of them (SQuAD exact
    match), per mode: {mode: {"wrong": n, "distractor": n}}; {} when the file records none.

    >>> wrong = QuestionResult("a?", ["x"], "", {"rag-token": ModeResult("y", False, False)}, True, 1)
    >>> other = QuestionResult("b?", ["x"], "", {"rag-token": ModeResult("z", False, False)}, True, 1)
    >>> distractor_picks([wrong, other], {"a?": ("Y",), "b?": ("w",)})
    {'rag-token': {'wrong': 2, 'distractor': 1}}
    """
    asked = [r for r in results if distractors.get(r.question)]
    out = {}
    for m in MODES:
        wrong = [r for r in asked if m in r.modes and not r.modes[m].em]
        if any(m in r.modes for r in asked):
            picked = sum(exact_match(r.modes[m].answer, distractors[r.question]) for r in wrong)
            out[m] = {"wrong": len(wrong), "distractor": picked}
    return out


def distractor_line(picks: dict) -> str:
    """`distractor_picks` as the CLI prints it ("" when there is none)."""
    if not picks:
        return ""
    cells = "".join(f"{str(v['distractor']) + ' of ' + str(v['wrong']):>14}" for v in picks.values())
    head = f"{'wrong answers that name a recorded distractor':<46}" + "".join(f"{m:>14}" for m in picks)
    return f"{head}\n{'':<46}{cells}"


def summarize(results: list[QuestionResult], k: int) -> dict:
    """EM, contained and recall@K per mode (fractions), verdict counts, the retrieval metrics, the
    error split and the weights' share per marginal, and the low-confidence split per reading the
    rule judged, over `results`."""
    n = len(results)
    out = {"n": n, "k": k, "modes": {}, "verdicts": {}}
    recall = sum(r.recall for r in results) / n if n else 0.0
    for mode in MODES:
        got = [r.modes[mode] for r in results if mode in r.modes]
        if not got:
            continue
        out["modes"][mode] = {
            "n": len(got),
            "em": sum(m.em for m in got) / len(got),
            "contained": sum(m.contained for m in got) / len(got),
            "recall": None if mode == CLOSED_BOOK else recall,
        }
    for mode in RAG_MODES:
        wrong = [r.modes[mode] for r in results if mode in r.modes and not r.modes[mode].em]
        counts = Counter(v for m in wrong for v in m.verdicts)
        out["verdicts"][mode] = {
            "wrong": len(wrong),
            **{code: counts.get(code, 0) for code in VERDICTS},
            "no verdict": sum(1 for m in wrong if not m.verdicts),
        }
    out["retrieval"] = retrieval_metrics(results, k)
    out["split"] = {mode: {c: v["n"] for c, v in error_split(results, mode).items()} for mode in RAG_MODES}
    out["weights_share"] = {mode: weights_shares(results, mode) for mode in RAG_MODES}
    out["confidence"] = {mode: confidence_split(results, mode) for mode in CONFIDENCE_MODES}
    out["stuffed"] = stuffed_agreement(results)
    return out


def stuffed_agreement(results: list[QuestionResult]) -> dict:
    """How often the passage the stuffed reading leans on most (leave-one-out) is the one the
    mixture's posterior cites for the same answer, over the questions where both are known.

    >>> def r(top, mix):
    ...     mode = ModeResult("a", True, True, top_passage=top, mixture_top=mix)
    ...     return QuestionResult("q", ["a"], "", {"stuffed": mode}, True, 1)
    >>> stuffed_agreement([r(1, 1), r(2, 1), r(None, None)])
    {'n': 2, 'agree': 1}
    """
    got = [
        r.modes[STUFFED] for r in results if STUFFED in r.modes and r.modes[STUFFED].top_passage is not None
    ]
    return {"n": len(got), "agree": sum(m.top_passage == m.mixture_top for m in got)}


def table_text(s: dict, settings: dict) -> str:
    """The summary (`summarize`) as the CLI prints it: metrics per mode, then the verdict counts."""
    st = settings
    head = (
        f"{st.get('file', 'questions')} · {s['n']} questions · index {st.get('index', '?')} · K={s['k']}"
        f" · generator {st.get('generator', '?')}"
    )
    if st.get("skipped"):
        head += f" · {st['skipped']} malformed lines skipped"
    recall_k = f"recall@{s['k']}"
    lines = [head, "", f"{'mode':<14}{'EM':>14}{'contained':>16}{recall_k:>12}"]
    for mode, m in s["modes"].items():
        em = f"{100 * m['em']:.1f}% ({round(m['em'] * m['n'])}/{m['n']})"
        cont = f"{100 * m['contained']:.1f}%"
        rec = "—" if m["recall"] is None else f"{100 * m['recall']:.1f}%"
        lines.append(f"{mode:<14}{em:>14}{cont:>16}{rec:>12}")
    r = s["retrieval"]
    shown = [
        f"{name} {percent(v) if name.startswith(('hit', 'recall')) else _decimal(v)}" for name, v in r.items()
    ]
    lines += ["", "retrieval (a passage counts when it contains a gold answer): " + " · ".join(shown)]
    lines += [
        "",
        f"{'answers by whether a passage held the answer':<46}{'rag-token':>10}{'rag-sequence':>14}",
    ]
    for c in CELLS:
        lines.append(f"{'  ' + c:<46}{s['split']['rag-token'][c]:>10}{s['split']['rag-sequence'][c]:>14}")
    lines.append(
        f"{'  tokens from the weights, right answers':<46}"
        + "".join(f"{percent(s['weights_share'][m]['right']):>{w}}" for m, w in zip(RAG_MODES, (10, 14)))
    )
    lines.append(
        f"{'  tokens from the weights, wrong answers':<46}"
        + "".join(f"{percent(s['weights_share'][m]['wrong']):>{w}}" for m, w in zip(RAG_MODES, (10, 14)))
    )
    lines += [
        "",
        f"{'why RAG answers were wrong (verdicts overlap)':<46}{'rag-token':>10}{'rag-sequence':>14}",
    ]
    v = s["verdicts"]
    for code in ["wrong", *VERDICTS, "no verdict"]:
        label = {"wrong": "wrong answers", "no verdict": "no verdict fired"}.get(
            code, f"  {VERDICTS.get(code, code)}"
        )
        lines.append(f"{label:<46}{v['rag-token'][code]:>10}{v['rag-sequence'][code]:>14}")
    agree = s["stuffed"]
    if agree["n"]:
        lines += [
            "",
            "stuffed reading: the passage it leans on most (leave-one-out) is the one the mixture cites "
            f"for the same answer (RAG-Sequence posterior) in {agree['agree']} of {agree['n']} questions",
        ]
    if confidence_assessed(s):
        judged = confidence_modes(s)
        lines += [
            "",
            f"{'low confidence (the rule of every page)':<46}" + "".join(f"{m:>14}" for m in judged),
        ]
        for row in confidence_rows(s):
            lines.append(f"{row['']:<46}" + "".join(f"{row[m]:>14}" for m in judged))
    return "\n".join(lines)


def confidence_assessed(s: dict) -> bool:
    """Whether the run's RAG answers were assessed by the low-confidence rule (a run saved before the
    rule was not)."""
    return any(s["confidence"][m]["assessed"] for m in RAG_MODES)


def confidence_modes(s: dict) -> list[str]:
    """The readings of a summary the rule judged (a run saved before the stuffed reading was judged,
    or made without it, has the two marginals only)."""
    return [m for m in CONFIDENCE_MODES if s["confidence"].get(m, {}).get("assessed")]


def confidence_rows(s: dict) -> list[dict[str, str]]:
    """The low-confidence table of a summary as text cells: a label ("") and one cell per judged
    reading."""
    c = s["confidence"]
    return [
        {
            "": label,
            **{
                m: str(c[m][key]) if key in ("assessed", "low") else percent(c[m].get(key))
                for m in confidence_modes(s)
            },
        }
        for key, label in CONFIDENCE_ROWS.items()
    ]


def low_confidence_text(r: QuestionResult) -> str:
    """Which of a question's RAG answers the rule flagged, and why ("" none, "—" not assessed).

    >>> tok = ModeResult("b", False, False, low_confidence=["guessing"])
    >>> seq = ModeResult("a", True, True, low_confidence=[])
    >>> r = QuestionResult("q", ["a"], "", {"rag-token": tok, "rag-sequence": seq}, True, 1)
    >>> low_confidence_text(r)
    'token: guessing'
    """
    known = [(m, r.modes[m].low_confidence) for m in CONFIDENCE_MODES if m in r.modes]
    if not any(codes is not None for _, codes in known):
        return "—"
    return "; ".join(f"{m.removeprefix('rag-')}: {', '.join(codes)}" for m, codes in known if codes)
