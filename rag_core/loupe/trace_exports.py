"""A trace or an eval run written out for other tools: CSV, Parquet and JSON Lines with their
schemas, and a query as OpenTelemetry spans."""

from rag_core import exports
from rag_core.otlp import trace_otlp

__all__ = ["exports", "trace_otlp"]
