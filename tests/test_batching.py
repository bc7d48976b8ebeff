"""Several questions decoded as one batch must give what each question gives alone: every column
of every trace, the closed-book answers, the eval results and the index-swap rows. The real
questions, passages and prompts, read by the tiny Llama (a batch equals separate calls for any
model); the eval batch, whose verdicts need real answers, on the trained default."""

import numpy as np
import pandas as pd
import pytest

from rag_core.analysis.evaluation.questions import read_questions
from rag_core.analysis.evaluation.runs import evaluate_batch, evaluate_question
from rag_core.config import ASSETS, AnswerSettings
from rag_core.decoding.answering import decode_queries
from rag_core.index_swap import run as index_swap_run
from rag_core.index_swap.store import leaders_frame

# Rows of another batch reach the same numbers through matrix products of other shapes: float32
# rounding differs in the last places. |batched - alone| <= TOL * max(1, |alone|) on log-probs.
TOL = 2e-5
EVERY_NTH = 36  # a spread sample of the dev split: 4 of its 143 questions


@pytest.fixture(scope="module")
def dev_sample():
    questions, _ = read_questions(ASSETS / "eval" / "dev.jsonl")
    return questions[::EVERY_NTH]


def assert_same_frames(batched: pd.DataFrame, alone: pd.DataFrame) -> None:
    """Every column: text and integer columns equal, float columns within TOL (NaN where NaN)."""
    assert list(batched.columns) == list(alone.columns)
    assert len(batched) == len(alone)
    for col in alone.columns:
        a, b = alone[col].to_numpy(), batched[col].to_numpy()
        if alone[col].dtype.kind == "f":
            assert np.array_equal(np.isnan(a), np.isnan(b)), col
            real = ~np.isnan(a)
            assert (np.abs(a[real] - b[real]) <= TOL * np.maximum(1.0, np.abs(a[real]))).all(), col
        else:
            assert a.tolist() == b.tolist(), col


def test_a_batch_gives_every_trace_column_each_question_gets_alone(tiny_llama_pipeline, dev_sample):
    # two settings per question: a smaller K decodes from the first rows of the batch's state
    cfgs = [AnswerSettings(), AnswerSettings(k=3)]
    batched = tiny_llama_pipeline.run_many([q.question for q in dev_sample], cfgs)
    for q, runs in zip(dev_sample, batched):
        alone = tiny_llama_pipeline.run_settings(q.question, cfgs)
        for b, a in zip(runs, alone):
            assert b.trace.settings == a.trace.settings
            assert [h.passage.id for h in b.trace.hits] == [h.passage.id for h in a.trace.hits]
            assert_same_frames(b.trace.to_frame(), a.trace.to_frame())


def test_closed_book_answers_of_a_batch(tiny_llama_pipeline, dev_sample):
    questions = [q.question for q in dev_sample]
    assert tiny_llama_pipeline.closed_book_many(questions) == [
        tiny_llama_pipeline.closed_book(q) for q in questions
    ]


@pytest.mark.slow  # over 5 s on 2 cores
def test_an_eval_batch_gives_the_results_of_one_question_at_a_time(default_pipeline, dev_sample):
    cfg = default_pipeline.settings
    sample = dev_sample[:2]
    batched = evaluate_batch(default_pipeline, sample, cfg)
    for q, b in zip(sample, batched):
        a = evaluate_question(default_pipeline, q, cfg)
        assert b.modes.keys() == a.modes.keys()
        for mode in a.modes:
            mb, ma = b.modes[mode], a.modes[mode]
            assert (mb.answer, mb.em, mb.contained, mb.verdicts) == (
                ma.answer,
                ma.em,
                ma.contained,
                ma.verdicts,
            )
            for name in ("p_seq", "p_tok", "weights_share"):  # None for closed-book
                pb, pa = getattr(mb, name), getattr(ma, name)
                assert pb == pa if pa is None else pb == pytest.approx(pa, rel=TOL, abs=1e-9)
        assert (b.recall, b.answer_rank, b.answer_ranks) == (a.recall, a.answer_rank, a.answer_ranks)


def test_index_swap_rows_of_a_batch_equal_each_position_alone(tiny_llama_pipeline):
    pipes = index_swap_run.year_pipelines(lambda: tiny_llama_pipeline)
    leaders = leaders_frame().to_dict("records")[:2]
    cfgs = [index_swap_run.experiment_of().settings]
    batched = index_swap_run.positions_records(pipes, leaders, cfgs)
    for leader, records in zip(leaders, batched):
        alone = index_swap_run.positions_records(pipes, [leader], cfgs)[0]
        for b, a in zip(records, alone):
            assert b["closed"] == a["closed"]
            assert len(b["rows"]) == len(a["rows"])
            for rb, ra in zip(b["rows"], a["rows"]):
                assert rb["p_answer"] == pytest.approx(ra["p_answer"], rel=TOL, abs=1e-9)
                assert {k: v for k, v in rb.items() if k != "p_answer"} == {
                    k: v for k, v in ra.items() if k != "p_answer"
                }


def test_a_prompt_row_two_questions_share_is_prepared_once(tiny_llama_pipeline, monkeypatch):
    gen = tiny_llama_pipeline.models.generator
    seen = []
    real = type(gen).prepare_rows

    def counting(self, rows):
        seen.append(len(rows))
        return real(self, rows)

    monkeypatch.setattr(type(gen), "prepare_rows", counting)
    cfg = AnswerSettings(k=4)
    query = tiny_llama_pipeline.query("Who wrote Moby-Dick?", [cfg])
    twice = decode_queries(gen, [query, query], tiny_llama_pipeline.scale_for)
    assert seen == [4]  # not 8
    assert_same_frames(twice[1][0].trace.to_frame(), twice[0][0].trace.to_frame())
