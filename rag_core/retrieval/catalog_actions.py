"""What the Corpus page's buttons do, as plain functions (the page calls them; so do the tests).

No Streamlit here: parsing uploads, checking a name, building, listing and deleting user indexes.
User indexes live in `catalog.user_root()/<name>`, so they survive a restart and the sidebar lists
them (`catalog.available_indexes`).

>>> check_name("my-notes")
'my-notes'
"""

from __future__ import annotations

import json
import os
import shutil
import time
from dataclasses import dataclass
from pathlib import Path

from rag_core.corpus import CorpusError, ParsedCorpus, Passage, parse_corpus_bytes
from rag_core.retrieval import catalog
from rag_core.retrieval.encoders import Encoder
from rag_core.retrieval.index import PassageIndex
from rag_core.storage import caches


@dataclass
class Uploads:
    """Several files read as one corpus: the passages, and what went wrong with the rest."""

    parsed: ParsedCorpus | None  # None when no file could be read
    errors: list[str]  # one line per file that could not be read at all


def parse_uploads(files: list[tuple[str, bytes]]) -> Uploads:
    """Parse each (file name, bytes) and merge them; a bad file is reported, the others kept.

    Ids are made unique across files (a clash gets a `'`), as within one file.
    """
    passages: list[Passage] = []
    seen: set[str] = set()
    skipped = documents = 0
    errors = []
    for name, data in files:
        try:
            one = parse_corpus_bytes(name, data)
        except CorpusError as e:
            errors.append(str(e))
            continue
        skipped += one.skipped
        documents += one.documents
        for p in one.passages:
            pid = p.id
            while pid in seen:
                pid += "'"
            seen.add(pid)
            passages.append(p if pid == p.id else Passage(pid, p.title, p.text, p.topic))
    return Uploads(ParsedCorpus(passages, skipped, documents) if passages else None, errors)


def check_name(name: str, replace: bool = False) -> str:
    """The cleaned index name, or CorpusError saying what is wrong with it."""
    name = (name or "").strip()
    if not name:
        raise CorpusError("give the index a name")
    if name in catalog.NAMED:
        raise CorpusError(f"{name!r} is a built-in index; choose another name")
    if not catalog.USER_NAME.match(name):
        raise CorpusError(
            f"{name!r} is not a valid name: use letters, digits, '_', '.' or '-', "
            "start with a letter or digit, at most 64 characters"
        )
    if (catalog.user_root() / name).exists() and not replace:
        raise CorpusError(
            f"an index named {name!r} already exists: tick “replace” to overwrite it, or choose another name"
        )
    return name


def build_user_index(
    passages: list[Passage],
    encoder: Encoder,
    name: str,
    replace: bool = False,
    progress: catalog.Progress | None = None,
) -> PassageIndex:
    """Encode `passages` and save them as the user index `name` (atomic: an old one stays whole
    until the new one is complete)."""
    name = check_name(name, replace)
    if not passages:
        raise CorpusError("there are no passages to index")
    return catalog.build_corpus_index(
        passages,
        encoder,
        catalog.user_root() / name,
        name=name,
        progress=progress or (lambda msg, frac: None),
    )


def user_indexes() -> list[dict]:
    """Name, passage count, encoder and build time of each user index (manifests only: fast)."""
    rows = []
    for folder in sorted(catalog.user_root().glob("*")):
        if folder.name.startswith(".") or not (folder / "manifest.json").is_file():
            continue
        try:
            m = json.loads((folder / "manifest.json").read_text(encoding="utf-8"))
        except (OSError, ValueError):
            m = {}
        rows.append(
            {
                "name": folder.name,
                "passages": m.get("count"),
                "encoder": m.get("encoder", "?"),
                "built": str(m.get("built_at", "?")).replace("T", " "),
            }
        )
    return rows


def delete_user_index(name: str) -> None:
    """Remove a user index from disk: renamed away first, so it vanishes at once and whole."""
    if name in catalog.NAMED or not catalog.USER_NAME.match(name or ""):
        raise CorpusError(f"{name!r} is not a user index")
    folder: Path = catalog.user_root() / name
    if not folder.is_dir():
        raise CorpusError(f"there is no index named {name!r}")
    ids = _ids_of(folder)
    trash = folder.with_name(f".{name}.deleted-{os.getpid()}-{time.time_ns()}")
    os.rename(folder, trash)
    shutil.rmtree(trash, ignore_errors=True)
    if ids and not any(_ids_of(f) == ids for f in catalog.user_root().glob("*")):
        for cached in caches.folder("maps").glob(
            f"{ids}-*.npz"
        ):  # its fitted maps, unless another index shares them
            cached.unlink(missing_ok=True)


def _ids_of(folder: Path) -> str | None:
    try:
        return json.loads((folder / "manifest.json").read_text(encoding="utf-8")).get("ids_checksum")
    except (OSError, ValueError):
        return None
