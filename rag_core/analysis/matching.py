"""Answer matching, one definition for every part of the product (eval, diagnosis, the hot swap).

Matching follows SQuAD (Rajpurkar et al. 2016): lowercase, drop punctuation, drop the articles
a/an/the, collapse spaces; exact match (EM) against *any* gold answer.

>>> normalize_answer("The  Hobbit!"), exact_match("the Hobbit", ["Hobbit"])
('hobbit', True)
>>> contains_answer("Jane Austen wrote it", ["Austen"]), contains_answer("Austenite", ["Austen"])
(True, False)

"Contained" counts a prediction as right when a normalised gold answer occurs in it as whole words
("Herman Melville, the novelist" contains "Herman Melville"); answer-recall@K counts a question as
retrieved when one of its K passages (title + text) contains a gold answer the same way.
"""

from __future__ import annotations

import re
import string
import unicodedata
from collections.abc import Iterable

_ARTICLES = re.compile(r"\b(a|an|the)\b")
_ASCII_PUNCT = set(string.punctuation)


def normalize_answer(text: str) -> str:
    """SQuAD normalisation. Besides ASCII punctuation (SQuAD's set) every Unicode punctuation mark
    goes too (– ’ « »), so typographic quotes and dashes never decide a match.

    >>> normalize_answer("Secker & Warburg"), normalize_answer("Beuve-Méry"), normalize_answer("An  Apple.")
    ('secker warburg', 'beuveméry', 'apple')
    """
    text = str(text).lower()
    text = "".join(
        ch for ch in text if ch not in _ASCII_PUNCT and not unicodedata.category(ch).startswith("P")
    )
    text = _ARTICLES.sub(" ", text)
    return " ".join(text.split())


def exact_match(prediction: str | None, answers: Iterable[str]) -> bool:
    if prediction is None:
        return False
    pred = normalize_answer(prediction)
    return any(pred == normalize_answer(a) for a in answers)


def _contains_norm(haystack: str, needle: str) -> bool:
    return bool(needle) and f" {needle} " in f" {haystack} "


def contains_answer(text: str | None, answers: Iterable[str]) -> bool:
    """Some normalised answer occurs in the normalised text as whole words."""
    if not text:
        return False
    hay = normalize_answer(text)
    return any(_contains_norm(hay, normalize_answer(a)) for a in answers)


def passage_text(passage) -> str:
    """What the generator reads of a passage: its title and its text."""
    return f"{passage.title}. {passage.text}"


def contains_words(text: str, answer: str) -> bool:
    """The answer as a phrase, or every one of its words, occurs in the text."""
    if contains_answer(text, [answer]):
        return True
    words = normalize_answer(answer).split()
    hay = f" {normalize_answer(text)} "
    return bool(words) and all(f" {w} " in hay for w in words)
