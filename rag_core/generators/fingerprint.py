"""One short hash of the prompt a generator reads, so that a cached or shipped result made under
another prompt is recognised as stale (the index swap's runs, eval checkpoints and shipped eval
runs are all keyed by it, beside the generator's id)."""

from __future__ import annotations

import hashlib
import json

from rag_core.config import TRAINED_GENERATOR
from rag_core.corpus import Passage
from rag_core.generators import causal, seq2seq
from rag_core.generators.prompt_style import prompt_style_of
from rag_core.generators.trained import adapter_hash


def prompt_fingerprint(generator_id: str | None = None) -> str:
    """The prompts the generator `generator_id` reads, rendered on placeholders and hashed: any
    change to a prompt's wording, worked examples or layout gives another value, and so does another
    shipped adapter for the trained default. The few-shot
    prompt's hash is the one every result made before the plain prompt existed was keyed by."""
    p = Passage("{id}", "{title}", "{text}")
    style = prompt_style_of(generator_id) if generator_id else causal.FEW_SHOT_STYLE
    parts = [
        causal.rag_prompt("{question}", p, style),
        causal.closed_book_prompt("{question}", style),
        seq2seq.rag_input("{question}", p),
        seq2seq.rag_input("{question}", None),
    ]
    if style != causal.FEW_SHOT_STYLE:
        parts.append(style)
    if generator_id == TRAINED_GENERATOR:  # the id names the adapter's role, its hash the weights
        parts.append(adapter_hash())
    return hashlib.sha256(json.dumps(parts, ensure_ascii=False).encode("utf-8")).hexdigest()[:16]
