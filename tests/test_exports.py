"""Every export format round-trips through pandas with the documented columns and the trace's
invariants, and names its schema."""

import numpy as np
import pandas as pd
import pytest

from rag_core import exports
from rag_core.analysis.evaluation.question_result import ModeResult, QuestionResult
from rag_core.analysis.evaluation.runs import CSV_COLUMNS, EvalRun
from rag_core.config import AnswerSettings
from rag_core.corpus import Passage
from rag_core.generators.fingerprint import prompt_fingerprint
from rag_core.retrieval.index import PassageIndex
from rag_core.toys import examples as toys
from rag_core.trace import COLUMNS

from conftest import check_trace_invariants


@pytest.mark.parametrize("fmt", exports.FORMATS)
def test_a_trace_round_trips_in_every_format(tmp_path, fmt):
    frame = toys.run_toy("obama").trace.to_frame()
    path = tmp_path / f"t.{fmt}"
    exports.write_frame(frame, path, "trace")
    back = exports.read_frame(path)
    assert list(back.columns) == COLUMNS
    check_trace_invariants(back)
    for col in ("prior", "p_token_doc", "p_token_mix", "posterior_step", "posterior_prefix"):
        assert np.allclose(
            back[col].to_numpy(float), frame[col].to_numpy(float), rtol=0, atol=1e-12, equal_nan=True
        )
    assert list(back["answer"]) == list(frame["answer"])
    if fmt == "parquet":
        assert exports.schema_of(path) == f"trace/{exports.SCHEMAS['trace']}"


@pytest.mark.parametrize("fmt", exports.FORMATS)
def test_eval_rows_round_trip_and_csv_alone_neutralises_formulas(tmp_path, fmt):
    m = ModeResult("=cmd()", False, False, 0.25, 0.5, ["evidence-ignored"], 0.5)
    closed = ModeResult("Lyon", False, False)  # closed-book: no recall, no probabilities (empty cells)
    run = EvalRun(
        [QuestionResult("@q", ["+1"], "T", {"closed-book": closed, "rag-sequence": m}, True, 2, 0.0, [2])],
        {"k": 5},
    )
    path = tmp_path / f"r.{fmt}"
    run.export(path)
    back = exports.read_frame(path)
    assert list(back.columns) == CSV_COLUMNS
    assert list(back["mode"]) == ["closed-book", "rag-sequence"]
    assert pd.isna(back["recall"][0])  # closed-book's empty cells stay empty in every format
    assert pd.isna(back["p_seq"][0])
    row = back.iloc[1]
    if fmt == "csv":
        assert (row["question"], row["answer"], row["answers"]) == ("'@q", "'=cmd()", "'+1")
    else:
        assert (row["question"], row["answer"], row["answers"]) == ("@q", "=cmd()", "+1")
    assert (float(row["p_seq"]), float(row["weights_share"]), int(row["answer_rank"])) == (0.25, 0.5, 2)


def test_an_unknown_suffix_is_a_clear_error(tmp_path):
    with pytest.raises(ValueError, match="use .csv, .parquet or .jsonl"):
        exports.write_frame(pd.DataFrame({"a": [1]}), tmp_path / "x.xlsx", "trace")


# The trace's columns of schema 2, in order: scripts written against them must keep working.
SCHEMA_2_COLUMNS = [
    "query",
    "index",
    "decoding",
    "candidate",
    "answer",
    "step",
    "token",
    "token_id",
    "doc_rank",
    "doc_id",
    "doc_title",
    "doc_score",
    "prior",
    "p_token_doc",
    "p_token_mix",
    "posterior_step",
    "posterior_prefix",
    "logp_prefix_doc",
    "finished",
    "forced",
]


@pytest.fixture(scope="module")
def tiny(tmp_path_factory):
    from conftest import tiny_pipeline

    return tiny_pipeline(tmp_path_factory.mktemp("tiny-exports"))[0]


def test_schemas_3_and_4_append_their_columns_after_the_old_ones_unchanged():
    assert COLUMNS[: len(SCHEMA_2_COLUMNS)] == SCHEMA_2_COLUMNS
    assert (
        COLUMNS[len(SCHEMA_2_COLUMNS) :].index("schema_version") == len(COLUMNS) - len(SCHEMA_2_COLUMNS) - 2
    )
    assert COLUMNS[-1] == "p_stuffed"  # schema 4's one column, after schema 3's
    assert exports.SCHEMAS["trace"] == 4
    frame = toys.run_toy("obama").trace.to_frame()
    assert list(frame.columns) == COLUMNS
    assert set(frame["schema_version"]) == {4}
    assert frame["p_stuffed"].isna().all()  # a toy with no stuffed reading
    # the old columns hold what they held: the design's worked numbers (docs/design.md §1.7)
    first = frame[(frame["decoding"] == "rag-token") & (frame["candidate"] == 0) & (frame["step"] == 0)]
    assert first["prior"].tolist() == pytest.approx([0.7, 0.3], abs=1e-12)
    assert first["p_token_doc"].tolist() == pytest.approx([0.8, 0.4], abs=1e-12)


def test_whole_answer_probabilities_equal_the_marginals_of_the_rows(tiny):
    trace = tiny.run(
        "What is the capital of France?", AnswerSettings(k=3, beams=2, max_new_tokens=5, rescore="fast")
    )
    frame = trace.to_frame()
    checked = 0
    for (_, _), cand in frame.groupby(["decoding", "candidate"]):
        steps = cand.drop_duplicates("step").sort_values("step")
        # RAG-Token: the product over steps of the mixture, in log space
        assert cand["p_tok"].iloc[0] == pytest.approx(np.exp(np.log(steps["p_token_mix"]).sum()), rel=1e-9)
        # RAG-Sequence: Σ_z p(z|x) p(y|x,z), p(y|x,z) from the last step's running log p (unscored: 0)
        last = cand[cand["step"] == cand["step"].max()]
        p_y_z = np.exp(last["logp_prefix_doc"].fillna(-np.inf))
        assert cand["p_seq"].iloc[0] == pytest.approx(float((last["prior"] * p_y_z).sum()), rel=1e-9)
        assert cand["p_seq"].nunique() == 1
        assert cand["p_tok"].nunique() == 1
        checked += 1
    assert checked >= 3
    toy = toys.run_toy("obama").trace.to_frame()  # the design's numbers: p_seq 0.516, p_tok 0.449
    born = toy[toy["answer"] == "born Hawaii"]
    assert (round(born["p_seq"].iloc[0], 3), round(born["p_tok"].iloc[0], 3)) == (0.516, 0.449)


def test_settings_columns_and_parquet_metadata_are_the_config_used(tiny, tmp_path):
    cfg = AnswerSettings(
        k=2, beams=3, max_new_tokens=4, length_penalty=0.5, rescore="fast", decode="sequence", scale=7.5
    )
    trace = tiny.run("Who wrote Hamlet?", cfg)
    frame = trace.to_frame()
    gen = tiny.models.generator
    want = {
        "k": 2,
        "scale": 7.5,
        "decode": "sequence",
        "beams": 3,
        "length_penalty": 0.5,
        "max_new_tokens": 4,
        "early_stopping": cfg.early_stopping,
        "rescore": "fast",
        "encoder": tiny.models.encoder.id,
        "generator": gen.id,
        "prompt_fingerprint": prompt_fingerprint(gen.id),
    }
    for col, value in want.items():
        assert frame[col].tolist() == [value] * len(frame), col
    texts = {h.rank: h.passage.text for h in trace.hits}
    assert frame["doc_text"].tolist() == [texts[r] for r in frame["doc_rank"]]
    path = tmp_path / "t.parquet"
    exports.write_frame(frame, path, "trace")
    assert exports.settings_of(path) == want
    assert exports.schema_of(path) == "trace/4"
    for fmt in ("jsonl", "parquet"):
        exports.write_frame(frame, tmp_path / f"t.{fmt}", "trace")
        back = exports.read_frame(tmp_path / f"t.{fmt}")
        assert list(back.columns) == COLUMNS
        assert back[list(want)].iloc[0].to_dict() == want


def test_a_passage_starting_like_a_formula_is_neutralised_in_csv_alone(tiny, tmp_path):
    passages = [
        Passage("p1", "=Formula", '=HYPERLINK("http://x.example","a") Paris is the capital.'),
        Passage("p2", "@Other", "+1 Berlin is the capital of Germany."),
    ]
    enc = tiny.models.encoder
    evil = tiny.with_index("evil", PassageIndex.build(enc.encode_passages(passages), passages, enc.id))
    frame = evil.run("What is the capital of France?", AnswerSettings(k=2, max_new_tokens=3)).to_frame()
    for fmt in exports.FORMATS:
        exports.write_frame(frame, tmp_path / f"t.{fmt}", "trace")
        back = exports.read_frame(tmp_path / f"t.{fmt}")
        raw = {p.text for p in passages} | {p.title for p in passages}
        shown = set(back["doc_text"]) | set(back["doc_title"])
        assert shown == ({"'" + t for t in raw} if fmt == "csv" else raw), fmt
