"""Generators behind one protocol (see `base.Generator`): causal LM, seq2seq (BART), toy table."""

from rag_core.generators.base import Generator, GenState
from rag_core.generators.loading import load_generator

__all__ = ["GenState", "Generator", "load_generator"]
