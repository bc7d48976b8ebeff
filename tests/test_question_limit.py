"""One question limit, and every cut said with what it kept (issue 36, item 3); a retrieval miss that
names how deep it searched (item 9). No model, except the command line's test, which runs one."""

import json
import math

import torch

from app.ui import question_box
from rag_core import marginals
from rag_core.analysis.diagnosis import deep_search, verdict_rules
from rag_core.config import MAX_QUESTION_CHARS
from rag_core.corpus import Passage
from rag_core.pipeline import QUOTED, clean_question
from rag_core.trace import Hit, Trace

from conftest import run_cli

# Words of known lengths, so the cut's position is known without the code under test: 50 words of
# 20 characters each (19 letters and a space) make 1,000 characters; a question follows.
WORDS = [f"{chr(97 + i % 26) * 18}{i % 10} " for i in range(120)]
LONG = "".join(WORDS) + "Who wrote Moby-Dick?"


def test_a_cut_question_says_what_it_kept_and_what_it_left_out():
    used, notes = clean_question(LONG)
    n = len(LONG)  # single spaces, no control characters: cleaning changes nothing else
    assert n == 120 * 20 + 20
    assert used == "".join(WORDS[71:]) + "Who wrote Moby-Dick?"  # the last 49 words and the question
    assert len(used) == MAX_QUESTION_CHARS
    kept_head = used[:QUOTED]  # the first 40 characters used
    left_tail = "".join(WORDS[:71]).rstrip()[-QUOTED:]  # the last 40 characters left out
    assert notes == [
        f"the question was {n:,} characters long; only the last {MAX_QUESTION_CHARS:,} were "
        f"used, from “{kept_head}…”; the first {n - MAX_QUESTION_CHARS:,}, ending "
        f"“…{left_tail}”, were left out"
    ]
    one_more = LONG + "x"  # the cut now falls inside a word: that word is left out whole
    assert clean_question(one_more)[0] == "".join(WORDS[72:]) + "Who wrote Moby-Dick?x"
    assert clean_question("Who wrote Moby-Dick?")[1] == []


def test_the_pages_show_the_engines_notice_as_a_sentence_and_nothing_for_a_short_question():
    assert question_box.notes(LONG) == ["T" + clean_question(LONG)[1][0][1:] + "."]
    assert question_box.notes("".join(WORDS[:50])) == []  # exactly the limit: nothing cut
    assert question_box.notes("   ") == []  # an empty question has its own message


class FakeIndex:
    """A retriever over `n` passages that, like FAISS, returns no more passages than it holds."""

    def __init__(self, texts):
        self.hits = [
            Hit(i + 1, Passage(f"d{i}", f"D{i}", t, "toy"), 1.0 - 0.01 * i) for i, t in enumerate(texts)
        ]

    def retrieve(self, question, k):
        return self.hits[:k]


def trace_of(k: int) -> Trace:
    hits = [Hit(i + 1, Passage(f"d{i}", f"D{i}", "nothing here", "toy"), 1.0 - 0.01 * i) for i in range(k)]
    log_pz = marginals.log_prior(torch.tensor([h.score for h in hits]), 1.0)  # (K,)
    return Trace("q?", "toy", hits, log_pz, 1.0, [])


def test_a_retrieval_miss_names_the_passages_it_really_searched():
    trace = trace_of(5)
    small = deep_search.deep_search(FakeIndex(["nothing"] * 8), trace, ["Lyon"])  # an 8-passage index
    assert (small.depth, small.whole_index) == (8, True)
    v = verdict_rules.check_retrieval_miss(trace, ["Lyon"], small)
    assert v.summary.endswith("nor any of the 8 passages of the whole index"), v.summary
    assert v.evidence["depth"] == 8
    big = deep_search.deep_search(FakeIndex(["nothing"] * 300), trace, ["Lyon"])  # deeper than the search
    assert (big.depth, big.whole_index) == (100, False)
    assert verdict_rules.check_retrieval_miss(trace, ["Lyon"], big).summary.endswith("nor any of the top 100")
    exact = deep_search.deep_search(FakeIndex(["nothing"] * 100), trace, ["Lyon"])  # as deep as the index
    assert (exact.depth, exact.whole_index) == (100, False)
    assert not math.isnan(exact.top_score)


def test_the_command_line_says_on_stderr_what_it_cut(tiny_generator):
    flags = ("-k", "1", "--decode", "token", "--max-new-tokens", "2", "--generator", str(tiny_generator))
    out = run_cli("ask", LONG, *flags, "--json")
    assert out.returncode == 0, out.stderr[-1500:]
    notes = [line for line in out.stderr.splitlines() if line.startswith("note: ")]
    assert notes == [f"note: {clean_question(LONG)[1][0]}"], out.stderr[-1500:]
    assert json.loads(out.stdout)["settings"]["notices"] == clean_question(LONG)[1]
