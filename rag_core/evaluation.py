"""Evaluation: answer matching, the questions file, and running a set under all three modes.

Matching follows SQuAD (Rajpurkar et al. 2016): lowercase, drop punctuation, drop the articles
a/an/the, collapse spaces; exact match (EM) against *any* gold answer.

>>> normalize_answer("The  Hobbit!"), exact_match("the Hobbit", ["Hobbit"])
('hobbit', True)
>>> contains_answer("Jane Austen wrote it", ["Austen"]), contains_answer("Austenite", ["Austen"])
(True, False)

"Contained" counts a prediction as right when a normalised gold answer occurs in it as whole words
("Herman Melville, the novelist" contains "Herman Melville"); answer-recall@K counts a question as
retrieved when one of its K passages (title + text) contains a gold answer the same way.

Modes (the CSV's `mode` column): `closed-book` (the generator with no passage), `rag-token`,
`rag-sequence`. A run keeps one `QuestionResult` per question; `EvalRun.rows()` is the long table,
one row per (question, mode). Runs are saved under `cache_dir()/eval/` as CSV + JSON so the app's
Eval page shows the latest run without recomputing it.
"""
from __future__ import annotations

import json
import math
import os
import re
import string
import tempfile
import time
import unicodedata
from collections import Counter
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Callable, Iterable

import pandas as pd

from .config import cache_dir
from .decoding import DECODER_VERSION

MODES = ("closed-book", "rag-token", "rag-sequence")
RAG_MODES = ("rag-token", "rag-sequence")
CSV_COLUMNS = ["question", "mode", "answer", "em", "contained", "answers", "title", "recall", "answer_rank",
               "p_seq", "p_tok", "verdicts"]
_ARTICLES = re.compile(r"\b(a|an|the)\b")
_ASCII_PUNCT = set(string.punctuation)


# --------------------------------------------------------------------------------------- matching
def normalize_answer(text: str) -> str:
    """SQuAD normalisation. Besides ASCII punctuation (SQuAD's set) every Unicode punctuation mark
    goes too (– ’ « »), so typographic quotes and dashes never decide a match.

    >>> normalize_answer("Secker & Warburg"), normalize_answer("Beuve-Méry"), normalize_answer("An  Apple.")
    ('secker warburg', 'beuveméry', 'apple')
    """
    text = str(text).lower()
    text = "".join(ch for ch in text if ch not in _ASCII_PUNCT and not unicodedata.category(ch).startswith("P"))
    text = _ARTICLES.sub(" ", text)
    return " ".join(text.split())


def exact_match(prediction: str | None, answers: Iterable[str]) -> bool:
    if prediction is None:
        return False
    pred = normalize_answer(prediction)
    return any(pred == normalize_answer(a) for a in answers)


def _contains_norm(haystack: str, needle: str) -> bool:
    return bool(needle) and f" {needle} " in f" {haystack} "


def contains_answer(text: str | None, answers: Iterable[str]) -> bool:
    """Some normalised answer occurs in the normalised text as whole words."""
    if not text:
        return False
    hay = normalize_answer(text)
    return any(_contains_norm(hay, normalize_answer(a)) for a in answers)


def passage_text(passage) -> str:
    """What the generator reads of a passage: its title and its text."""
    return f"{passage.title}. {passage.text}"


# --------------------------------------------------------------------------------- questions file
class EvalDataError(ValueError):
    """A questions file cannot be used; the message says why."""


@dataclass
class EvalQuestion:
    question: str
    answers: list[str]
    title: str = ""  # the source article, when the file names it
    line: int = 0  # 1-based line in the file


def parse_question_line(raw: bytes | str) -> EvalQuestion | None:
    """One JSONL line -> a question, or None when the line is malformed."""
    try:
        text = raw.decode("utf-8") if isinstance(raw, bytes) else raw
        row = json.loads(text)
    except (UnicodeDecodeError, ValueError):
        return None
    if not isinstance(row, dict):
        return None
    q, answers = row.get("question"), row.get("answers")
    if isinstance(answers, str):
        answers = [answers]
    if not isinstance(q, str) or not q.strip() or not isinstance(answers, list):
        return None
    answers = [a.strip() for a in answers if isinstance(a, str) and a.strip()]
    if not answers or not any(normalize_answer(a) for a in answers):
        return None
    title = row.get("title") if isinstance(row.get("title"), str) else ""
    return EvalQuestion(" ".join(q.split()), answers, title)


def read_questions(path: str | Path) -> tuple[list[EvalQuestion], int]:
    """Questions of a JSONL file and the number of malformed lines skipped.

    Raises EvalDataError for a missing, unreadable or empty file, or one with no usable line.
    """
    p = Path(path)
    if not p.exists():
        raise EvalDataError(f"questions file not found: {path}")
    if p.is_dir():
        raise EvalDataError(f"{path} is a folder, not a questions JSONL file")
    try:
        data = p.read_bytes()
    except OSError as e:
        raise EvalDataError(f"cannot read {path}: {e.strerror or e}") from None
    lines = [(n, line) for n, line in enumerate(data.splitlines(), 1) if line.strip()]
    if not lines:
        raise EvalDataError(f"{path} is empty: expected one JSON object a line with 'question' and 'answers'")
    out, skipped = [], 0
    for n, line in lines:
        q = parse_question_line(line)
        if q is None:
            skipped += 1
            continue
        q.line = n
        out.append(q)
    if not out:
        raise EvalDataError(f"no usable question in {path}: all {skipped} lines are malformed "
                            "(each needs a JSON object with 'question' and a list of 'answers')")
    return out, skipped


# ------------------------------------------------------------------------------------ one question
@dataclass
class ModeResult:
    answer: str
    em: bool
    contained: bool
    p_seq: float | None = None  # the answer's RAG-Sequence probability (RAG modes)
    p_tok: float | None = None  # its RAG-Token probability
    verdicts: list[str] = field(default_factory=list)  # diagnosis codes when the answer is wrong


@dataclass
class QuestionResult:
    question: str
    answers: list[str]
    title: str
    modes: dict[str, ModeResult]
    recall: bool  # a retrieved passage contains an answer
    answer_rank: int | None  # rank of the best passage containing an answer (searched deeper on a miss)
    seconds: float = 0.0

    def to_dict(self) -> dict:
        return asdict(self)

    @classmethod
    def from_dict(cls, d: dict) -> "QuestionResult":
        modes = {m: ModeResult(**v) for m, v in d["modes"].items()}
        return cls(d["question"], d["answers"], d.get("title", ""), modes, d["recall"], d.get("answer_rank"),
                   d.get("seconds", 0.0))


def _p(logp: float) -> float:
    return math.exp(logp) if logp > float("-inf") else 0.0


def evaluate_question(pipe, q: EvalQuestion, cfg, diagnose: bool = True, depth: int = 100,
                      trace_path: Path | None = None) -> QuestionResult:
    """Closed-book, RAG-Token and RAG-Sequence on one question; the K prompts are prepared once and
    reused for decoding both ways and for the teacher-forced pass of the gold answers."""
    from . import diagnosis

    t0 = time.perf_counter()
    run = diagnosis.run_with_state(pipe, q.question, cfg)
    trace = run.trace
    trace.closed_book = pipe.closed_book(trace.query, cfg)
    ranks = [h.rank for h in trace.hits if contains_answer(passage_text(h.passage), q.answers)]
    recall = bool(ranks)
    modes = {"closed-book": ModeResult(trace.closed_book, exact_match(trace.closed_book, q.answers),
                                       contains_answer(trace.closed_book, q.answers))}
    wrong = []
    for mode in RAG_MODES:
        c = trace.answer(mode)
        if c is None:
            continue
        modes[mode] = ModeResult(c.answer, exact_match(c.answer, q.answers), contains_answer(c.answer, q.answers),
                                 _p(c.log_p_seq(trace.log_prior)), _p(c.log_p_tok(trace.log_prior)))
        if not modes[mode].em:
            wrong.append(mode)
    deep = None
    if diagnose and wrong:
        forced = diagnosis.score_texts(pipe.models.generator, trace, q.answers, run.state0)
        deep = None if recall else diagnosis.deep_search(pipe, trace, q.answers, depth)
        for mode in wrong:
            d = diagnosis.diagnose(trace, q.answers, mode, forced=forced, deep=deep, closed_book=trace.closed_book)
            modes[mode].verdicts = d.fired
    rank = ranks[0] if ranks else (deep.rank if deep is not None and deep.rank else None)
    if trace_path is not None:  # for offline counterfactuals (K, scale) on the stored conditionals
        import gzip

        from .trace import trace_to_dict

        data = {"question": asdict(q), "trace": trace_to_dict(trace)}
        _atomic_write(trace_path, lambda p: Path(p).write_bytes(gzip.compress(json.dumps(data).encode("utf-8"))))
    return QuestionResult(trace.query, q.answers, q.title, modes, recall, rank, time.perf_counter() - t0)


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
            out["modes"][mode] = {"n": len(got), "em": sum(m.em for m in got) / len(got),
                                  "contained": sum(m.contained for m in got) / len(got),
                                  "recall": None if mode == "closed-book" else recall}
        from .diagnosis import VERDICTS

        for mode in RAG_MODES:
            wrong = [r.modes[mode] for r in self.results if mode in r.modes and not r.modes[mode].em]
            counts = Counter(v for m in wrong for v in m.verdicts)
            out["verdicts"][mode] = {"wrong": len(wrong), **{code: counts.get(code, 0) for code in VERDICTS},
                                     "no verdict": sum(1 for m in wrong if not m.verdicts)}
        return out

    def rows(self) -> list[dict]:
        rows = []
        for r in self.results:
            for mode in MODES:
                m = r.modes.get(mode)
                if m is None:
                    continue
                rows.append({"question": r.question, "mode": mode, "answer": m.answer, "em": int(m.em),
                             "contained": int(m.contained), "answers": " | ".join(r.answers), "title": r.title,
                             "recall": "" if mode == "closed-book" else int(r.recall),
                             "answer_rank": "" if r.answer_rank is None else r.answer_rank,
                             "p_seq": "" if m.p_seq is None else round(m.p_seq, 6),
                             "p_tok": "" if m.p_tok is None else round(m.p_tok, 6),
                             "verdicts": ";".join(m.verdicts)})
        return rows

    def frame(self) -> pd.DataFrame:
        return pd.DataFrame(self.rows(), columns=CSV_COLUMNS)

    def to_csv(self, path) -> None:
        from .trace import neutralise

        frame = self.frame()
        for col in ("question", "answer", "answers", "title"):
            frame[col] = frame[col].map(neutralise)
        frame.to_csv(path, index=False)

    def to_json(self) -> dict:
        return {"settings": self.settings, "summary": self.summary(), "results": [r.to_dict() for r in self.results]}

    @classmethod
    def from_json(cls, data: dict) -> "EvalRun":
        return cls([QuestionResult.from_dict(r) for r in data["results"]], data.get("settings", {}))

    def table_text(self) -> str:
        """The summary the CLI prints: metrics per mode, then the verdict counts."""
        s = self.summary()
        st = self.settings
        head = (f"{st.get('file', 'questions')} · {s['n']} questions · index {st.get('index', '?')} · K={self.k}"
                f" · generator {st.get('generator', '?')}")
        if st.get("skipped"):
            head += f" · {st['skipped']} malformed lines skipped"
        lines = [head, "", f"{'mode':<14}{'EM':>14}{'contained':>16}{f'recall@{self.k}':>12}"]
        for mode, m in s["modes"].items():
            em = f"{100 * m['em']:.1f}% ({round(m['em'] * m['n'])}/{m['n']})"
            cont = f"{100 * m['contained']:.1f}%"
            rec = "—" if m["recall"] is None else f"{100 * m['recall']:.1f}%"
            lines.append(f"{mode:<14}{em:>14}{cont:>16}{rec:>12}")
        from .diagnosis import VERDICTS

        lines += ["", f"{'why RAG answers were wrong (verdicts overlap)':<46}{'rag-token':>10}{'rag-sequence':>14}"]
        v = s["verdicts"]
        for code in ["wrong", *VERDICTS, "no verdict"]:
            label = {"wrong": "wrong answers", "no verdict": "no verdict fired"}.get(code, f"  {VERDICTS.get(code, code)}")
            lines.append(f"{label:<46}{v['rag-token'][code]:>10}{v['rag-sequence'][code]:>14}")
        return "\n".join(lines)


def run_eval(pipe, questions: list[EvalQuestion], cfg, progress: Callable[[int, int, QuestionResult], None] | None = None,
             diagnose: bool = True, settings: dict | None = None, trace_dir: Path | None = None) -> EvalRun:
    """Evaluate every question; `progress(done, total, result)` after each one. `trace_dir`: also
    store each question's trace there (`NNNN.json.gz`), for counterfactuals over K and the scale."""
    started = time.time()
    results = []
    if trace_dir is not None:
        Path(trace_dir).mkdir(parents=True, exist_ok=True)
    for i, q in enumerate(questions):
        path = Path(trace_dir) / f"{i:04d}.json.gz" if trace_dir is not None else None
        results.append(evaluate_question(pipe, q, cfg, diagnose, trace_path=path))
        if progress:
            progress(i + 1, len(questions), results[-1])
    info = {"index": pipe.index_name, "k": cfg.k, "beams": cfg.beams, "length_penalty": cfg.length_penalty,
            "rescore": cfg.rescore, "decoder": DECODER_VERSION,
            "scale": pipe.scale_for(cfg), "generator": pipe.models.generator.id, "started": started,
            "seconds": round(time.time() - started, 1), **(settings or {})}
    return EvalRun(results, info)


# --------------------------------------------------------------------------------- saved runs
def eval_folder() -> Path:
    path = cache_dir() / "eval"
    path.mkdir(parents=True, exist_ok=True)
    return path


def _atomic_write(path: Path, write: Callable[[str], None]) -> None:
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.")
    os.close(fd)
    try:
        write(tmp)
        os.replace(tmp, path)
    finally:
        if os.path.exists(tmp):
            os.unlink(tmp)


def save_run(run: EvalRun, name: str | None = None, folder: Path | None = None) -> Path:
    """Write `<name>.json` + `<name>.csv` (default name: a timestamp) and the `latest` pair."""
    folder = folder or eval_folder()
    name = name or time.strftime("run-%Y%m%d-%H%M%S")
    data = json.dumps(run.to_json(), ensure_ascii=False, indent=1)
    for stem in (name, "latest"):
        _atomic_write(folder / f"{stem}.json", lambda p: Path(p).write_text(data, encoding="utf-8"))
        _atomic_write(folder / f"{stem}.csv", run.to_csv)
    return folder / f"{name}.json"


def saved_runs(folder: Path | None = None) -> list[Path]:
    """Saved run files, newest first (`latest.json` excluded: it is a copy of one of them)."""
    folder = folder or eval_folder()
    return sorted((p for p in folder.glob("*.json") if p.stem != "latest"), key=lambda p: p.stat().st_mtime, reverse=True)


def load_run(path: Path | None = None) -> EvalRun | None:
    """A saved run (default: the latest), or None when there is none or it cannot be read."""
    path = path or (eval_folder() / "latest.json")
    try:
        return EvalRun.from_json(json.loads(Path(path).read_text(encoding="utf-8")))
    except (OSError, ValueError, KeyError, TypeError):
        return None
