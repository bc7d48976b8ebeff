"""Named model stacks: what `--preset NAME` (command line and app) fills in for the model flags.

`default` is the product's own stack (StackSpec's defaults); `base` is the same packaged models before
RAG training, read with the few-shot prompt; the paper's two stacks need their weights (a local hub
cache, or --allow-downloads).

>>> sorted(PRESETS)
['base', 'default', 'paper-sequence', 'paper-token']
"""

from __future__ import annotations

from rag_core.config import BASE_GENERATOR

PRESETS: dict[str, dict[str, str]] = {
    "default": {},
    "base": {"generator": BASE_GENERATOR},
    "paper-token": {
        "question_encoder": "facebook/rag-token-nq",
        "generator": "facebook/rag-token-nq",
        "ctx_encoder": "facebook/dpr-ctx_encoder-multiset-base",
    },
    "paper-sequence": {
        "question_encoder": "facebook/rag-sequence-nq",
        "generator": "facebook/rag-sequence-nq",
        "ctx_encoder": "facebook/dpr-ctx_encoder-multiset-base",
    },
}
