"""The product's trained default: the packaged SmolLM2 with the shipped RAG-trained LoRA adapter
merged on, made once at first start and cached like the GGUF conversion.

The adapter (peft's format, a few MB) and its manifest live in `assets/adapters/smollm2-rag/`;
`python -m rag_core train ... --out DIR` made it (the manifest holds the exact command, the data's
sha256, the settings and the base's file hash). The merged model is cached under a name that
hashes the adapter's files, so a new adapter never meets an old merge; it is written to a
temporary folder and renamed, so a killed merge leaves nothing half-made.
"""

from __future__ import annotations

import hashlib
import shutil
from pathlib import Path

import torch

from rag_core.config import ADAPTER_DIR
from rag_core.generators.causal import PLAIN_STYLE
from rag_core.generators.prompt_style import write_prompt_style
from rag_core.models.sources import ModelSourceError
from rag_core.storage import caches
from rag_core.storage.files import replace_dir, temp_sibling

ADAPTER_FILES = ("adapter_config.json", "adapter_model.safetensors")


_ADAPTER_HASHES: dict[tuple, str] = {}  # the adapter files' (path, size, mtime) -> their hash


def adapter_hash(folder: Path = ADAPTER_DIR) -> str:
    """sha256 over the adapter's files (names and bytes), 16 hex digits. Read once per process and
    version of the files: every stack fingerprint asks for it, many times a page run, and the
    weights are megabytes."""
    paths = [folder / name for name in ADAPTER_FILES]
    stamps = tuple((str(p), s.st_size, s.st_mtime_ns) for p, s in ((p, p.stat()) for p in paths))
    if stamps not in _ADAPTER_HASHES:
        h = hashlib.sha256()
        for name, path in zip(ADAPTER_FILES, paths):
            h.update(name.encode() + b"\x00" + path.read_bytes())
        _ADAPTER_HASHES[stamps] = h.hexdigest()[:16]
    return _ADAPTER_HASHES[stamps]


def trained_folder(base: Path, progress=None, adapter: Path = ADAPTER_DIR) -> Path:
    """A transformers folder of `base` with `adapter` merged in, marked to read the plain prompt."""
    if not all((adapter / name).is_file() for name in ADAPTER_FILES):
        raise ModelSourceError(
            f"the trained adapter is missing from {adapter.name} in the assets "
            "(regenerate it with `make adapter`, or open the untrained stack with --preset base)"
        )
    target = caches.folder("models") / f"{base.name}-rag-{adapter_hash(adapter)}"
    if (target / "config.json").is_file() and (target / "model.safetensors").is_file():
        return target
    from peft import PeftModel
    from transformers import AutoModelForCausalLM, AutoTokenizer

    if progress:
        progress("Merging the trained RAG adapter onto SmolLM2 (once, a few seconds)")
    model = AutoModelForCausalLM.from_pretrained(base, dtype=torch.float32)
    model = PeftModel.from_pretrained(model, adapter).merge_and_unload()
    tok = AutoTokenizer.from_pretrained(base)
    tmp = temp_sibling(target)
    try:
        model.save_pretrained(tmp)
        tok.save_pretrained(tmp)
        write_prompt_style(tmp, PLAIN_STYLE)
        replace_dir(tmp, target)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    return target
