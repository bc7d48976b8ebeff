"""Evaluation: a set of questions under all three modes, with EM, contained and answer-recall@K
(`matching` defines them), the verdicts of every wrong answer, and saved runs.

Modes (the CSV's `mode` column): `closed-book` (the generator with no passage), `rag-token`,
`rag-sequence`. A run keeps one `QuestionResult` per question; `EvalRun.rows()` is the long table,
one row per (question, mode). Runs are saved under `cache_dir()/eval/` as CSV + JSON so the app's
Eval page shows the latest run without recomputing it.
"""

from __future__ import annotations

import gzip
import json
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import asdict, dataclass
from pathlib import Path

import pandas as pd

from rag_core import exports
from rag_core.analysis import eval_checkpoint
from rag_core.analysis.deep_search import deep_search
from rag_core.analysis.matching import contains_answer, exact_match, passage_text
from rag_core.analysis.question_result import ModeResult, QuestionResult
from rag_core.analysis.questions import EvalQuestion
from rag_core.analysis.retrieval_metrics import CELLS, error_split, retrieval_metrics
from rag_core.analysis.scoring import score_texts
from rag_core.analysis.token_sources import WEIGHTS, candidate_sources, shares
from rag_core.analysis.verdict_rules import VERDICTS
from rag_core.analysis.verdicts import diagnose as diagnose_answer
from rag_core.config import CLOSED_BOOK, RAG_SEQUENCE, RAG_TOKEN
from rag_core.decoding.decode import DECODER_VERSION
from rag_core.marginals import prob
from rag_core.storage import caches
from rag_core.storage.files import write_atomic, write_bytes_atomic, write_text_atomic
from rag_core.trace import trace_to_dict

MODES = (CLOSED_BOOK, RAG_TOKEN, RAG_SEQUENCE)
RAG_MODES = (RAG_TOKEN, RAG_SEQUENCE)
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
]


# ------------------------------------------------------------------------------------ one question
def evaluate_question(
    pipe,
    q: EvalQuestion,
    cfg,
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
        run = pipe.run(q.question, cfg, keep_state=True)
        closed_book, shared = pipe.closed_book(run.trace.query, cfg), 0.0
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
    answered = [c for c in map(trace.answer, RAG_MODES) if c is not None and c.token_ids]
    # one closed-book teacher-forced row per answer: which of its tokens came from the weights
    closed = (
        pipe.closed_book_scores(trace.query, [c.token_ids for c in answered]) if answered else None
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
        if id(c) in row_of:
            found = candidate_sources(trace.log_prior, c, closed[row_of[id(c)]])
            modes[mode].weights_share = shares(found)[WEIGHTS]
        if not modes[mode].em:
            wrong.append(mode)
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
        trace.query, q.answers, q.title, modes, recall, rank, shared + time.perf_counter() - t0, ranks
    )


def evaluate_batch(
    pipe,
    qs: list[EvalQuestion],
    cfg,
    diagnose: bool = True,
    depth: int = 100,
    trace_paths: list[Path | None] | None = None,
) -> list[QuestionResult]:
    """`evaluate_question` for several questions whose RAG answers and closed-book answers are each
    decoded as one batch (`Pipeline.run_many`, `closed_book_many`): the same results, fewer calls."""
    t0 = time.perf_counter()
    runs = [r[0] for r in pipe.run_many([q.question for q in qs], [cfg], keep_state=True)]
    closed = pipe.closed_book_many([r.trace.query for r in runs], cfg)
    share = (time.perf_counter() - t0) / len(qs)
    paths = trace_paths or [None] * len(qs)
    return [
        evaluate_question(pipe, q, cfg, diagnose, depth, path, (run, c, share))
        for q, run, c, path in zip(qs, runs, closed, paths)
    ]


def _pct(x: float | None) -> str:
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


# ------------------------------------------------------------------------------------------- a run
@dataclass
class EvalRun:
    results: list[QuestionResult]
    settings: dict  # file, index, k, generator, skipped, started, seconds ...

    @property
    def k(self) -> int:
        return int(self.settings.get("k", 5))

    def summary(self) -> dict:
        """EM, contained and recall@K per mode (fractions), and verdict counts per RAG mode."""
        n = len(self.results)
        out = {"n": n, "k": self.k, "modes": {}, "verdicts": {}}
        recall = sum(r.recall for r in self.results) / n if n else 0.0
        for mode in MODES:
            got = [r.modes[mode] for r in self.results if mode in r.modes]
            if not got:
                continue
            out["modes"][mode] = {
                "n": len(got),
                "em": sum(m.em for m in got) / len(got),
                "contained": sum(m.contained for m in got) / len(got),
                "recall": None if mode == CLOSED_BOOK else recall,
            }
        for mode in RAG_MODES:
            wrong = [r.modes[mode] for r in self.results if mode in r.modes and not r.modes[mode].em]
            counts = Counter(v for m in wrong for v in m.verdicts)
            out["verdicts"][mode] = {
                "wrong": len(wrong),
                **{code: counts.get(code, 0) for code in VERDICTS},
                "no verdict": sum(1 for m in wrong if not m.verdicts),
            }
        out["retrieval"] = retrieval_metrics(self.results, self.k)
        out["split"] = {
            mode: {c: v["n"] for c, v in error_split(self.results, mode).items()} for mode in RAG_MODES
        }
        out["weights_share"] = {mode: weights_shares(self.results, mode) for mode in RAG_MODES}
        return out

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
        """The summary the CLI prints: metrics per mode, then the verdict counts."""
        s = self.summary()
        st = self.settings
        head = (
            f"{st.get('file', 'questions')} · {s['n']} questions · index {st.get('index', '?')} · K={self.k}"
            f" · generator {st.get('generator', '?')}"
        )
        if st.get("skipped"):
            head += f" · {st['skipped']} malformed lines skipped"
        lines = [head, "", f"{'mode':<14}{'EM':>14}{'contained':>16}{f'recall@{self.k}':>12}"]
        for mode, m in s["modes"].items():
            em = f"{100 * m['em']:.1f}% ({round(m['em'] * m['n'])}/{m['n']})"
            cont = f"{100 * m['contained']:.1f}%"
            rec = "—" if m["recall"] is None else f"{100 * m['recall']:.1f}%"
            lines.append(f"{mode:<14}{em:>14}{cont:>16}{rec:>12}")
        r = s["retrieval"]
        shown = [
            f"{name} {_pct(v) if name.startswith(('hit', 'recall')) else _decimal(v)}"
            for name, v in r.items()
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
            + "".join(f"{_pct(s['weights_share'][m]['right']):>{w}}" for m, w in zip(RAG_MODES, (10, 14)))
        )
        lines.append(
            f"{'  tokens from the weights, wrong answers':<46}"
            + "".join(f"{_pct(s['weights_share'][m]['wrong']):>{w}}" for m, w in zip(RAG_MODES, (10, 14)))
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
        return "\n".join(lines)


def run_eval(
    pipe,
    questions: list[EvalQuestion],
    cfg,
    progress: Callable[[int, int, QuestionResult], None] | None = None,
    diagnose: bool = True,
    settings: dict | None = None,
    trace_dir: Path | None = None,
    resume: Path | bool | None = None,
) -> EvalRun:
    """Evaluate every question; `progress(done, total, result)` after each one. `trace_dir`: also
    store each question's trace there (`NNNN.json.gz`), for counterfactuals over K and the scale.

    `resume`: a checkpoint file (True: the default one for these inputs, see `eval_checkpoint`), rewritten
    after every question and removed at the end; a killed run given the same inputs continues from
    it, and its answers are the ones the uninterrupted run would have given."""
    key = eval_checkpoint.run_key(pipe, questions, cfg, diagnose) if resume else ""
    ckpt = eval_checkpoint.default_path(key) if resume is True else (Path(resume) if resume else None)
    started, results = eval_checkpoint.load(ckpt, key) if ckpt else (None, [])
    started = started or time.time()
    if trace_dir is not None:
        Path(trace_dir).mkdir(parents=True, exist_ok=True)
    for i in range(len(results)):
        if progress:
            progress(i + 1, len(questions), results[i])
    size = pipe.batch_size(cfg)
    for start in range(len(results), len(questions), size):
        batch = range(start, min(start + size, len(questions)))
        paths = [Path(trace_dir) / f"{i:04d}.json.gz" if trace_dir is not None else None for i in batch]
        results += evaluate_batch(pipe, [questions[i] for i in batch], cfg, diagnose, trace_paths=paths)
        if ckpt:
            eval_checkpoint.save(ckpt, key, started, results)
        if progress:
            for i in batch:
                progress(i + 1, len(questions), results[i])
    info = {
        "index": pipe.index_name,
        "k": cfg.k,
        "beams": cfg.beams,
        "length_penalty": cfg.length_penalty,
        "rescore": cfg.rescore,
        "decoder": DECODER_VERSION,
        "scale": pipe.scale_for(cfg),
        "generator": pipe.models.generator.id,
        "started": started,
        "seconds": round(time.time() - started, 1),
        **(settings or {}),
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
