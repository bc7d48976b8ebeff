"""The stuffed reading passage by passage: what each passage is worth to the answer, and the other
orders the passages can be read in."""

from rag_core.analysis.attribution import stuffed_worth
from rag_core.analysis.attribution.stuffed_worth import StuffedWorth
from rag_core.decoding.stuffed import orders

__all__ = ["StuffedWorth", "orders", "stuffed_worth"]
