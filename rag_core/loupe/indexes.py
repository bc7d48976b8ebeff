"""The indexes a session can pick, named and the user's own, and building, checking and deleting
one from a corpus of passages."""

from rag_core.corpus import PASSAGE_WORDS, passage_word_bounds
from rag_core.retrieval import catalog_actions
from rag_core.retrieval.catalog import NAMED, available_indexes, default_index_name
from rag_core.retrieval.catalog_actions import build_user_index, user_indexes

__all__ = [
    "NAMED",
    "PASSAGE_WORDS",
    "available_indexes",
    "build_user_index",
    "catalog_actions",
    "default_index_name",
    "passage_word_bounds",
    "user_indexes",
]
