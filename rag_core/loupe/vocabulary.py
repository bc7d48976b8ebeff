"""The names, types and formats every page shares: the readings and their labels, the trace and its
candidates, passages, marginals, the question's limits and the one-line error."""

from rag_core import marginals
from rag_core.config import (
    ASSETS,
    CLOSED_BOOK,
    DECODE_NAMES,
    DECODING_LABELS,
    DECODINGS,
    MAX_QUESTION_CHARS,
    RAG_SEQUENCE,
    RAG_TOKEN,
    READING_LABELS,
    REPO_ROOT,
    STUFFED,
    STUFFED_LABEL,
    AnswerSettings,
    Progress,
    StackSpec,
)
from rag_core.corpus import CorpusError, Passage
from rag_core.errors import first_line
from rag_core.marginals import citation, p_text, prob
from rag_core.pipeline import QuestionError, clean_question
from rag_core.trace import Candidate, Hit, Trace, answer_settings_of, log_p_under

__all__ = [
    "ASSETS",
    "CLOSED_BOOK",
    "DECODE_NAMES",
    "DECODINGS",
    "DECODING_LABELS",
    "MAX_QUESTION_CHARS",
    "RAG_SEQUENCE",
    "RAG_TOKEN",
    "READING_LABELS",
    "REPO_ROOT",
    "STUFFED",
    "STUFFED_LABEL",
    "AnswerSettings",
    "Candidate",
    "CorpusError",
    "Hit",
    "Passage",
    "Progress",
    "QuestionError",
    "StackSpec",
    "Trace",
    "answer_settings_of",
    "citation",
    "clean_question",
    "first_line",
    "log_p_under",
    "marginals",
    "p_text",
    "prob",
]
