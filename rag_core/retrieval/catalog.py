"""Named indexes and where they live: `wiki`, `2016`, `2018`, user-built ones, or any folder.

- `wiki`: the base corpus alone (Level-4 vital article summaries in passages of about 100 words,
  `corpus.chunk_words`).
- `2016` / `2018`: the base corpus less its stale passages (see `snapshots.stale_base_passages`)
  plus the world-leader passages written as of 31 December of that year.
Built indexes are cached under the cache folder; for the default encoder the vectors come from
`assets/vectors/` (the base corpus in float16, each year's snapshot passages in float32), so a fresh
machine needs no 3-minute encoding pass, and opens a year index in about a second.
"""

from __future__ import annotations

import json
import re
import time
from functools import lru_cache
from pathlib import Path

import numpy as np

from rag_core.config import ASSETS, DEFAULT_ENCODER, Progress
from rag_core.corpus import Passage, load_wiki, passage_checksum, wiki_summaries_path
from rag_core.retrieval import snapshots
from rag_core.retrieval.encoders import Encoder
from rag_core.retrieval.hf_index import is_hf_spec, load_hf_index, parse_spec
from rag_core.retrieval.index import FLAT, IndexLoadError, PassageIndex
from rag_core.storage import caches
from rag_core.storage.files import write_json_atomic, write_npy_atomic

NAMED = ("wiki", "2016", "2018")
USER_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}$")


def _noop(msg: str, frac: float) -> None:
    pass


def snapshots_available() -> bool:
    return (ASSETS / "leaders.csv").is_file() and all(
        (ASSETS / "snapshots" / f"leaders_{y}.jsonl").is_file() for y in (2016, 2018)
    )


def default_index_name() -> str:
    return "2018" if snapshots_available() else "wiki"


def available_indexes() -> list[str]:
    names = ["2018", "2016", "wiki"] if snapshots_available() else ["wiki"]
    # dot-folders are saves in progress (temp and old copies): never offer them
    return names + [
        p.name
        for p in sorted(user_root().glob("*"))
        if not p.name.startswith(".") and (p / "manifest.json").is_file()
    ]


def user_root() -> Path:
    return caches.folder("user-indexes")


def _slug(encoder_id: str) -> str:
    return re.sub(r"[^A-Za-z0-9]+", "-", encoder_id).strip("-")[:60]


def named_passages(name: str) -> tuple[list[Passage], dict]:
    """The passages of a named index and facts about how they were chosen. Memoised per version of
    the files they are made from (an index open checks them against its manifest: the stale-passage
    rule alone takes ~3 s over the 12.3k base passages)."""
    sources = [wiki_summaries_path()]
    if name != "wiki":
        sources += [ASSETS / "leaders.csv", snapshots.snapshot_path(int(name), ASSETS)]
    passages, facts = _named_passages(
        name, tuple((str(p), p.stat().st_mtime_ns, p.stat().st_size) for p in sources)
    )
    return list(passages), dict(facts)


@lru_cache(maxsize=6)
def _named_passages(name: str, stamp: tuple) -> tuple[tuple[Passage, ...], tuple]:
    base = load_wiki()
    if name == "wiki":
        return tuple(base), (("base", len(base)),)
    stale = _stale(stamp[:2])  # the same for both years: the base and leaders.csv
    kept = [p for i, p in enumerate(base) if i not in stale]
    extra = [
        Passage(d["id"], d["title"], d["text"], d.get("topic", "World leaders"))
        for d in snapshots.load_snapshot(int(name), ASSETS)
    ]
    return tuple(kept + extra), (("base", len(base)), ("stale_removed", len(stale)), ("snapshot", len(extra)))


@lru_cache(maxsize=2)
def _stale(stamp: tuple) -> frozenset[int]:
    """Indices of the base passages both year indexes leave out (`snapshots.stale_base_passages`)."""
    leaders = snapshots.load_leaders(ASSETS / "leaders.csv")
    return frozenset(snapshots.stale_base_passages([p.to_dict() for p in load_wiki()], leaders))


def shipped_vectors_path(name: str) -> tuple[Path, Path]:
    """The shipped vectors (.npy) and their facts (.json) of `name`: "wiki" for the base corpus
    (float16), "2016" / "2018" for the passages that year's snapshot adds (float32, exactly what the
    encoder gives, so a year index built from them equals one built by encoding)."""
    stem = "wiki-minilm-f16" if name == "wiki" else f"leaders-{name}-minilm-f32"
    return ASSETS / "vectors" / f"{stem}.npy", ASSETS / "vectors" / f"{stem}.json"


def _vectors(name: str, passages: list[Passage], encoder: Encoder, progress: Progress) -> np.ndarray:
    """Vectors of `passages` (the base corpus, or a year's snapshot passages): the shipped ones when
    they were made for exactly these passages by this encoder, else a fresh encoding. (N, D)"""
    vectors, meta = shipped_vectors_path(name)
    if encoder.id == DEFAULT_ENCODER and vectors.is_file() and meta.is_file():
        facts = json.loads(meta.read_text())
        if facts.get("checksum") == passage_checksum(passages) and facts.get("encoder") == encoder.id:
            return np.load(vectors, allow_pickle=False).astype(np.float32)
    label = "" if name == "wiki" else f" of the {name} index"
    return encoder.encode_passages(passages, lambda m, f: progress(m + label, f))


def snapshot_passages(name: str) -> list[Passage]:
    """The passages a year index adds to the base corpus (its snapshot), in index order."""
    base_ids = {p.id for p in named_passages("wiki")[0]}
    return [p for p in named_passages(name)[0] if p.id not in base_ids]


def write_snapshot_vectors(name: str, encoder: Encoder) -> Path:
    """Encode a year's snapshot passages and write them where `_vectors` finds them (`make
    shipped-data` runs it for both years; tests/test_shipped.py says when the shipped ones no
    longer fit)."""
    passages = snapshot_passages(name)
    vectors = encoder.encode_passages(passages).astype(np.float32)  # (N_snapshot, D)
    npy, meta = shipped_vectors_path(name)
    write_npy_atomic(npy, vectors)
    write_json_atomic(
        meta,
        {
            "encoder": encoder.id,
            "checksum": passage_checksum(passages),
            "count": len(passages),
            "dim": int(vectors.shape[1]),
        },
        indent=1,
    )
    return npy


def write_base_vectors(encoder: Encoder, progress: Progress = lambda m, f: None) -> Path:
    """Encode the base corpus and write its float16 vectors where `_vectors` finds them (run it
    after the corpus or its chunking changes: `make shipped-data`)."""
    passages = load_wiki()
    t0 = time.perf_counter()
    vectors = encoder.encode_passages(passages, progress)  # (N_base, D)
    npy, meta = shipped_vectors_path("wiki")
    write_npy_atomic(npy, vectors.astype(np.float16))
    facts = {"encoder": encoder.id, "checksum": passage_checksum(passages), "count": len(passages)}
    write_json_atomic(
        meta, facts | {"dim": int(vectors.shape[1]), "seconds": time.perf_counter() - t0}, indent=1
    )
    return npy


def encode_named(name: str, encoder: Encoder, progress: Progress) -> tuple[np.ndarray, list[Passage]]:
    """The vectors of a named index's passages (N, D), from the shipped ones where they fit."""
    passages, _ = named_passages(name)
    base, _ = named_passages("wiki")
    found = {p.id: row for p, row in zip(base, _vectors("wiki", base, encoder, progress))}  # id -> (D,)
    if name != "wiki":
        extra = snapshot_passages(name)
        found.update(zip((p.id for p in extra), _vectors(name, extra, encoder, progress)))
    return np.stack([found[p.id] for p in passages]).astype(np.float32, copy=False), passages  # (N, D)


def named_folder(name: str, encoder: Encoder) -> Path:
    return caches.folder("indexes") / f"{name}-{_slug(encoder.id)}"


def load_named(name: str, encoder: Encoder, progress: Progress = _noop) -> PassageIndex:
    """Load a named index from the cache, building (and caching) it on first use."""
    if name not in NAMED:
        raise IndexLoadError(
            f"unknown index {name!r}; choose one of {', '.join(available_indexes())} or give a folder"
        )
    if name != "wiki" and not snapshots_available():
        raise IndexLoadError(f"index {name} needs the world-leader snapshots in assets/, which are missing")
    folder = named_folder(name, encoder)
    if (folder / "manifest.json").is_file():
        try:
            idx = PassageIndex.load(folder, encoder_id=encoder.id, dim=encoder.dim)
            passages, _ = named_passages(name)
            if idx.manifest.get("passages_checksum") == passage_checksum(passages):
                return idx
        except IndexLoadError:
            pass  # a stale or broken cache is rebuilt below
    progress(f"Building the {name} index", 0.0)
    vecs, passages = encode_named(name, encoder, progress)
    idx = PassageIndex.build(vecs, passages, encoder.id, FLAT, name=name)
    idx.manifest["passages_checksum"] = passage_checksum(passages)
    idx.save(folder)
    progress(f"The {name} index is ready", 1.0)
    return idx


def build_corpus_index(
    passages: list[Passage],
    encoder: Encoder,
    folder: Path,
    name: str = "",
    factory: str = FLAT,
    progress: Progress = _noop,
) -> PassageIndex:
    vecs = encoder.encode_passages(passages, progress)
    return save_corpus_index(
        PassageIndex.build(vecs, passages, encoder.id, factory, name=name or folder.name), folder
    )


def save_corpus_index(idx: PassageIndex, folder: Path) -> PassageIndex:
    """Write a corpus index with the manifest every build gives it (a local or a Ray build alike)."""
    idx.manifest["passages_checksum"] = passage_checksum(idx.passages)
    idx.save(folder)
    return idx


def corpus_cache_folder(passages: list[Passage], encoder: Encoder) -> Path:
    """Where `--corpus FILE` caches its index: keyed by the passages and the encoder."""
    return caches.folder("corpus-indexes") / f"{passage_checksum(passages)}-{_slug(encoder.id)}"


def resolve_index(spec: str | None, encoder: Encoder, progress: Progress = _noop) -> tuple[str, PassageIndex]:
    """An index by name (`wiki`, `2016`, `2018`, a user index), folder, or `hf-dataset:DIR[:INDEX_FILE]`
    (the Hugging Face datasets layout, `hf_index`); returns (display name, index)."""
    name = spec or default_index_name()
    if is_hf_spec(name):
        folder, index_file = parse_spec(name)
        return folder.name, load_hf_index(folder, index_file, encoder_id=encoder.id, dim=encoder.dim)
    if name in NAMED:
        return name, load_named(name, encoder, progress)
    if USER_NAME.match(name) and (user_root() / name).is_dir():
        return name, PassageIndex.load(user_root() / name, encoder_id=encoder.id, dim=encoder.dim)
    path = Path(name).expanduser()
    if path.is_dir():
        return path.name, PassageIndex.load(path, encoder_id=encoder.id, dim=encoder.dim)
    raise IndexLoadError(
        f"unknown index {name!r}: not one of {', '.join(available_indexes())}, not a folder "
        "and not hf-dataset:DIR[:INDEX_FILE]"
    )
