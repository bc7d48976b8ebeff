"""Every export format round-trips through pandas with the documented columns and the trace's
invariants, and names its schema."""
import numpy as np
import pandas as pd
import pytest

from conftest import check_trace_invariants
from rag_core import exports, toys
from rag_core.analysis.evaluation import CSV_COLUMNS, EvalRun
from rag_core.analysis.question_result import ModeResult, QuestionResult
from rag_core.trace import COLUMNS


@pytest.mark.parametrize("fmt", exports.FORMATS)
def test_a_trace_round_trips_in_every_format(tmp_path, fmt):
    frame = toys.run_toy("obama").trace.to_frame()
    path = tmp_path / f"t.{fmt}"
    exports.write_frame(frame, path, "trace")
    back = exports.read_frame(path)
    assert list(back.columns) == COLUMNS
    check_trace_invariants(back)
    for col in ("prior", "p_token_doc", "p_token_mix", "posterior_step", "posterior_prefix"):
        assert np.allclose(back[col].to_numpy(float), frame[col].to_numpy(float), rtol=0, atol=1e-12, equal_nan=True)
    assert list(back["answer"]) == list(frame["answer"])
    if fmt == "parquet":
        assert exports.schema_of(path) == f"trace/{exports.SCHEMAS['trace']}"


@pytest.mark.parametrize("fmt", exports.FORMATS)
def test_eval_rows_round_trip_and_csv_alone_neutralises_formulas(tmp_path, fmt):
    m = ModeResult("=cmd()", False, False, 0.25, 0.5, ["evidence-ignored"], 0.5)
    closed = ModeResult("Lyon", False, False)  # closed-book: no recall, no probabilities (empty cells)
    run = EvalRun([QuestionResult("@q", ["+1"], "T", {"closed-book": closed, "rag-sequence": m}, True, 2, 0.0, [2])],
                  {"k": 5})
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
