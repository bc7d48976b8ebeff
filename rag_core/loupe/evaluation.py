"""How well a stack answers a question file: the question files, the runs (live and shipped), their
summaries, calibration, retrieval errors and run-to-run comparison."""

from rag_core.analysis.evaluation import calibration, eval_summary, questions, runs, shipped_runs
from rag_core.analysis.evaluation.calibration import Reliability
from rag_core.analysis.evaluation.questions import parse_question_line, read_questions
from rag_core.analysis.evaluation.retrieval_metrics import CELLS, error_split
from rag_core.analysis.evaluation.run_compare import compare_results

__all__ = [
    "CELLS",
    "Reliability",
    "calibration",
    "compare_results",
    "error_split",
    "eval_summary",
    "parse_question_line",
    "questions",
    "read_questions",
    "runs",
    "shipped_runs",
]
