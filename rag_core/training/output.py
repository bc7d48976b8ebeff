"""The folder a training run writes, and the never-destroy rule for `--out`.

    DIR/training.json        the manifest: data file hash, settings, base model ids, loss curve, figures
    DIR/checkpoint.safetensors  the stop/resume checkpoint
    DIR/question_encoder/    loads with --question-encoder DIR/question_encoder  (part query or both)
    DIR/generator/           loads with --generator DIR/generator  (LoRA merged; part generator or both)
    DIR/generator/adapter/   the LoRA adapter alone, in peft's format

`--out` may name a new path, or an existing training output: continued with `--resume`, replaced
with `--force`. Any other existing path is refused before any work, and nothing is touched.

>>> import tempfile, pathlib
>>> new = pathlib.Path(tempfile.mkdtemp()) / "run"
>>> check_output_folder(new, force=False, resume=False)
'new'
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import time
from collections.abc import Callable, Sequence
from pathlib import Path

import numpy as np

from rag_core.pipeline import Models
from rag_core.storage.files import replace_dir, temp_sibling, write_json_atomic
from rag_core.training import checkpoint, lora
from rag_core.training.loop import Run
from rag_core.training.query import save_query_encoder

KIND = "rag-loupe-training"  # the manifest's mark: this folder is a training output
VERSION = 1
MANIFEST = "training.json"
QUESTION_ENCODER = "question_encoder"
GENERATOR = "generator"
ADAPTER = "adapter"


class TrainingError(ValueError):
    """A training run cannot start or continue as asked; the message says why."""


def file_sha256(path: str | Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def read_manifest(folder: str | Path) -> dict | None:
    """The manifest of a training output, or None when `folder` is not one."""
    try:
        data = json.loads((Path(folder) / MANIFEST).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    return data if isinstance(data, dict) and data.get("kind") == KIND else None


def check_output_folder(folder: str | Path, force: bool, resume: bool) -> str:
    """What a run may do at `folder`: "new", "resume" or "replace"; anything else raises TrainingError."""
    folder = Path(folder)
    if force and resume:
        raise TrainingError("--force (start afresh) and --resume (continue) exclude each other")
    if not folder.exists():
        if not folder.parent.is_dir():
            raise TrainingError(
                f"cannot write the training output to {folder}: {folder.parent} is not a folder"
            )
        if resume:
            raise TrainingError(f"nothing to resume: {folder} does not exist")
        return "new"
    if not folder.is_dir():
        raise TrainingError(f"{folder} is a file, not a training output: choose a new path")
    if read_manifest(folder) is None:
        raise TrainingError(
            f"{folder} already exists and is not a RAG Loupe training output: choose a new path "
            "(nothing was written)"
        )
    if resume:
        if not checkpoint.exists(folder):
            raise TrainingError(f"{folder} has no checkpoint to resume from: add --force to start afresh")
        return "resume"
    if not force:
        raise TrainingError(
            f"{folder} is an existing training output: add --resume to continue it or --force to replace it"
        )
    return "replace"


def start_folder(folder: str | Path, mode: str, manifest: dict) -> Path:
    """Make the folder ready for a run and mark it ours (`training.json`, status "running").

    "replace" removes the old output first; it was checked to be a training output."""
    folder = Path(folder)
    if mode == "replace":
        aside = folder.with_name(f".{folder.name}.old-{os.getpid()}-{time.time_ns()}")
        os.rename(folder, aside)  # one rename: the old output is gone from view at once
        shutil.rmtree(aside, ignore_errors=True)
    folder.mkdir(exist_ok=mode == "resume")
    write_manifest(folder, {**(read_manifest(folder) or {}), **manifest, "status": "running"})
    return folder


def write_manifest(folder: Path, manifest: dict) -> dict:
    """Write `training.json` (marked as ours); returns what was written."""
    data = {"kind": KIND, "version": VERSION, **manifest}
    write_json_atomic(Path(folder) / MANIFEST, data, indent=1)
    return data


def write_model_folder(folder: Path, name: str, save: Callable[[Path], None]) -> Path:
    """`save(tmp)` into a temporary sibling, then one rename over any previous copy: a killed save
    leaves the old folder (or none), never half a model."""
    target = Path(folder) / name
    tmp = temp_sibling(target)  # also tidies what a killed save left beside it
    try:
        save(tmp)
        replace_dir(tmp, target)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    return target


def save_outputs(run: Run, folder: Path) -> tuple[Models, dict]:
    """Write the trained parts as loadable folders; returns the trained models (the generator's
    adapters merged) and the manifest's `outputs` entry. The run's adapters are used up by the merge."""
    models, outputs = run.models, {}
    if "query" in run.settings.parts:
        write_model_folder(folder, QUESTION_ENCODER, lambda tmp: save_query_encoder(models.encoder, tmp))
        outputs["question_encoder"] = QUESTION_ENCODER
    if run.adapted is not None:
        adapted, run.adapted = run.adapted, None
        staged = temp_sibling(folder / ADAPTER)
        lora.save_adapter(adapted, staged)  # before the merge folds the adapter into the weights
        gen = lora.merged(adapted)

        def save_generator(tmp: Path) -> None:
            lora.save_generator(gen, tmp)
            os.rename(staged, tmp / ADAPTER)

        write_model_folder(folder, GENERATOR, save_generator)
        outputs["generator"] = GENERATOR
        models = Models(models.encoder, gen, models.device)
    return models, outputs


def loss_summary(losses: Sequence[float]) -> dict:
    """The loss curve in a few numbers: first and last step, and the means of the first and last tenth.

    >>> loss_summary([4.0, 3.0, 2.0, 1.0])["last_mean"]
    1.0
    """
    if not losses:
        return {"steps": 0}
    w = max(1, len(losses) // 10)
    return {
        "steps": len(losses),
        "first": losses[0],
        "last": losses[-1],
        "min": min(losses),
        "first_mean": float(np.mean(losses[:w])),
        "last_mean": float(np.mean(losses[-w:])),
        "window": w,
    }
