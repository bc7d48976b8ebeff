"""The shipped training questions (assets/train/questions.jsonl): well formed, answerable from the
default corpus, and disjoint from everything we measure on: the eval dev and test splits (not even
the same articles, nor an answer that names one of their articles) and the world-leader positions
of the index-swap experiment (no position, no holder)."""
import json
import re
from pathlib import Path

import pytest

from rag_core.analysis.matching import contains_answer, normalize_answer, passage_text
from rag_core.analysis.questions import read_questions
from rag_core.corpus import load_wiki
from rag_core.snapshots import fold, load_leaders

ASSETS = Path(__file__).resolve().parents[1] / "assets"
TRAIN = ASSETS / "train" / "questions.jsonl"


def rows(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]


@pytest.fixture(scope="module")
def train_rows():
    return rows(TRAIN)


@pytest.fixture(scope="module")
def eval_rows():
    return rows(ASSETS / "eval" / "dev.jsonl") + rows(ASSETS / "eval" / "test.jsonl")


def naming(names: set[str]):
    """A test: does a text name any of `names` as whole words (ignoring case and accents)? -> the name or None."""
    patterns = [(n, re.compile(r"(?<![\w-])" + re.escape(fold(n).lower()) + r"(?![\w-])")) for n in names if n.strip()]

    def named(text: str) -> str | None:
        folded = fold(text).lower()
        return next((n for n, pat in patterns if pat.search(folded)), None)

    return named


def test_the_file_is_well_formed_and_reads_whole(train_rows):
    assert len(train_rows) >= 100
    for row in train_rows:
        assert set(row) == {"question", "answers", "title"}, row
        assert row["question"].strip().endswith("?") and row["answers"] and all(a.strip() for a in row["answers"]), row
    questions, skipped = read_questions(TRAIN)
    assert len(questions) == len(train_rows) and skipped == 0
    assert len({r["question"].lower() for r in train_rows}) == len(train_rows)


def test_every_first_answer_is_in_a_passage_of_its_article(train_rows):
    by_title: dict[str, list] = {}
    for p in load_wiki():
        by_title.setdefault(p.title, []).append(p)
    missing = [(r["question"], r["answers"][0]) for r in train_rows
               if not any(contains_answer(passage_text(p), r["answers"][:1]) for p in by_title.get(r["title"], []))]
    assert not missing, missing


def test_disjoint_from_the_eval_splits(train_rows, eval_rows):
    eval_titles = {r["title"] for r in eval_rows}
    assert not {r["question"].lower() for r in train_rows} & {r["question"].lower() for r in eval_rows}
    assert not {r["title"] for r in train_rows} & eval_titles  # not even the same articles
    # nor the other way round: a training answer or question that names an eval article
    # ("Who wrote Romeo and Juliet?" -> "William Shakespeare") would teach an eval fact
    named, titles = naming(eval_titles), {normalize_answer(t) for t in eval_titles}
    leaks = [(r["question"], named(r["question"])) for r in train_rows if named(r["question"])]
    leaks += [(r["question"], a) for r in train_rows for a in r["answers"] if normalize_answer(a) in titles]
    assert not leaks, leaks


def test_disjoint_from_the_world_leader_positions(train_rows):
    leaders = load_leaders(ASSETS / "leaders.csv")
    people = {n for col in ("holder_2016", "holder_2018") for n in leaders[col]}
    offices = set(leaders["position"]) | set(leaders["question"])
    named = naming(people | offices)
    hits = [(r["question"], named(text)) for r in train_rows for text in [r["question"], r["title"], *r["answers"]]
            if named(text)]
    assert not hits, hits
