"""The model stacks a session can run on: the presets and the fine-tuning runs, each with its key,
its fingerprint and the settings it made."""

from rag_core import stacks

__all__ = ["stacks"]
