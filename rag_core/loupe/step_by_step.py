"""One answer step by step, read off a finished trace: each step's numbers and sources, the
Frankenstein steps of RAG-Token, RAG-Sequence's table, and an answer re-marginalised without some
passages."""

from rag_core.decoding import stepper

__all__ = ["stepper"]
