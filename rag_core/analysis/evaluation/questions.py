"""The questions file of an eval run: JSONL, one {"question", "answers", "title"?} object a line.

>>> parse_question_line('{"question": "Who wrote Emma?", "answers": "Jane Austen"}').answers
['Jane Austen']
>>> parse_question_line("not json") is None
True
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

from rag_core.analysis.matching import normalize_answer


class EvalDataError(ValueError):
    """A questions file cannot be used; the message says why."""


@dataclass
class EvalQuestion:
    question: str
    answers: list[str]
    title: str = ""  # the source article, when the file names it
    line: int = 0  # 1-based line in the file
    index: str = ""  # the index this question is asked on, when the file names one (training on 2016/2018)
    kind: str = ""  # what the question asks for (person, place, date…), when the file says
    # other candidates of the kind asked that its passage names (a hard question), when the file says
    distractors: tuple[str, ...] = ()


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
    index = row.get("index") if isinstance(row.get("index"), str) else ""
    kind = row.get("kind") if isinstance(row.get("kind"), str) else ""
    others = row.get("distractors") if isinstance(row.get("distractors"), list) else []
    distractors = tuple(d.strip() for d in others if isinstance(d, str) and d.strip())
    return EvalQuestion(" ".join(q.split()), answers, title, index=index, kind=kind, distractors=distractors)


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
        raise EvalDataError(
            f"no usable question in {path}: all {skipped} lines are malformed "
            "(each needs a JSON object with 'question' and a list of 'answers')"
        )
    return out, skipped
