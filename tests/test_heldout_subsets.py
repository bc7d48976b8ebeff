"""Checks for the held-out question subsets drawn from the reserved part of the Wikipedia corpus.

An article is reserved when sha1(title) % 5 == 0; within the reserved part sha1(title) % 20 picks
the subset: 0 for dev and 10 for test (5 and 15 belong to the paraphrase subsets). Every row must be
answerable from its article alone and share neither an article with the other split nor an article
or an answer with the bundled training, tuning and evaluation sets.

The hard files also name, for every question, the other candidates of the same kind that the
answer's passage mentions (`distractors`) and the sentence(s) that state the answer (`evidence`).
A paraphrase subset has no distractors and records `overlap`: the share of its question's content words
that its article summary holds (at most 0.34); it goes in HELDOUT_FILES only.
"""

import hashlib
import json
from pathlib import Path

import pytest

from rag_core.analysis.matching import normalize_answer
from rag_core.corpus import load_wiki

ROOT = Path(__file__).resolve().parents[1]
EVAL = ROOT / "assets" / "eval"
TRAIN = ROOT / "assets" / "train"

# (file, sha1(title) % 20 of its articles)
HARD_FILES = [("dev_hard.jsonl", 0), ("test_hard.jsonl", 10)]
HELDOUT_FILES = HARD_FILES + [("dev_paraphrase.jsonl", 5), ("test_paraphrase.jsonl", 15)]
# dev and test halves that must not share an article
SPLIT_PAIRS = [("dev_hard.jsonl", "test_hard.jsonl"), ("dev_paraphrase.jsonl", "test_paraphrase.jsonl")]

KINDS = {"person", "place", "date", "number", "work", "other"}
BASE_FIELDS = {"question", "answers", "title", "kind", "evidence"}
MIN_ROWS = 60

# Existing question files: held-out articles and answers must be disjoint from them.
USED_FILES = [
    TRAIN / "questions.jsonl",
    TRAIN / "leaders_tune.jsonl",
    EVAL / "dev.jsonl",
    EVAL / "test.jsonl",
]
TRAINING_ANSWERS_FILE = TRAIN / "questions.jsonl"


def _rows(path: Path) -> list[dict]:
    with path.open(encoding="utf-8") as f:
        return [json.loads(line) for line in f if line.strip()]


def _bucket(title: str) -> int:
    return int(hashlib.sha1(title.encode("utf-8")).hexdigest(), 16) % 20


def _has_words(haystack: str, needle: str) -> bool:
    """The normalised needle occurs in the normalised haystack as whole words."""
    n = normalize_answer(needle)
    return bool(n) and f" {n} " in f" {normalize_answer(haystack)} "


@pytest.fixture(scope="module")
def articles() -> dict[str, str]:
    """Title -> summary text, as the passages read it (joined back with spaces)."""
    parts: dict[str, list[str]] = {}
    for p in load_wiki():
        parts.setdefault(p.title, []).append(p.text)
    return {title: " ".join(texts) for title, texts in parts.items()}


@pytest.fixture(scope="module")
def used_titles() -> set[str]:
    """Articles that existing files ask about, or whose title is one of their answers."""
    out: set[str] = set()
    for path in USED_FILES:
        for row in _rows(path):
            out.add(row["title"])
            out.update(row["answers"])
    return out


@pytest.fixture(scope="module")
def training_answers() -> set[str]:
    return {normalize_answer(a) for row in _rows(TRAINING_ANSWERS_FILE) for a in row["answers"]}


def _param(files):
    return pytest.mark.parametrize(
        "name,bucket", files, ids=[name.removesuffix(".jsonl") for name, _ in files]
    )


@_param(HELDOUT_FILES)
def test_rows_are_well_formed(name, bucket):
    rows = _rows(EVAL / name)
    assert len(rows) >= MIN_ROWS, f"{name}: {len(rows)} rows"
    for row in rows:
        assert BASE_FIELDS <= set(row) <= BASE_FIELDS | {"distractors", "overlap"}, row
        q = row["question"]
        assert isinstance(q, str) and q.strip() and q.strip().endswith("?"), row
        assert isinstance(row["answers"], list) and row["answers"], row
        assert all(isinstance(a, str) and a.strip() for a in row["answers"]), row
        assert len({normalize_answer(a) for a in row["answers"]}) == len(row["answers"]), row
        assert isinstance(row["title"], str) and row["title"].strip(), row
        assert row["kind"] in KINDS, row
        assert isinstance(row["evidence"], str) and row["evidence"].strip(), row


@_param(HELDOUT_FILES)
def test_titles_are_reserved_articles_of_the_files_bucket(name, bucket, articles):
    for row in _rows(EVAL / name):
        assert row["title"] in articles, f"no article {row['title']!r}"
        assert _bucket(row["title"]) % 5 == 0, f"{row['title']!r} is not reserved"
        assert _bucket(row["title"]) == bucket, f"{row['title']!r} is in bucket {_bucket(row['title'])}"


@_param(HELDOUT_FILES)
def test_answers_and_evidence_come_from_the_article(name, bucket, articles):
    problems = []
    for row in _rows(EVAL / name):
        text = articles[row["title"]]
        low = text.lower()
        for s in row["answers"] + row.get("distractors", []):
            if s.lower() not in low:
                problems.append((row["question"], f"{s!r} not in the article"))
        if row["evidence"] not in text:
            problems.append((row["question"], "evidence is not a substring of the article"))
        elif row["answers"][0].lower() not in row["evidence"].lower():
            problems.append((row["question"], "evidence does not state the answer"))
    assert not problems, problems


@_param(HARD_FILES)
def test_hard_rows_name_distractors_apart_from_the_answers(name, bucket):
    for row in _rows(EVAL / name):
        for a in row["answers"]:
            assert not _has_words(row["question"], a), f"the question names {a!r}: {row['question']}"
        d = row["distractors"]
        assert isinstance(d, list) and d, row
        assert all(isinstance(x, str) and x.strip() for x in d), row
        for x in d:
            assert x.lower() in row["evidence"].lower(), f"evidence does not name {x!r}: {row['question']}"
            assert not _has_words(row["question"], x), f"the question names {x!r}: {row['question']}"
            for a in row["answers"]:
                # no alias may match a distractor, nor contain it or sit inside it as whole words
                assert not (_has_words(a, x) or _has_words(x, a)), f"{a!r} vs {x!r}: {row['question']}"


@_param(HELDOUT_FILES)
def test_disjoint_from_existing_titles_and_training_answers(name, bucket, used_titles, training_answers):
    for row in _rows(EVAL / name):
        assert row["title"] not in used_titles, f"{row['title']!r} is used by an existing file"
        for a in row["answers"]:
            assert normalize_answer(a) not in training_answers, f"{a!r} is a training answer"


@_param(HELDOUT_FILES)
def test_no_duplicate_questions(name, bucket):
    questions = [normalize_answer(r["question"]) for r in _rows(EVAL / name)]
    assert len(questions) == len(set(questions))


@_param(HARD_FILES)
def test_hard_files_ask_at_most_two_questions_per_article(name, bucket):
    rows = _rows(EVAL / name)
    per_title: dict[str, int] = {}
    for r in rows:
        per_title[r["title"]] = per_title.get(r["title"], 0) + 1
    assert max(per_title.values()) <= 2, {t: n for t, n in per_title.items() if n > 2}


@pytest.mark.parametrize("dev,test", SPLIT_PAIRS, ids=[d.removesuffix(".jsonl") for d, _ in SPLIT_PAIRS])
def test_dev_and_test_share_no_article_or_question(dev, test):
    dev_rows, test_rows = _rows(EVAL / dev), _rows(EVAL / test)
    assert not {r["title"] for r in dev_rows} & {r["title"] for r in test_rows}
    assert not {normalize_answer(r["question"]) for r in dev_rows} & {
        normalize_answer(r["question"]) for r in test_rows
    }
