"""The model stacks a session can run on: the presets, the command line's and the fine-tuning runs,
each with its key and fingerprint; the command line's flags read as a stack, and what loading one
can raise."""

from rag_core import stacks
from rag_core.corpus import CorpusError
from rag_core.flags import FlagError, parse_stack_args
from rag_core.loupe.answer_store import AnswerStore
from rag_core.loupe.answers import Loupe
from rag_core.loupe.stack_holder import StackHolder
from rag_core.models.sources import ModelSourceError
from rag_core.pipeline import Models
from rag_core.retrieval.index import IndexLoadError

# What opening a stack a user named can raise: one line each, then the default stack opens.
LOAD_ERRORS = (FlagError, ModelSourceError, IndexLoadError, CorpusError, ValueError, OSError)

__all__ = ["LOAD_ERRORS", "AnswerStore", "Loupe", "Models", "StackHolder", "parse_stack_args", "stacks"]
