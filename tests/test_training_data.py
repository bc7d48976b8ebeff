"""The shipped training data (assets/train/): well formed, each answer checked against the passage it
was written from, and disjoint from everything we measure on at three levels: no training question
on a dev/test article; no training answer, nor a training article's title, that is a dev/test
answer; no dev/test answer in any prompt's worked examples. The index swap's tuning half may train;
its held-out half never appears (no position, no holder). No training question comes from the
reserved partition (articles whose title's SHA-1 is 0 mod 5), kept for held-out questions only."""

import hashlib
import json
import re
from collections import Counter
from pathlib import Path

import pytest

from rag_core import corpus
from rag_core.analysis.evaluation.questions import read_questions
from rag_core.analysis.matching import contains_answer, normalize_answer
from rag_core.corpus import load_wiki
from rag_core.generators import causal
from rag_core.index_swap.results import position_split
from rag_core.index_swap.tuning_questions import TUNING_FILE, tuning_questions
from rag_core.retrieval.snapshots import fold, load_leaders

ASSETS = Path(__file__).resolve().parents[1] / "assets"
TRAIN = ASSETS / "train" / "questions.jsonl"
KINDS = {"person", "place", "date", "work", "number", "science", "definition", "other"}


def rows(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]


@pytest.fixture(scope="module")
def train_rows():
    return rows(TRAIN)


HELD_OUT = ("dev", "test", "heldout_in_genre")  # the files whose articles and answers training never sees


def reserved(title: str) -> bool:
    """The reserved evaluation partition: the title's SHA-1 (of its UTF-8 bytes, one hexadecimal
    integer) is 0 modulo 5.

    >>> reserved("Canberra"), reserved("Alexander Fleming")
    (True, False)
    """
    return int(hashlib.sha1(title.encode("utf-8")).hexdigest(), 16) % 5 == 0


@pytest.fixture(scope="module")
def eval_rows():
    return [r for name in HELD_OUT for r in rows(ASSETS / "eval" / f"{name}.jsonl")]


def naming(names: set[str]):
    """A test: does a text name any of `names` as whole words (ignoring case and accents)?
    -> the name or None."""
    patterns = [
        (n, re.compile(r"(?<![\w-])" + re.escape(fold(n).lower()) + r"(?![\w-])")) for n in names if n.strip()
    ]

    def named(text: str) -> str | None:
        folded = fold(text).lower()
        return next((n for n, pat in patterns if pat.search(folded)), None)

    return named


def article_leaks(train: list[dict], held: list[dict]) -> list:
    """Level 1: training questions on a held-out article, or naming one."""
    titles = {r["title"] for r in held}
    named = naming(titles)
    return [(r["question"], r["title"]) for r in train if r["title"] in titles] + [
        (r["question"], named(r["question"])) for r in train if named(r["question"])
    ]


def answer_leaks(train: list[dict], held: list[dict]) -> list:
    """Level 2: a training answer, or a training article's title, that is a held-out answer (any of
    its aliases) or title; or a paraphrased one: a training answer that contains a held-out answer
    or title of two words or more ("Saint Thomas Becket" holds "Saint Thomas"), or one of two words
    or more that a held-out title contains (an alias of it: "Casimir III" of "Casimir III the Great")."""
    held_answers = {normalize_answer(a) for r in held for a in r["answers"]} | {
        normalize_answer(r["title"]) for r in held
    }
    held_titles = {normalize_answer(r["title"]) for r in held}
    within = lambda small, big: f" {small} " in f" {big} "  # noqa: E731 (whole words)
    long_held = [h for h in held_answers if len(h.split()) >= 2]
    exact = [
        (r["question"], a) for r in train for a in r["answers"] if normalize_answer(a) in held_answers
    ] + [(r["question"], r["title"]) for r in train if normalize_answer(r["title"]) in held_answers]
    answers = [(r["question"], normalize_answer(a)) for r in train for a in r["answers"]]
    contains = [(q, a, h) for q, a in answers for h in long_held if h != a and within(h, a)]
    alias = [
        (q, a, t) for q, a in answers if len(a.split()) >= 2 for t in held_titles if t != a and within(a, t)
    ]
    return exact + contains + alias


def worked_example_leaks(held: list[dict]) -> list:
    """Level 3: a held-out answer named anywhere in a prompt's worked examples or instructions."""
    answers = {a for r in held for a in r["answers"] if len(normalize_answer(a)) > 2}
    named = naming({a for a in answers if not a.isupper()})
    acronyms = [a for a in answers if a.isupper()]  # "NOW" is an acronym, "now" a word: compared as written
    texts = [causal.rag_prefix(style) for style in causal.PROMPT_STYLES]
    texts += [causal.closed_book_prefix(style) for style in causal.PROMPT_STYLES]
    hits = [(t[:40], named(t)) for t in texts if named(t)]
    return hits + [
        (t[:40], a) for t in texts for a in acronyms if re.search(rf"(?<![\w-]){re.escape(a)}(?![\w-])", t)
    ]


def test_the_file_is_well_formed_and_reads_whole(train_rows):
    assert len(train_rows) >= 2000
    for row in train_rows:
        assert {"question", "answers", "title", "passage_id", "kind"} <= set(row), row
        assert set(row) <= {"question", "answers", "title", "passage_id", "kind", "distractors"}, row
        assert (
            row["question"].strip().endswith("?")
            and row["answers"]
            and all(a.strip() for a in row["answers"])
        ), row
        assert row["kind"] in KINDS, row
    questions, skipped = read_questions(TRAIN)
    assert len(questions) == len(train_rows) and skipped == 0
    assert len({r["question"].lower() for r in train_rows}) == len(train_rows)


def test_the_kinds_users_ask_are_all_there(train_rows):
    kinds = Counter(r["kind"] for r in train_rows)
    for kind in ("person", "place", "date", "work", "number", "science"):
        assert kinds[kind] >= 0.05 * len(train_rows), kinds


def test_every_first_answer_is_in_the_passage_it_was_written_from(train_rows):
    by_id = {p.id: p for p in load_wiki()}
    wrong = [
        (r["question"], r["passage_id"])
        for r in train_rows
        if r["passage_id"] not in by_id
        or by_id[r["passage_id"]].title != r["title"]
        or not contains_answer(by_id[r["passage_id"]].text, r["answers"][:1])
    ]
    assert not wrong, wrong[:10]


def test_no_training_question_comes_from_the_reserved_partition(train_rows):
    tuning = rows(TUNING_FILE)  # the index swap's tuning half trains too: its titles are offices
    assert not [(r["question"], r["title"]) for r in train_rows + tuning if reserved(r["title"])]
    titles = {p.title for p in load_wiki()}  # nor is a training answer a reserved article
    assert not [
        (r["question"], a) for r in train_rows + tuning for a in r["answers"] if a in titles and reserved(a)
    ]
    held = rows(ASSETS / "eval" / "heldout_in_genre.jsonl")  # the training questions moved out of it
    assert len(held) >= 300 and all(reserved(r["title"]) for r in held)
    assert reserved("Canberra") is True and reserved("Alexander Fleming") is False  # the rule itself
    titles = sorted({r["title"] for r in train_rows + held})  # the engine's rule (the index swap's split)
    assert [corpus.reserved(t) for t in titles] == [reserved(t) for t in titles]


def test_distractors_are_named_beside_the_answer(train_rows):
    by_id = {p.id: p for p in load_wiki()}
    hard = [r for r in train_rows if "distractors" in r]
    assert len(hard) >= 150
    for r in hard:
        text = f" {normalize_answer(by_id[r['passage_id']].text)} "
        assert r["distractors"] and all(f" {normalize_answer(d)} " in text for d in r["distractors"]), r
        assert not {normalize_answer(d) for d in r["distractors"]} & {
            normalize_answer(a) for a in r["answers"]
        }


def test_disjoint_from_the_eval_splits_at_three_levels(train_rows, eval_rows):
    assert not {r["question"].lower() for r in train_rows} & {r["question"].lower() for r in eval_rows}
    assert not article_leaks(train_rows, eval_rows)
    assert not answer_leaks(train_rows, eval_rows)
    assert not worked_example_leaks(eval_rows)


def test_each_level_catches_a_leak_put_back(eval_rows):
    """The three checks are not vacuous: each finds the leaks an earlier training file had."""
    godfather = next(r for r in eval_rows if "Godfather" in r["question"])
    same_article = {
        "question": "In what year was the film released?",
        "answers": ["1972"],
        "title": godfather["title"],
    }
    same_answer = {
        "question": "Who directed Apocalypse Now?",
        "answers": [godfather["answers"][0]],
        "title": "Apocalypse Now",
    }
    assert article_leaks([same_article], eval_rows)
    assert answer_leaks([same_answer], eval_rows)
    longer = {**same_answer, "answers": [f"the great {godfather['answers'][0]} Jr."]}
    assert answer_leaks([longer], eval_rows)  # a paraphrased leak: it holds "Francis Ford Coppola"
    alias = {"question": "Who won?", "answers": ["Casimir III"], "title": "Louis I of Hungary"}
    assert answer_leaks([alias], [{"question": "?", "answers": ["x"], "title": "Casimir III the Great"}])
    leaky_shot = (
        "Apocalypse Now",
        "A 1979 film directed by Francis Ford Coppola.",
        "Who directed Apocalypse Now?",
        "x",
    )
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(causal, "FEW_SHOT", [*causal.FEW_SHOT, leaky_shot])
        assert worked_example_leaks(eval_rows)


def test_disjoint_from_the_world_leader_positions(train_rows):
    leaders = load_leaders(ASSETS / "leaders.csv")
    people = {n for col in ("holder_2016", "holder_2018") for n in leaders[col]}
    offices = set(leaders["position"]) | set(leaders["question"])
    named = naming(people | offices)
    hits = [
        (r["question"], named(text))
        for r in train_rows
        for text in [r["question"], r["title"], *r["answers"]]
        if named(text)
    ]
    assert not hits, hits


def test_the_index_swap_trains_on_its_tuning_half_only():
    shipped = rows(TUNING_FILE)
    assert shipped == tuning_questions()  # computed from leaders.csv, not written by hand
    leaders = load_leaders(ASSETS / "leaders.csv")
    held_out = leaders[[position_split(p) == "test" for p in leaders["position"]]]
    assert len(held_out) >= 70
    assert not {r["title"] for r in shipped} & set(held_out["position"])
    assert not {r["question"] for r in shipped} & set(held_out["question"])
    assert {r["index"] for r in shipped} == {"2016", "2018"}
    held_holders = set(held_out["holder_2016"]) | set(held_out["holder_2018"])
    assert (
        not {a for r in shipped for a in r["answers"]} & held_holders
    )  # no held-out answer, even via another office
    for r in shipped:
        row = leaders[leaders["position"] == r["title"]].iloc[0]
        assert r["answers"] == [row[f"holder_{r['index']}"]]
