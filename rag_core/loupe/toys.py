"""Hand-made models: the toy examples run through the real marginals and decoding, and the By hand
page's editable tables."""

from rag_core.toys import by_hand, examples

__all__ = ["by_hand", "examples"]
