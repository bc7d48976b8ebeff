"""The Ask page's example questions, each run once per stack and read by every test here (one
module, so one worker computes them).

- `--decode token`, `--decode sequence` and `--decode both` agree: greedy decoding is one rule for
  every path, so the RAG-Token answer of `--decode token` equals that of `--decode both`, and
  likewise for RAG-Sequence: the same token ids and the same stored per-passage log-probabilities.
  `--decode both` is the pipeline's own run of the question; the single decodings read its prepared
  prompt state (the prompt pass is deterministic; sharing it keeps the test short). The questions'
  real passages and prompts, read by the tiny Llama: the rule holds for any model.
- The diagnosis panel's verdicts on the real default stack agree with facts each test checks itself.
"""

import json

import pytest
import torch

from rag_core.analysis import scoring
from rag_core.analysis.diagnosis import deep_search, verdicts
from rag_core.analysis.diagnosis.verdict_evidence import evidence_problems
from rag_core.config import ASSETS, AnswerSettings
from rag_core.decoding.answering import analyse

EXAMPLES = json.loads((ASSETS / "examples" / "questions.json").read_text(encoding="utf-8"))


@pytest.fixture(scope="module")
def example_runs(default_pipeline):
    """(example, PreparedRun) pairs: each example question's trace and its prepared prompt state."""
    return [(ex, default_pipeline.run(ex["question"], keep_state=True)) for ex in EXAMPLES]


@pytest.mark.slow  # over 5 s on 2 cores
def test_every_decode_mode_gives_the_same_greedy_answers(tiny_llama_pipeline):
    pipe = tiny_llama_pipeline
    gen = pipe.models.generator
    cfg = AnswerSettings()
    assert cfg.decode == "both"
    for ex in EXAMPLES:
        run = pipe.run(ex["question"], keep_state=True)
        both = run.trace
        with pipe.models.lock:
            runs = {
                mode: analyse(
                    gen,
                    both.question,
                    both.hits,
                    both.log_prior,
                    cfg.with_(decode=mode),
                    "t",
                    both.scale,
                    run.state0,
                )
                for mode in ("token", "sequence")
            }
        for decoding, alone in (("rag-token", "token"), ("rag-sequence", "sequence")):
            a, b = runs[alone].answer(decoding), both.answer(decoding)
            assert a.token_ids == b.token_ids, (ex["question"], decoding, a.answer, b.answer)
            assert a.finished == b.finished
            assert torch.allclose(
                a.token_logp.nan_to_num(9.0), b.token_logp.nan_to_num(9.0), atol=1e-4
            )  # rows batched differently: float32 sums in another order (within 1e-4)
        assert runs["token"].answer("rag-sequence") is None and runs["sequence"].answer("rag-token") is None


@pytest.mark.slow  # over 5 s on 2 cores
def test_verdicts_on_the_shipped_example_questions(default_pipeline, example_runs):
    """The Ask page's example questions on the real default stack, diagnosed as the panel does: a
    right answer fires nothing; a wrong one gets at least one verdict, each with evidence; and the
    verdicts agree with facts the test checks itself (which passages contain the expected answer)."""
    from rag_core.analysis.matching import contains_answer, exact_match, passage_text

    wrong = 0
    for ex, run in example_runs:
        expected = [a.strip() for a in ex["expected"].split("|")]
        trace = run.trace
        forced = scoring.score_texts(default_pipeline.models.generator, trace, expected, run.state0)
        deep = deep_search.deep_search(default_pipeline, trace, expected)
        closed = default_pipeline.closed_book(ex["question"])
        for decoding in ("rag-token", "rag-sequence"):
            d = verdicts.diagnose(trace, expected, decoding, forced=forced, deep=deep, closed_book=closed)
            right = exact_match(trace.answer(decoding).answer, expected)
            for v in d.verdicts:  # every verdict's evidence has the keys and kinds its type declares
                assert evidence_problems(v.code, v.evidence) == [], (ex["question"], v)
            assert d.correct == right
            if right:
                assert d.fired == [], (ex["question"], decoding, d.fired)
                continue
            wrong += 1
            assert d.fired, (ex["question"], decoding, d.answer)
            for code in d.fired:
                assert d.verdict(code).evidence and d.verdict(code).summary, (ex["question"], code)
            contained = [h.rank for h in trace.hits if contains_answer(passage_text(h.passage), expected)]
            assert ("retrieval-miss" in d.fired) == (not contained), (ex["question"], decoding, contained)
            if "retrieval-miss" in d.fired and deep.rank is not None:
                assert deep.rank > trace.k and d.verdict("retrieval-miss").evidence["gap_top"] >= 0
    assert wrong > 0  # the shipped examples include questions the small model gets wrong
