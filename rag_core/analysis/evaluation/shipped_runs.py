"""The reference evaluation runs shipped with the app (`assets/eval/runs/`), so that the Eval page
has its tables, drill-down and comparison from the first start.

Each shipped run carries a fingerprint of everything its answers depend on: the encoder and
generator ids, the prompt, the questions file, the passages of its index, the decoding settings,
the decoder's and the judge's versions. A run whose fingerprint no longer equals the one the
current code and data give is stale: it is not offered (and a test fails until it is made again
with `python -m rag_core eval FILE --ship NAME`).

>>> sorted(run_config(AnswerSettings(k=1)))[:3]
['beams', 'decoder', 'early_stopping']
"""

from __future__ import annotations

import hashlib
import json
import os
from functools import lru_cache
from pathlib import Path

from rag_core.analysis.evaluation.runs import EvalRun
from rag_core.config import ASSETS, AnswerSettings, StackSpec, answer_settings
from rag_core.corpus import passage_checksum
from rag_core.decoding.decode import DECODER_VERSION
from rag_core.generators.fingerprint import prompt_fingerprint
from rag_core.models.presets import PRESETS
from rag_core.retrieval.catalog import NAMED, default_index_name, named_passages
from rag_core.storage.files import write_text_atomic

SHIPPED_RUNS = ASSETS / "eval" / "runs"
MODEL_FIELDS = StackSpec.MODELS  # the stack a shipped run was made with
SHIPPABLE_PRESETS = ("default", "base")  # the stacks whose reference runs ship (named `base-...` for base)
EVAL_VERSION = 1  # bump when exact match, the verdicts or a stored field of a run change meaning


def run_config(settings: AnswerSettings) -> dict:
    """The decoding settings a run's answers depend on (stored in the shipped file)."""
    # an eval run always decodes both marginals, so `decode` is named only when it also read the
    # passages stuffed (`eval --stuffed`): the other runs' fingerprints stay what they were
    stuffed = {"decode": settings.decode} if settings.decode == "all" else {}
    return (
        {name: v for name, v in answer_settings(settings).items() if name != "decode"}
        | stuffed
        | {"decoder": DECODER_VERSION}
    )


@lru_cache(maxsize=8)
def _index_checksum(name: str, stamp: tuple) -> str:
    return passage_checksum(named_passages(name)[0])


def index_checksum(name: str) -> str:
    """The checksum of a named index's passages, from the files it is built from (no model);
    memoised per version of those files."""
    files = [
        ASSETS / "leaders.csv",
        *sorted((ASSETS / "snapshots").glob("*.jsonl")),
    ]  # the base corpus is a package's
    stamp = tuple((str(p), os.stat(p).st_mtime_ns) for p in files if p.exists())
    return _index_checksum(name, stamp)


def fingerprint(stack: StackSpec, settings: AnswerSettings, questions_file: Path) -> str:
    """What a run of `questions_file` by `stack` under `settings` depends on, as one short hash."""
    name = settings.index or default_index_name()
    if name not in NAMED:
        raise ValueError(f"only runs on a named index ({', '.join(NAMED)}) can be shipped, not {name!r}")
    parts = {
        "question_encoder": stack.question_encoder,
        "ctx_encoder": stack.ctx_encoder or stack.question_encoder,
        "generator": stack.generator,
        "prompt": prompt_fingerprint(stack.generator),
        "index": [name, index_checksum(name)],
        "questions": hashlib.sha256(Path(questions_file).read_bytes()).hexdigest(),
        "settings": run_config(settings),
        "eval": EVAL_VERSION,
    }
    return hashlib.sha256(json.dumps(parts, sort_keys=True).encode("utf-8")).hexdigest()[:20]


def ship(
    run: EvalRun,
    stack: StackSpec,
    settings: AnswerSettings,
    questions_file: Path,
    name: str,
    folder: Path = SHIPPED_RUNS,
) -> Path:
    """Store a complete run of `questions_file` as the shipped reference `name`."""
    if not name.replace("-", "").replace("_", "").isalnum():
        raise ValueError(f"a shipped run's name is letters, digits, - and _, not {name!r}")
    stored = {
        "fingerprint": fingerprint(stack, settings, questions_file),
        "config": run_config(settings),
        "index": settings.index or default_index_name(),
        "file": _relative(questions_file),
        "models": models_of(stack),
    }
    path = Path(folder) / f"{name}.json"
    path.parent.mkdir(parents=True, exist_ok=True)
    write_text_atomic(path, json.dumps({**run.to_json(), "shipped": stored}, ensure_ascii=False, indent=1))
    return path


def _relative(path: Path) -> str:
    """The questions file as the project names it (`assets/eval/test.jsonl`), so any checkout matches."""
    path = Path(path).resolve()
    root = ASSETS.parent.resolve()
    return str(path.relative_to(root)) if path.is_relative_to(root) else str(path)


def models_of(stack: StackSpec) -> dict:
    return {name: getattr(stack, name) for name in MODEL_FIELDS}


def config_of(stored: dict) -> tuple[StackSpec, AnswerSettings]:
    """The stack a shipped run was made with (the default's when it names none) and its own
    answer settings."""
    models = {k: v for k, v in (stored.get("models") or {}).items() if k in MODEL_FIELDS}
    known = {name for name, _ in AnswerSettings().key()}
    decoding = {k: v for k, v in stored["config"].items() if k in known}
    return StackSpec(**models), AnswerSettings(index=stored["index"], **decoding)


def is_current(path: Path) -> bool:
    """Whether the shipped run at `path` is what the current code and data would compute."""
    try:
        stored = json.loads(Path(path).read_text(encoding="utf-8"))["shipped"]
        return stored["config"].get("decoder") == DECODER_VERSION and stored["fingerprint"] == fingerprint(
            *config_of(stored), ASSETS.parent / stored["file"]
        )
    except (OSError, ValueError, KeyError, TypeError):
        return False


def made_by(path: Path) -> StackSpec | None:
    """The stack of the shipped run at `path` (None when it cannot be read)."""
    try:
        return config_of(json.loads(Path(path).read_text(encoding="utf-8"))["shipped"])[0]
    except (OSError, ValueError, KeyError, TypeError):
        return None


def current_runs(folder: Path = SHIPPED_RUNS, stack: StackSpec | None = None) -> list[Path]:
    """The shipped runs of `stack` (default: the default stack) that are still current, by name,
    the larger K first (`test-k5`, `test-k1`). Another stack's runs are never offered as this one's."""
    want = models_of(stack or StackSpec())
    mine = [p for p in Path(folder).glob("*.json") if (c := made_by(p)) is not None and models_of(c) == want]
    return sorted((p for p in mine if is_current(p)), key=lambda p: p.stem, reverse=True)


def is_shipped(path: Path) -> bool:
    return Path(path).resolve().parent == SHIPPED_RUNS.resolve()


def before_after_pairs(folder: Path = SHIPPED_RUNS) -> list[tuple[Path, Path]]:
    """(untrained base's run, trained default's run) of the same questions and settings, both
    current: `base-test-k5.json` with `test-k5.json`. What training changed, ready to compare."""
    base = {p.stem.removeprefix("base-"): p for p in current_runs(folder, StackSpec(**PRESETS["base"]))}
    return [(base[p.stem], p) for p in current_runs(folder) if p.stem in base]
