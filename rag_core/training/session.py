"""One fine-tuning run from a questions file to a finished output folder: the work `train` does on
the command line and the Train page's background job does in the app, written once.

`fine_tune` checks the output folder (the never-destroy rule of `output`) and a resume's data,
settings and base models before any model loads, measures the held-out file before and after, and
returns the manifest it wrote.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import os
import shutil
import time
from collections.abc import Callable
from pathlib import Path

from rag_core.analysis.evaluation.questions import read_questions
from rag_core.config import AnswerSettings, Progress, StackSpec
from rag_core.pipeline import load_pipeline
from rag_core.retrieval.catalog import resolve_index
from rag_core.retrieval.encoders import MeanPoolEncoder
from rag_core.storage.files import write_bytes_atomic
from rag_core.training import checkpoint, heldout
from rag_core.training.loop import TrainSettings, restore, settings_mismatch, start_run, train
from rag_core.training.output import (
    TrainingError,
    check_output_folder,
    file_sha256,
    loss_summary,
    read_manifest,
    save_outputs,
    start_folder,
    write_manifest,
)


def data_sha256(files: list[Path]) -> str:
    """The training data's hash: the file's own sha256 for one file; for several, the sha256 of
    their hashes in order (a change to any file, or to the order, changes it)."""
    if len(files) == 1:
        return file_sha256(files[0])
    return hashlib.sha256(" ".join(file_sha256(f) for f in files).encode()).hexdigest()


def base_models(stack: StackSpec) -> dict:
    return {
        "question_encoder": stack.question_encoder,
        "ctx_encoder": stack.ctx_encoder,
        "generator": stack.generator,
    }


def check_resume(out: Path, data_hash: str, settings: TrainSettings, base: dict) -> None:
    """Refuse, before any model loads, a resume whose data, settings or base models differ."""
    saved = read_manifest(out) or {}
    if saved.get("data", {}).get("sha256") != data_hash:
        raise TrainingError(
            f"{out} was trained on another questions file (its hash differs): "
            "resume with the same file, or start afresh with --force"
        )
    why = settings_mismatch(saved.get("settings", {}), settings)
    if why:
        raise TrainingError(why)
    if saved.get("base") != base:
        raise TrainingError(
            f"{out} was trained from other base models ({saved.get('base')}): resume with the same ones"
        )


def training_data(questions_file: str | Path | list) -> tuple[list, dict]:
    """The questions of one file, or of a list read one after the other, and what the manifest
    records of them (names, hashes, counts)."""
    many = isinstance(questions_file, (list, tuple))
    files = [Path(f) for f in (questions_file if many else [questions_file])]
    read = [read_questions(str(f)) for f in files]
    questions, skipped = [q for qs, _ in read for q in qs], sum(n for _, n in read)
    data = {
        "file": " + ".join(f.name for f in files),
        "sha256": data_sha256(files),
        "questions": len(questions),
        "skipped": skipped,
    }
    if len(files) > 1:
        data["files"] = [
            {"file": f.name, "sha256": file_sha256(f), "questions": len(qs)}
            for f, (qs, _) in zip(files, read)
        ]
    return questions, data


SINGLE_TOWER_NOTE = (
    "the base encoder reads queries and passages with one tower; loaded with --question-encoder, "
    "the tuned tower would encode the passages too, while training kept the base passage vectors"
)


def fine_tune(
    stack: StackSpec,
    answering: AnswerSettings,
    settings: TrainSettings,
    questions_file: str | Path | list,
    out: str | Path,
    eval_file: str | Path | None = None,
    force: bool = False,
    resume: bool = False,
    progress: Progress | None = None,
    should_stop: Callable[[], bool] | None = None,
    on_step: Callable[[int, float], None] | None = None,
    corpus: str | None = None,
) -> dict:
    """Train `stack` on `questions_file` (one file, or a list read one after the other) into `out`;
    the manifest (status "done" or "stopped"). `answering`: the index the questions search (or the
    `corpus` file, indexed) and how the held-out `eval_file` is answered.
    `should_stop` is asked before each step; `on_step(step, loss)` hears each step's loss."""
    settings = settings.validate()
    out = Path(out)
    mode = check_output_folder(out, force, resume)  # refuse a folder that is not ours before any work
    questions, data = training_data(questions_file)
    held = read_questions(str(eval_file))[0] if eval_file else None
    if mode == "resume":
        check_resume(out, data["sha256"], settings, base_models(stack))
    pipe = load_pipeline(stack, answering, progress, corpus)
    before = heldout.evaluate(pipe, held, progress) if held else None
    named = sorted({q.index for q in questions if q.index and q.index != pipe.index_name})
    indexes = {
        name: resolve_index(name, pipe.models.encoder, progress or (lambda m, f: None))[1] for name in named
    }
    session = start_run(pipe.models, pipe.index, questions, settings, indexes)
    manifest = {
        **settings.to_dict(),
        "lr": {p: settings.lr_of(p) for p in settings.parts},
        "data": data,
        "settings": settings.to_dict(),
        "base": base_models(stack),
        "index": pipe.index_name,
        "device": pipe.models.device.type,
    }
    start_folder(out, mode, manifest)
    if mode == "resume":
        restore(session, checkpoint.load(out))
    stopped = train(session, out, progress, should_stop, on_step)
    trained, outputs = save_outputs(session, out)
    after = None
    if held and not stopped:
        after = heldout.evaluate(dataclasses.replace(pipe, models=trained), held, progress)
    manifest.update(
        status="stopped" if stopped else "done",
        steps_done=session.step,
        seconds=round(session.seconds, 1),
        loss=loss_summary(session.losses),
        losses=session.losses,
        outputs=outputs,
    )
    if held:
        manifest["heldout"] = {
            "file": Path(eval_file).name,
            "sha256": file_sha256(eval_file),
            "before": before.to_dict(),
            "after": after.to_dict() if after else None,
        }
    if isinstance(pipe.models.encoder, MeanPoolEncoder) and "question_encoder" in outputs:
        manifest["note"] = SINGLE_TOWER_NOTE
    return write_manifest(out, manifest)


def run_folder(
    base: str | Path, settings: TrainSettings, data_sha256: str, stack: StackSpec, index: str | None
) -> Path:
    """Where the app keeps the run of these settings on this data, these models and this index:
    the same inputs always name the same folder, so starting them again resumes (or shows) that run.

    >>> run_folder("/tmp", TrainSettings(steps=20), "ab" * 32, StackSpec(), None).name[:24]
    'query-sequence-k5-s20-lr'
    """
    key = json.dumps([settings.to_dict(), data_sha256, base_models(stack), index], sort_keys=True)
    lr = "-".join(f"{settings.lr_of(p):g}" for p in settings.parts)
    return Path(base) / (
        f"{settings.part}-{settings.marginal}-k{settings.k}-s{settings.steps}-lr{lr}-"
        f"{hashlib.sha256(key.encode()).hexdigest()[:10]}"
    )


def run_state(folder: str | Path) -> str:
    """What starting the run at `folder` would do: "new", "resume" (a stopped or killed run with a
    checkpoint), "replace" (begun, but killed before its first checkpoint), "done", or "damaged"
    (the folder is there but its manifest cannot be read: `discard_damaged` clears the way).

    >>> import tempfile; base = Path(tempfile.mkdtemp())
    >>> run_state(base / "none"), run_state(base)
    ('new', 'damaged')
    """
    folder = Path(folder)
    manifest = read_manifest(folder)
    if manifest is None:
        return "damaged" if folder.exists() else "new"
    if manifest.get("status") == "done":
        return "done"
    return "resume" if checkpoint.exists(Path(folder)) else "replace"


def keep_upload(base: str | Path, data: bytes) -> Path:
    """An uploaded questions file kept under `base/uploads`, named by its content (the same upload
    is the same file, so its runs resume); written atomically."""
    folder = Path(base) / "uploads"
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / f"{hashlib.sha256(data).hexdigest()[:16]}.jsonl"
    if not path.is_file():
        write_bytes_atomic(path, data)
    return path


def discard_damaged(folder: str | Path) -> None:
    """Remove a run folder of the app's own cache whose manifest cannot be read (a torn write), so
    the run starts afresh; renamed away first, so no reader sees half of it. Only a folder that
    `run_state` calls "damaged" is touched."""
    folder = Path(folder)
    if run_state(folder) != "damaged":
        raise TrainingError(f"{folder} is not a damaged training run: left as it is")
    aside = folder.with_name(f".{folder.name}.damaged-{time.time_ns()}")
    os.rename(folder, aside)
    shutil.rmtree(aside, ignore_errors=True)
