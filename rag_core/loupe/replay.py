"""Replaying traces another RAG wrote: reading their files, replaying them on a generator of ours,
and the results already done."""

from rag_core.replay.batch import read_done, replay_all
from rag_core.replay.records import Imported, ReplayFileError
from rag_core.replay.sources import SUFFIXES, read_traces

__all__ = ["SUFFIXES", "Imported", "ReplayFileError", "read_done", "read_traces", "replay_all"]
