"""The Map: an index's passages laid out in 2-D or 3-D, and which of them to draw."""

from rag_core.maps import map_layout, projection

__all__ = ["map_layout", "projection"]
