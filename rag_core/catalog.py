"""Named indexes and where they live: `wiki`, `2016`, `2018`, user-built ones, or any folder.

- `wiki`: the base corpus alone (Level-4 vital article summaries in 100-word passages).
- `2016` / `2018`: the base corpus less its stale passages (see `snapshots.stale_base_passages`)
  plus the world-leader passages written as of 31 December of that year.
Built indexes are cached under the cache folder; for the default encoder the base vectors come
from `assets/vectors/` (float16), so a fresh machine needs no 3-minute encoding pass.
"""
from __future__ import annotations

import json
import re
from pathlib import Path

import numpy as np

from . import caches, snapshots
from .config import ASSETS, DEFAULT_ENCODER, Progress
from .corpus import Passage, load_wiki, passage_checksum
from .encoders import Encoder
from .hf_index import is_hf_spec, load_hf_index, parse_spec
from .index import FLAT, IndexLoadError, PassageIndex

NAMED = ("wiki", "2016", "2018")
SHIPPED_VECTORS = ASSETS / "vectors" / "wiki-minilm-f16.npy"
SHIPPED_META = ASSETS / "vectors" / "wiki-minilm-f16.json"
USER_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}$")

def _noop(msg: str, frac: float) -> None:
    pass


def snapshots_available() -> bool:
    return (ASSETS / "leaders.csv").is_file() and all((ASSETS / "snapshots" / f"leaders_{y}.jsonl").is_file() for y in (2016, 2018))


def default_index_name() -> str:
    return "2018" if snapshots_available() else "wiki"


def available_indexes() -> list[str]:
    names = ["2018", "2016", "wiki"] if snapshots_available() else ["wiki"]
    # dot-folders are saves in progress (temp and old copies): never offer them
    return names + [p.name for p in sorted(user_root().glob("*")) if not p.name.startswith(".") and (p / "manifest.json").is_file()]


def user_root() -> Path:
    return caches.folder("user-indexes")


def _slug(encoder_id: str) -> str:
    return re.sub(r"[^A-Za-z0-9]+", "-", encoder_id).strip("-")[:60]


def named_passages(name: str) -> tuple[list[Passage], dict]:
    """The passages of a named index and facts about how they were chosen."""
    base = load_wiki()
    if name == "wiki":
        return base, {"base": len(base)}
    leaders = snapshots.load_leaders(ASSETS / "leaders.csv")
    stale = set(snapshots.stale_base_passages([p.to_dict() for p in base], leaders))
    kept = [p for i, p in enumerate(base) if i not in stale]
    extra = [Passage(d["id"], d["title"], d["text"], d.get("topic", "World leaders")) for d in snapshots.load_snapshot(int(name), ASSETS)]
    return kept + extra, {"base": len(base), "stale_removed": len(stale), "snapshot": len(extra)}


def _base_vectors(base: list[Passage], encoder: Encoder, progress: Progress) -> np.ndarray:
    """Vectors of the base corpus: shipped ones when they fit these passages and this encoder."""
    if encoder.id == DEFAULT_ENCODER and SHIPPED_VECTORS.is_file() and SHIPPED_META.is_file():
        meta = json.loads(SHIPPED_META.read_text())
        if meta.get("checksum") == passage_checksum(base) and meta.get("encoder") == encoder.id:
            return np.load(SHIPPED_VECTORS, allow_pickle=False).astype(np.float32)
    return encoder.encode_passages(base, progress)


def encode_named(name: str, encoder: Encoder, progress: Progress) -> tuple[np.ndarray, list[Passage]]:
    passages, _ = named_passages(name)
    base = load_wiki()
    base_vecs = _base_vectors(base, encoder, progress)  # (N_base, D)
    pos = {p.id: i for i, p in enumerate(base)}
    rows = [pos.get(p.id) for p in passages]
    extra = [p for p, r in zip(passages, rows) if r is None]
    extra_vecs = encoder.encode_passages(extra, lambda m, f: progress(f"{m} of the {name} index", f)) if extra else None
    out = np.zeros((len(passages), base_vecs.shape[1]), dtype=np.float32)
    j = 0
    for i, r in enumerate(rows):
        if r is None:
            out[i] = extra_vecs[j]
            j += 1
        else:
            out[i] = base_vecs[r]
    return out, passages


def named_folder(name: str, encoder: Encoder) -> Path:
    return caches.folder("indexes") / f"{name}-{_slug(encoder.id)}"


def load_named(name: str, encoder: Encoder, progress: Progress = _noop) -> PassageIndex:
    """Load a named index from the cache, building (and caching) it on first use."""
    if name not in NAMED:
        raise IndexLoadError(f"unknown index {name!r}; choose one of {', '.join(available_indexes())} or give a folder")
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


def build_corpus_index(passages: list[Passage], encoder: Encoder, folder: Path, name: str = "",
                       factory: str = FLAT, progress: Progress = _noop) -> PassageIndex:
    vecs = encoder.encode_passages(passages, progress)
    return save_corpus_index(PassageIndex.build(vecs, passages, encoder.id, factory, name=name or folder.name), folder)


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
    raise IndexLoadError(f"unknown index {name!r}: not one of {', '.join(available_indexes())}, not a folder "
                         "and not hf-dataset:DIR[:INDEX_FILE]")
