"""Evaluation: a set of questions under every mode, with EM, contained and answer-recall@K
(`matching` defines them), the verdicts of every wrong answer, whether the model was guessing at
each RAG answer (`confidence`, the rule every page uses), and saved runs.

Modes (the CSV's `mode` column): `closed-book` (the generator with no passage), `rag-token`,
`rag-sequence`, and `stuffed` (the K passages in one prompt) in a run decoded with `decode="all"`.
A run keeps one `QuestionResult` per question; `EvalRun.rows()` is the long table, one row per
(question, mode). Runs are saved under `cache_dir()/eval/` as CSV + JSON so the app's
Eval page shows the latest run without recomputing it.
"""

from __future__ import annotations

import gzip
import json
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass
from pathlib import Path

import pandas as pd

from rag_core import exports
from rag_core.analysis.attribution import stuffed_worth
from rag_core.analysis.attribution.token_sources import WEIGHTS, candidate_sources, shares
from rag_core.analysis.diagnosis.confidence import candidate_confidence
from rag_core.analysis.diagnosis.deep_search import deep_search
from rag_core.analysis.diagnosis.verdicts import diagnose as diagnose_answer
from rag_core.analysis.evaluation import eval_checkpoint, eval_summary
from rag_core.analysis.evaluation.eval_summary import MODES, RAG_MODES
from rag_core.analysis.evaluation.question_result import ModeResult, QuestionResult
from rag_core.analysis.evaluation.questions import EvalQuestion
from rag_core.analysis.matching import contains_answer, exact_match, passage_text
from rag_core.analysis.scoring import score_texts
from rag_core.config import CLOSED_BOOK, READINGS, STUFFED, AnswerSettings
from rag_core.decoding.decode import DECODER_VERSION
from rag_core.marginals import prob
from rag_core.storage import caches
from rag_core.storage.files import write_atomic, write_bytes_atomic, write_text_atomic
from rag_core.trace import Trace, log_p_under, trace_to_dict

CSV_COLUMNS = [
    "question",
    "mode",
    "answer",
    "em",
    "contained",
    "answers",
    "title",
    "recall",
    "answer_rank",
    "p_seq",
    "p_tok",
    "verdicts",
    "weights_share",
    "low_confidence",
    "confidence_reasons",
    "p_stuffed",
    "top_passage",
    "mixture_top_passage",
]


# ------------------------------------------------------------------------------------ one question
def evaluate_question(
    pipe,
    q: EvalQuestion,
    settings: AnswerSettings,
    diagnose: bool = True,
    depth: int = 100,
    trace_path: Path | None = None,
    decoded: tuple | None = None,
) -> QuestionResult:
    """Closed-book, RAG-Token and RAG-Sequence on one question; the K prompts are prepared once and
    reused for decoding both ways and for the teacher-forced pass of the gold answers.

    `decoded`: (PreparedRun, closed-book answer, seconds) when a batch decoded the question already
    (`evaluate_batch`); the seconds are its share of the batch."""
    t0 = time.perf_counter()
    if decoded is None:
        run = pipe.run(q.question, settings, keep_state=True)
        closed_book, shared = pipe.closed_book(run.trace.question, settings), 0.0
    else:
        run, closed_book, shared = decoded
    trace = run.trace
    trace.closed_book = closed_book
    ranks = [h.rank for h in trace.hits if contains_answer(passage_text(h.passage), q.answers)]
    recall = bool(ranks)
    modes = {
        CLOSED_BOOK: ModeResult(
            trace.closed_book,
            exact_match(trace.closed_book, q.answers),
            contains_answer(trace.closed_book, q.answers),
        )
    }
    wrong = []
    answered = [c for c in map(trace.answer, READINGS) if c is not None and c.token_ids]
    # one closed-book teacher-forced row per answer: which of its tokens came from the weights
    closed = (
        pipe.closed_book_scores(trace.question, [c.token_ids for c in answered]) if answered else None
    )  # (N, T)
    row_of = {id(c): j for j, c in enumerate(answered)}
    for mode in RAG_MODES:
        c = trace.answer(mode)
        if c is None:
            continue
        modes[mode] = ModeResult(
            c.answer,
            exact_match(c.answer, q.answers),
            contains_answer(c.answer, q.answers),
            prob(c.log_p_seq(trace.log_prior)),
            prob(c.log_p_tok(trace.log_prior)),
        )
        row = closed[row_of[id(c)]] if id(c) in row_of else None  # (T',) or None: an empty answer
        if row is not None:
            found = candidate_sources(trace.log_prior, c, row)
            modes[mode].weights_share = shares(found)[WEIGHTS]
        modes[mode].low_confidence = list(candidate_confidence(trace, c, row).codes)
        if not modes[mode].em:
            wrong.append(mode)
    if trace.stuffed is not None and trace.answer(STUFFED) is not None:
        c = trace.answer(STUFFED)
        modes[STUFFED] = stuffed_result(trace, q.answers)
        row = closed[row_of[id(c)]] if id(c) in row_of else None  # (T',) or None: an empty answer
        modes[STUFFED].low_confidence = list(candidate_confidence(trace, c, row).codes)
    deep = None
    if diagnose and wrong:
        with pipe.models.lock:  # the shared generator, as every path uses it
            forced = score_texts(pipe.models.generator, trace, q.answers, run.state0)
        deep = None if recall else deep_search(pipe, trace, q.answers, depth)
        for mode in wrong:
            d = diagnose_answer(
                trace, q.answers, mode, forced=forced, deep=deep, closed_book=trace.closed_book
            )
            modes[mode].verdicts = d.fired
    rank = ranks[0] if ranks else (deep.rank if deep is not None and deep.rank else None)
    if trace_path is not None:  # for offline counterfactuals (K, scale) on the stored conditionals
        data = {"question": asdict(q), "trace": trace_to_dict(trace)}
        write_bytes_atomic(trace_path, gzip.compress(json.dumps(data).encode("utf-8")))
    return QuestionResult(
        trace.question, q.answers, q.title, modes, recall, rank, shared + time.perf_counter() - t0, ranks
    )


def stuffed_result(trace: Trace, answers: list[str]) -> ModeResult:
    """The stuffed reading's answer of one question: EM, its p(y|x, all passages), the passage its
    leave-one-out says it leans on most, and the passage the mixture's posterior p(z|x,y) of the
    same answer cites (`stuffed_worth`)."""
    c = trace.answer(STUFFED)
    out = ModeResult(
        c.answer,
        exact_match(c.answer, answers),
        contains_answer(c.answer, answers),
        p_stuffed=prob(log_p_under(c, STUFFED, trace.log_prior)),
    )
    w = stuffed_worth.of(trace)
    if w is not None:
        out.top_passage = trace.hits[w.leans_on].rank
        out.mixture_top = None if w.cites is None else trace.hits[w.cites].rank
    return out


def evaluate_batch(
    pipe,
    qs: list[EvalQuestion],
    settings: AnswerSettings,
    diagnose: bool = True,
    depth: int = 100,
    trace_paths: list[Path | None] | None = None,
) -> list[QuestionResult]:
    """`evaluate_question` for several questions whose RAG answers and closed-book answers are each
    decoded as one batch (`Pipeline.run_many`, `closed_book_many`): the same results, fewer calls."""
    t0 = time.perf_counter()
    runs = [r[0] for r in pipe.run_many([q.question for q in qs], [settings], keep_state=True)]
    closed = pipe.closed_book_many([r.trace.question for r in runs], settings)
    share = (time.perf_counter() - t0) / len(qs)
    paths = trace_paths or [None] * len(qs)
    return [
        evaluate_question(pipe, q, settings, diagnose, depth, path, (run, c, share))
        for q, run, c, path in zip(qs, runs, closed, paths)
    ]


# ------------------------------------------------------------------------------------------- a run
@dataclass
class EvalRun:
    results: list[QuestionResult]
    settings: dict  # file, index, k, generator, skipped, started, seconds ...

    @property
    def k(self) -> int:
        return int(self.settings.get("k", 5))

    def summary(self) -> dict:
        """The run's figures (`eval_summary.summarize`)."""
        return eval_summary.summarize(self.results, self.k)

    def rows(self) -> list[dict]:
        rows = []
        for r in self.results:
            for mode in MODES:
                m = r.modes.get(mode)
                if m is None:
                    continue
                rows.append(
                    {
                        "question": r.question,
                        "mode": mode,
                        "answer": m.answer,
                        "em": int(m.em),
                        "contained": int(m.contained),
                        "answers": " | ".join(r.answers),
                        "title": r.title,
                        "recall": "" if mode == CLOSED_BOOK else int(r.recall),
                        "answer_rank": "" if r.answer_rank is None else r.answer_rank,
                        "p_seq": "" if m.p_seq is None else round(m.p_seq, 6),
                        "p_tok": "" if m.p_tok is None else round(m.p_tok, 6),
                        "verdicts": ";".join(m.verdicts),
                        "weights_share": "" if m.weights_share is None else round(m.weights_share, 6),
                        "low_confidence": "" if m.low_confidence is None else int(bool(m.low_confidence)),
                        "confidence_reasons": ";".join(m.low_confidence or ()),
                        "p_stuffed": "" if m.p_stuffed is None else round(m.p_stuffed, 6),
                        "top_passage": "" if m.top_passage is None else m.top_passage,
                        "mixture_top_passage": "" if m.mixture_top is None else m.mixture_top,
                    }
                )
        return rows

    def frame(self) -> pd.DataFrame:
        return pd.DataFrame(self.rows(), columns=CSV_COLUMNS)

    def to_csv(self, path) -> None:
        self.export(path, "csv")

    def export(self, path, fmt: str | None = None) -> None:
        """The rows as CSV (spreadsheet-safe), Parquet or JSON Lines (`exports`), by `fmt` or the suffix."""
        Path(path).write_bytes(exports.frame_bytes(self.frame(), fmt or exports.format_of(path), "eval"))

    def to_json(self) -> dict:
        return {
            "settings": self.settings,
            "summary": self.summary(),
            "results": [r.to_dict() for r in self.results],
        }

    @classmethod
    def from_json(cls, data: dict) -> EvalRun:
        return cls([QuestionResult.from_dict(r) for r in data["results"]], data.get("settings", {}))

    def table_text(self) -> str:
        """The summary the CLI prints (`eval_summary.table_text`)."""
        return eval_summary.table_text(self.summary(), self.settings)


def run_eval(
    pipe,
    questions: list[EvalQuestion],
    settings: AnswerSettings,
    progress: Callable[[int, int, QuestionResult], None] | None = None,
    diagnose: bool = True,
    extra: dict | None = None,
    trace_dir: Path | None = None,
    resume: Path | bool | None = None,
) -> EvalRun:
    """Evaluate every question; `progress(done, total, result)` after each one. `trace_dir`: also
    store each question's trace there (`NNNN.json.gz`), for counterfactuals over K and the scale.
    `extra`: what the run records beside its settings (its questions file, its stack's fingerprint).

    `resume`: a checkpoint file (True: the default one for these inputs, see `eval_checkpoint`), rewritten
    after every question and removed at the end; a killed run given the same inputs continues from
    it, and its answers are the ones the uninterrupted run would have given."""
    key = eval_checkpoint.run_key(pipe, questions, settings, diagnose) if resume else ""
    ckpt = eval_checkpoint.default_path(key) if resume is True else (Path(resume) if resume else None)
    started, results = eval_checkpoint.load(ckpt, key) if ckpt else (None, [])
    started = started or time.time()
    if trace_dir is not None:
        Path(trace_dir).mkdir(parents=True, exist_ok=True)
    for i in range(len(results)):
        if progress:
            progress(i + 1, len(questions), results[i])
    size = pipe.batch_size()
    for start in range(len(results), len(questions), size):
        batch = range(start, min(start + size, len(questions)))
        paths = [Path(trace_dir) / f"{i:04d}.json.gz" if trace_dir is not None else None for i in batch]
        results += evaluate_batch(pipe, [questions[i] for i in batch], settings, diagnose, trace_paths=paths)
        if ckpt:
            eval_checkpoint.save(ckpt, key, started, results)
        if progress:
            for i in batch:
                progress(i + 1, len(questions), results[i])
    info = {
        "index": pipe.index_name,
        "k": settings.k,
        "decode": settings.decode,
        "beams": settings.beams,
        "length_penalty": settings.length_penalty,
        "rescore": settings.rescore,
        "decoder": DECODER_VERSION,
        "scale": pipe.scale_for(settings),
        "generator": pipe.models.generator.id,
        "started": started,
        "seconds": round(time.time() - started, 1),
        **(extra or {}),
    }
    if ckpt:
        eval_checkpoint.discard(ckpt)
    return EvalRun(results, info)


# --------------------------------------------------------------------------------- saved runs
def eval_folder() -> Path:
    return caches.folder("eval")


def save_run(run: EvalRun, name: str | None = None, folder: Path | None = None) -> Path:
    """Write `<name>.json` + `<name>.csv` (default name: a timestamp) and the `latest` pair."""
    folder = folder or eval_folder()
    name = name or time.strftime("run-%Y%m%d-%H%M%S")
    data = json.dumps(run.to_json(), ensure_ascii=False, indent=1)
    for stem in (name, "latest"):
        write_text_atomic(folder / f"{stem}.json", data)
        write_atomic(folder / f"{stem}.csv", run.to_csv)
    return folder / f"{name}.json"


def saved_runs(folder: Path | None = None) -> list[Path]:
    """Saved run files, newest first (`latest.json` excluded: it is a copy of one of them)."""
    folder = folder or eval_folder()
    return sorted(
        (p for p in folder.glob("*.json") if p.stem != "latest"),
        key=lambda p: p.stat().st_mtime,
        reverse=True,
    )


def load_run(path: Path | None = None) -> EvalRun | None:
    """A saved run (default: the latest), or None when there is none or it cannot be read."""
    path = path or (eval_folder() / "latest.json")
    try:
        return EvalRun.from_json(json.loads(Path(path).read_text(encoding="utf-8")))
    except (OSError, ValueError, KeyError, TypeError):
        return None
