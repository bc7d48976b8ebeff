"""Where each token of an answer came from: one passage, several, or the generator alone (with the
word in a passage or not); the kinds, their labels and meanings, and how two readings' credit
differs."""

from rag_core.analysis.attribution.token_sources import (
    END,
    FORCED,
    KNOWN,
    LABELS,
    MEANINGS,
    PASSAGE,
    SEVERAL,
    SHOWN,
    UNSEEN,
    WEIGHTS,
    credit_differences,
    differing_steps,
    kind,
    shares,
)

__all__ = [
    "END",
    "FORCED",
    "KNOWN",
    "LABELS",
    "MEANINGS",
    "PASSAGE",
    "SEVERAL",
    "SHOWN",
    "UNSEEN",
    "WEIGHTS",
    "credit_differences",
    "differing_steps",
    "kind",
    "shares",
]
