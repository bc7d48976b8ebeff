"""The name judge of the hot-swap experiment: does an answer name a year's office holder?

An answer is right for a year when it names that year's holder (`names_holder`); one that names
both years' holders is ambiguous: right in neither cell, counted apart.

>>> names_holder("The president is Sebastián Piñera.", "Sebastián Piñera")
True
>>> names_holder("Michelle Bachelet", "Sebastián Piñera")
False
>>> judge("Pravind Jugnauth", "Anerood Jugnauth", "Pravind Jugnauth")  # same surname: first names decide
(False, True, False)
"""

from __future__ import annotations

import re
from collections.abc import Iterable

from rag_core.retrieval.snapshots import fold

# Bump when the judge changes: cached results are keyed by it (3: a surname inside another name does
# not count; 4: a name that holds the holder's own first or middle name beside the surname does).
JUDGE_VERSION = 4

_SUFFIXES = {"jr", "sr", "ii", "iii", "iv"}
_LEFT, _RIGHT = r"(?<![\w-])", r"(?![\w-])"  # whole words; a hyphenated name is one word
# Capitalised words that may stand next to a surname without being part of another person's name.
_TITLES = {
    "the", "and", "or", "but", "then", "president", "prime", "minister", "premier", "chancellor",
    "chief", "governor", "king", "queen", "prince", "princess", "emir", "sheikh", "sultan", "pope",
    "general", "secretary", "vice", "deputy", "mr", "mrs", "ms", "dr", "sir", "lord", "lady", "dame",
}  # fmt: skip


def _tokens(name: str) -> list[str]:
    """Folded, lower-case words of a name without generational suffixes.

    >>> _tokens("John King Jr."), _tokens("Milo Đukanović")
    (['john', 'king'], ['milo', 'dukanovic'])
    """
    words = [w.strip(".,").lower() for w in fold(name).split()]
    return [w for w in words if w and w not in _SUFFIXES]


def _has_words(text: str, words: Iterable[str]) -> bool:
    """Whether the words occur in `text` together, in order, as whole words (case/accents ignored)."""
    words = list(words)
    if not words:
        return False
    pattern = _LEFT + r"\s+".join(re.escape(w) for w in words) + _RIGHT
    return re.search(pattern, fold(text).lower()) is not None


def _capitalised_run(folded: str, start: int, end: int) -> list[str]:
    """The capitalised words standing right before `start` and right after `end` in `folded`, each
    run going on while only spaces separate its words ("Barack Hussein Obama": before "Obama",
    ["Hussein", "Barack"]).

    >>> text = "said President Barack Hussein Obama today"
    >>> _capitalised_run(text, text.index("Obama"), text.index(" today"))
    ['Hussein', 'Barack', 'President']
    """
    run, head = [], folded[:start]
    while (b := re.search(r"([\w'-]+)[ \t]+$", head)) and b.group(1)[:1].isupper():
        run.append(b.group(1))
        head = head[: b.start()]
    tail = folded[end:]
    while (a := re.match(r"[ \t]+([\w'-]+)", tail)) and a.group(1)[:1].isupper():
        run.append(a.group(1))
        tail = tail[a.end() :]
    return run


def _surname_alone(text: str, words: list[str]) -> bool:
    """Whether the surname (the last of `words`) stands in `text` as this person's: at some
    occurrence, the capitalised words around it (`_capitalised_run`, titles aside) are none, or
    hold another word of this person's name. Only foreign ones make it part of someone else's
    name ("Hillary Clinton" is not "Bill Clinton"; "Parkash Singh Badal" does not name
    "Amarinder Singh"), while "Barack Hussein Obama" names "Barack Obama".

    >>> _surname_alone("President Trump said", ["donald", "trump"])
    True
    >>> _surname_alone("Hillary Clinton", ["bill", "clinton"])
    False
    >>> _surname_alone("Tshering Tobgay", ["lotay", "tshering"])
    False
    >>> _surname_alone("Barack Hussein Obama", ["barack", "obama"])
    True
    """
    folded = fold(text)  # accents gone, case kept: a capital says where a name goes on
    for m in re.finditer(_LEFT + re.escape(words[-1]) + _RIGHT, folded, re.IGNORECASE):
        around = [w.lower() for w in _capitalised_run(folded, m.start(), m.end())]
        names = [w for w in around if w not in _TITLES]
        if not names or any(w in words[:-1] for w in names):
            return True
    return False


def names_holder(text: str, name: str, other: str | None = None) -> bool:
    """Whether `text` names the person `name`: the full name, or its last word (the surname) where
    no capitalised word beside it makes it part of another name (`_surname_alone`).

    The surname is the last word of the name with "Jr."/"Sr."/"II" dropped, so multi-word
    surnames count by their last word ("López Obrador" names "Andrés Manuel López Obrador"; so
    does "Obrador"). Accents and case are ignored; matches are whole words, a hyphenated name
    being one word ("Zuma" does not name "Nkosazana Dlamini-Zuma"). When `other` (the other
    year's holder) has the same last word, the surname says nothing: a word of `name` that
    `other` lacks must appear too ("Anerood Jugnauth" vs "Pravind Jugnauth"). A known gap: a formal
    first name beside the surname reads as another person's ("Michael Richard Pompeo" does not name
    "Mike Pompeo"; tests/test_index_swap_data.py lists the passages it touches).

    >>> names_holder("Andrés Manuel López Obrador", "Andres Manuel Lopez Obrador")
    True
    >>> names_holder("Lopez Obrador", "Andrés Manuel López Obrador"), names_holder("Trumpet", "Donald Trump")
    (True, False)
    >>> names_holder("John King", "John King Jr."), names_holder("Jacob Zuma", "Nkosazana Dlamini-Zuma")
    (True, False)
    >>> names_holder("Hillary Clinton", "Bill Clinton")  # the first name contradicts the holder's
    False
    """
    if not isinstance(text, str) or not text.strip():
        return False
    words = _tokens(name)
    if not words:
        return False
    if _has_words(text, words):
        return True
    if not _surname_alone(text, words):
        return False
    other_words = _tokens(other) if other else []
    if other_words and other_words[-1] == words[-1]:
        distinct = [w for w in words[:-1] if w not in other_words]
        return any(_has_words(text, [w]) for w in distinct)
    return True


def judge(answer: str, holder_2016: str, holder_2018: str) -> tuple[bool, bool, bool]:
    """(right for 2016, right for 2018, ambiguous) for one answer.

    An answer that names both years' holders is ambiguous: right in neither cell, counted apart.

    >>> judge("Barack Obama", "Barack Obama", "Donald Trump")
    (True, False, False)
    >>> judge("Obama, then Trump", "Barack Obama", "Donald Trump")
    (False, False, True)
    """
    n16, n18 = names_holder(answer, holder_2016, holder_2018), names_holder(answer, holder_2018, holder_2016)
    return (n16 and not n18, n18 and not n16, n16 and n18)
