"""One short hash of the prompts the generators build, so that a cached or shipped result made
under another prompt is recognised as stale (the index swap's runs, eval checkpoints and shipped
eval runs are all keyed by it)."""
from __future__ import annotations

import hashlib
import json

from ..corpus import Passage
from . import causal, seq2seq


def prompt_fingerprint() -> str:
    """The generators' prompts rendered on placeholders, hashed: any change to a prompt's wording,
    worked examples or layout gives another value."""
    p = Passage("{id}", "{title}", "{text}")
    parts = [causal.rag_prompt("{question}", p), causal.closed_book_prompt("{question}"),
             seq2seq.rag_input("{question}", p), seq2seq.rag_input("{question}", None)]
    return hashlib.sha256(json.dumps(parts, ensure_ascii=False).encode("utf-8")).hexdigest()[:16]
