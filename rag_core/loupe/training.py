"""Fine-tuning a stack and walking a query: a run's settings, session and files, the held-out
comparison before and after, and the answer's conditionals a walk reads."""

from rag_core.pipeline import Pipeline
from rag_core.training import heldout, query_walk
from rag_core.training.loop import PARTS, TrainSettings
from rag_core.training.output import file_sha256, read_manifest
from rag_core.training.query_walk import DEFAULT_STEP_SIZE, WalkError
from rag_core.training.session import discard_damaged, fine_tune, keep_upload, run_folder, run_state

__all__ = [
    "DEFAULT_STEP_SIZE",
    "PARTS",
    "TrainSettings",
    "WalkError",
    "conditionals",
    "discard_damaged",
    "file_sha256",
    "fine_tune",
    "heldout",
    "keep_upload",
    "query_walk",
    "read_manifest",
    "run_folder",
    "run_state",
]


def conditionals(pipe: Pipeline, question: str, answer: str) -> query_walk.Conditionals:
    """The answer's per-passage conditionals under `pipe`'s generator, for one (question, answer):
    filled on demand as a walk meets new passages."""
    return query_walk.Conditionals(pipe, question, pipe.models.generator.encode_answer(answer))
