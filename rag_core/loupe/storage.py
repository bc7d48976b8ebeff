"""The engine's cache folders on disk: where each kind of file lives and how much room they take."""

from rag_core.storage import caches

__all__ = ["caches"]
