"""Generators behind one protocol (see `base.Generator`): causal LM, seq2seq (BART), toy table."""
from .base import GenState, Generator
from .loading import load_generator

__all__ = ["GenState", "Generator", "load_generator"]
