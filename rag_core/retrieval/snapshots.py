"""Dated index snapshots for the index hot-swap experiment (RAG paper, Lewis et al. 2020, §4.5).

The paper built one index from a December 2016 Wikipedia dump and one from December 2018, asked
"Who is {position}?" for world leaders whose holder changed in between, and showed that swapping
the index swaps the answer without retraining.  This module loads the data for that experiment:

* ``assets/leaders.csv``: one row per position whose holder changed between 31 December 2016 and
  31 December 2018 (columns ``position, country, holder_2016, holder_2018, question, note``);
* ``assets/snapshots/leaders_2016.jsonl`` and ``leaders_2018.jsonl``: short encyclopedic passages
  (``id, title, text, topic``) written as of 31 December of that year, naming that year's holder.

Both indexes are built from the same base corpus plus one snapshot file.  Base passages that may
state facts later than the snapshots about these offices or people must stay out of *both*
indexes, otherwise the "2016" index could leak the 2018 answer.  :func:`stale_base_passages`
finds them with this rule:

A base passage (a dict with ``title`` and ``text``) is stale when

1. its title, compared case-insensitively, is exactly one of the listed positions; or
2. its title or text names any listed holder (2016 or 2018) by full name, matched
   case-insensitively on whole words; or
3. its title or text contains the surname of a listed holder as a whole, capitalised word, where
   the surname is the last word of the name (ignoring "Jr.", "Sr.", "II", "III"), and only if it
   is distinctive: at least 5 letters, not in :data:`COMMON_SURNAMES` (common names and words
   such as "Johnson", "Justice", "Castro", "Moon", "Singh"), and not from a country or body in
   :data:`NO_TRAILING_SURNAME`, whose names do not end in a family name (Chinese, Korean,
   Vietnamese, Mongolian, Burmese, Bhutanese, Ethiopian, Icelandic, Arabic-patronymic names...).
   For all other holders only the full name counts.

All matching is accent-insensitive: both sides are NFKD-folded with combining marks dropped and
letters such as "Đ", "ł" or "ø" mapped to their base letter, so "Vucic" matches "Vučić".

>>> import pandas as pd
>>> leaders = pd.DataFrame([
...     {"position": "President of France", "country": "France", "holder_2016": "François Hollande",
...      "holder_2018": "Emmanuel Macron", "question": "Who is the President of France?", "note": ""},
...     {"position": "President of South Korea", "country": "South Korea",
...      "holder_2016": "Hwang Kyo-ahn", "holder_2018": "Moon Jae-in",
...      "question": "Who is the President of South Korea?", "note": ""}])
>>> base = [
...     {"title": "Paris", "text": "Paris is the capital of France."},              # kept
...     {"title": "Élysée Palace", "text": "It is the residence of Francois Hollande."},  # full name
...     {"title": "En Marche!", "text": "A party founded by Macron in 2016."},       # surname
...     {"title": "Moon", "text": "The Moon orbits the Earth."},                     # Korean: kept
...     {"title": "President of France", "text": "The head of state."}]             # position
>>> stale_base_passages(base, leaders)
[1, 2, 4]
"""

from __future__ import annotations

import json
import re
import unicodedata
from collections.abc import Iterable
from pathlib import Path

import pandas as pd

LEADER_COLUMNS = ("position", "country", "holder_2016", "holder_2018", "question", "note")
SNAPSHOT_YEARS = (2016, 2018)
SNAPSHOT_DATES = {2016: "31 December 2016", 2018: "31 December 2018"}
MIN_SURNAME_LEN = 5

# Countries and bodies (the ``country`` column) whose holders' names do not end in a distinctive
# family name: family name first, patronymics, or no surnames at all.  Full names only.
NO_TRAILING_SURNAME = frozenset(
    {
        "China",
        "Taiwan",
        "Hong Kong",
        "South Korea",
        "North Korea",
        "Vietnam",
        "Mongolia",
        "Myanmar",
        "Bhutan",
        "Ethiopia",
        "Eritrea",
        "Iceland",
        "Saudi Arabia",
        "Somalia",
        "Malaysia",
        "Maldives",
        "Yemen",
        "Cambodia",
        "Indonesia",
        "ASEAN",
        "Interpol",
    }
)

# Surnames that are common names or ordinary words: too ambiguous to match alone.
COMMON_SURNAMES = frozenset(
    {
        # common English-language surnames and words
        "Johnson",
        "Jones",
        "Brown",
        "Smith",
        "Davis",
        "Walker",
        "Scott",
        "Cooper",
        "Murphy",
        "Christie",
        "Carter",
        "Clark",
        "Kelly",
        "Marshall",
        "Justice",
        "Earnest",
        "Breed",
        "Barrow",
        "Cable",
        "Powell",
        "Perry",
        "Carson",
        "Nixon",
        "Bentley",
        "Wheeler",
        "Lynch",
        "Brennan",
        "Sanders",
        "Ross",
        "Rice",
        "Hunt",
        "Kerry",
        "Haley",
        "Stuart",
        "Duncan",
        "Thomson",
        "Baird",
        "Cousin",
        "English",
        "Turnbull",
        "Morrison",
        "Weekes",
        "Carney",
        "Hassan",
        "McDonald",
        "McCarthy",
        "Nielsen",
        "Reynolds",
        "Ivey",
        "Bolton",
        "Fallon",
        "Batten",
        "Horgan",
        "Payette",
        "Johnston",
        "Lewis",
        "Young",
        "Gordon",
        "Price",
        "Graham",
        "Martin",
        "Moore",
        "Taylor",
        "Lee",
        "King",
        "Mattis",
        "Schulz",
        "Kurz",
        "Lake",
        "Colyer",
        "Markell",
        "Williamson",
        "Barclay",
        "Drakeford",
        "Whitaker",
        "Coats",
        "Castro",
        "Santos",
        "Moreno",
        "Perez",
        "Acosta",
        "Nieto",
        "Quesada",
        "Benitez",
        "Duque",
        "Alvarado",
        "Solis",
        "Correa",
        "Abraham",
        "Steiner",
        # common names in South and West Asia and Africa
        "Khan",
        "Singh",
        "Yadav",
        "Patel",
        "Naidu",
        "Ansari",
        "Mukherjee",
        "Hussain",
        "Sharif",
        "Mohamed",
        "Mohammed",
        "Muhammad",
        "Mohamad",
        "Ahmed",
        "Ismail",
        "Saeed",
        "Mustafa",
        "Salman",
        "Nayef",
        "Keita",
        "Maiga",
        "Mohamud",
        "Coulibaly",
        "Ibrahim",
        "Salih",
        "Masum",
        "Meta",
        "Mahama",
        "Razak",
        "Sellal",
        "Yusuf",
        "Lourenco",
        # words that double as names in other languages
        "Moon",
        "Philippe",
        "Morales",
        "Sanchez",
        "Conte",
    }
)

_SUFFIXES = {"jr", "jr.", "sr", "sr.", "ii", "iii", "iv"}
_EXTRA_FOLD = str.maketrans(
    {
        "Đ": "D",
        "đ": "d",
        "Ł": "L",
        "ł": "l",
        "Ø": "O",
        "ø": "o",
        "ı": "i",
        "Æ": "Ae",
        "æ": "ae",
        "Œ": "Oe",
        "œ": "oe",
        "ß": "ss",
        "Þ": "Th",
        "þ": "th",
        "Ð": "D",
        "ð": "d",
        "’": "'",
    }
)


def fold(text: str) -> str:
    """Accent-insensitive form of ``text``, case kept: ``fold("Đukanović") == "Dukanovic"``."""
    decomposed = unicodedata.normalize("NFKD", str(text))
    stripped = "".join(c for c in decomposed if not unicodedata.combining(c))
    return stripped.translate(_EXTRA_FOLD)


def load_leaders(path: str | Path) -> pd.DataFrame:
    """Read ``leaders.csv`` (UTF-8) as strings, checking its columns."""
    df = pd.read_csv(path, dtype=str, keep_default_na=False, encoding="utf-8")
    missing = [c for c in LEADER_COLUMNS if c not in df.columns]
    if missing:
        raise ValueError(f"{path}: missing columns {missing}")
    return df[list(LEADER_COLUMNS)].copy()


def snapshot_path(year: int, assets_dir: str | Path) -> Path:
    if year not in SNAPSHOT_YEARS:
        raise ValueError(f"no snapshot for {year}; years are {SNAPSHOT_YEARS}")
    base = Path(assets_dir)
    for candidate in (base / "snapshots" / f"leaders_{year}.jsonl", base / f"leaders_{year}.jsonl"):
        if candidate.exists():
            return candidate
    raise FileNotFoundError(f"leaders_{year}.jsonl not found under {base}")


def load_snapshot(year: int, assets_dir: str | Path) -> list[dict]:
    """Passages of the ``year`` snapshot (2016 or 2018): dicts with id, title, text, topic."""
    out = []
    with open(snapshot_path(year, assets_dir), encoding="utf-8") as f:
        for line_no, line in enumerate(f, 1):
            if not line.strip():
                continue
            rec = json.loads(line)
            for key in ("id", "title", "text"):
                if not isinstance(rec.get(key), str) or not rec[key]:
                    raise ValueError(f"leaders_{year}.jsonl line {line_no}: bad {key!r}")
            rec.setdefault("topic", "World leaders")
            out.append(rec)
    return out


def _surname(name: str, country: str) -> str | None:
    if country in NO_TRAILING_SURNAME:
        return None
    words = [w for w in name.split() if w.lower() not in _SUFFIXES]
    if len(words) < 2:
        return None
    last = fold(words[-1])
    letters = sum(ch.isalpha() for ch in last)
    if letters < MIN_SURNAME_LEN or last in COMMON_SURNAMES or not last[0].isupper():
        return None
    return last


def holder_keys(leaders_df: pd.DataFrame) -> tuple[set[str], set[str]]:
    """(folded full names, folded distinctive surnames) of every listed holder."""
    full, surnames = set(), set()
    for _, row in leaders_df.iterrows():
        for col in ("holder_2016", "holder_2018"):
            name = str(row[col]).strip()
            if not name:
                continue
            full.add(fold(name).lower())
            s = _surname(name, str(row["country"]))
            if s:
                surnames.add(s)
    return full, surnames


def _alternation(words: Iterable[str]) -> str:
    # Longest first so that "John F. Kelly" wins over shorter overlapping names.
    return "|".join(re.escape(w) for w in sorted(set(words), key=len, reverse=True))


def stale_base_passages(passages: list[dict], leaders_df: pd.DataFrame) -> list[int]:
    """Indices of base passages to keep out of both snapshot indexes (rule in module docstring)."""
    full, surnames = holder_keys(leaders_df)
    positions = {fold(p).lower().strip() for p in leaders_df["position"] if str(p).strip()}
    bound_l, bound_r = r"(?<![\w-])", r"(?![\w-])"
    full_re = re.compile(bound_l + "(?:" + _alternation(full) + ")" + bound_r) if full else None
    sur_re = re.compile(bound_l + "(?:" + _alternation(surnames) + ")" + bound_r) if surnames else None
    out = []
    for i, p in enumerate(passages):
        title = fold(p.get("title") or "")
        if title.lower().strip() in positions:
            out.append(i)
            continue
        blob = title + "\n" + fold(p.get("text") or "")
        if full_re is not None and full_re.search(blob.lower()):
            out.append(i)
        elif sur_re is not None and sur_re.search(blob):
            out.append(i)
    return out
