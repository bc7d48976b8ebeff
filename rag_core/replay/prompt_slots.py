"""Where each logged document stands in the logged prompt: the prompt becomes a `corpus.Prompted`,
its own text around the documents' spans, so a document can be cut out of the prompt exactly as
the model read it, or moved to another slot.

A document is found by its text verbatim, else with any run of white space matching any other
(templates often re-wrap or strip), the first place not already taken, the longest texts first.
Documents whose text is not in the prompt did not reach the model (a reranker or a context limit
dropped them): they are returned apart, and the replay reads the prompt without them.

>>> from rag_core.replay.records import LoggedDocument as D
>>> docs = [D("a", "A", "A text."), D("b", "B", "B text."), D("c", "C", "not there")]
>>> p, gone = locate("Context:\\nB text.\\n\\nA  text.\\nQ: Who?", docs)
>>> [d.id for d in p.passages], p.pieces, [d.id for d in gone]
(['b', 'a'], ('Context:\\n', '\\n\\n', '\\nQ: Who?'), ['c'])
>>> p.passages[1].text  # the span as the prompt holds it
'A  text.'
"""

from __future__ import annotations

import re
from collections.abc import Sequence

from rag_core.corpus import Passage, Prompted
from rag_core.replay.records import LoggedDocument


def _spans(prompt: str, text: str) -> list[tuple[int, int]]:
    """Every place `text` stands in `prompt`: verbatim, else with white space loosened."""
    text = text.strip()
    if not text:
        return []
    exact = [(m.start(), m.start() + len(text)) for m in re.finditer(re.escape(text), prompt)]
    if exact:
        return exact
    loose = r"\s+".join(re.escape(w) for w in text.split())
    return [(m.start(), m.end()) for m in re.finditer(loose, prompt)]


def locate(prompt: str, documents: Sequence[LoggedDocument]) -> tuple[Prompted, list[LoggedDocument]]:
    """The prompt with its document slots (documents in prompt order), and the documents not in it.
    The longest texts are placed first, so a short document that another one contains cannot take
    that one's place."""
    taken: list[tuple[int, int, LoggedDocument]] = []
    missing = []
    for d in sorted(documents, key=lambda d: -len(d.text.strip())):
        free = [(a, b) for a, b in _spans(prompt, d.text) if all(b <= s or a >= e for s, e, _ in taken)]
        if free:
            taken.append((*free[0], d))
        else:
            missing.append(d)
    taken.sort(key=lambda t: t[0])
    pieces, passages, at = [], [], 0
    for a, b, d in taken:
        pieces.append(prompt[at:a])
        passages.append(Passage(d.id, d.title, prompt[a:b]))
        at = b
    pieces.append(prompt[at:])
    return Prompted(tuple(pieces), tuple(passages)), [d for d in documents if d in missing]
