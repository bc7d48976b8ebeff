"""How often a wrong answer names one of the other candidates its passage names (the distractors a
hard question records): `eval` prints it for a question file that records them. Checked against a
plain count over the dev hard subset's own distractors, with answers made to be right, a distractor
in other case and punctuation, or neither."""

import json
import random

from rag_core.analysis.evaluation.eval_summary import distractor_line, distractor_picks
from rag_core.analysis.evaluation.question_result import ModeResult, QuestionResult
from rag_core.analysis.evaluation.questions import parse_question_line
from rag_core.analysis.matching import normalize_answer
from rag_core.config import ASSETS

DEV_HARD = ASSETS / "eval" / "dev_hard.jsonl"


def test_a_question_line_keeps_its_distractors():
    line = {"question": "q?", "answers": ["Paris"], "distractors": [" b ", "", 3]}
    q = parse_question_line(json.dumps(line))
    assert q.distractors == ("b",)
    assert parse_question_line(json.dumps({"question": "q?", "answers": ["Paris"]})).distractors == ()


def test_distractor_picks_equal_a_plain_count():
    rows = [json.loads(line) for line in DEV_HARD.read_text().splitlines()]
    rng = random.Random(0)
    results, expected = [], {m: {"wrong": 0, "distractor": 0} for m in ("rag-token", "rag-sequence")}
    for row in rows:
        modes = {}
        for mode in expected:
            pick = rng.choice(["right", "distractor", "other"])
            answer = {
                "right": row["answers"][0],
                "distractor": "The " + rng.choice(row["distractors"]).upper() + ".",
                "other": "someone else",
            }[pick]
            right = normalize_answer(answer) in {normalize_answer(a) for a in row["answers"]}
            modes[mode] = ModeResult(answer, right, right)
            if not right:
                expected[mode]["wrong"] += 1
                named = {normalize_answer(d) for d in row["distractors"]}
                expected[mode]["distractor"] += normalize_answer(answer) in named
        results.append(QuestionResult(row["question"], row["answers"], "", modes, True, 1))
    distractors = {row["question"]: tuple(row["distractors"]) for row in rows}
    picks = distractor_picks(results, distractors)
    assert picks == expected
    assert 0 < picks["rag-token"]["distractor"] < picks["rag-token"]["wrong"]  # both kinds of wrong occur
    assert distractor_picks(results, {}) == {}
    line = distractor_line(picks)
    assert f"{expected['rag-token']['distractor']} of {expected['rag-token']['wrong']}" in line
