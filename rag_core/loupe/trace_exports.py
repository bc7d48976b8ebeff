"""A trace or an eval run written out for other tools: CSV, Parquet and JSON Lines with their
schemas (a trace's own exports, OTLP spans included, are its Result's)."""

from rag_core import exports

__all__ = ["exports"]
