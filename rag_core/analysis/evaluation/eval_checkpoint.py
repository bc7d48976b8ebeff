"""An evaluation that survives being killed: the results so far, rewritten after every question.

A run's checkpoint is keyed by everything its answers depend on (the questions, the decoding
settings, the index's passages, the encoder and generator, the decoder's version), so a rerun of
the same evaluation, from the CLI or the app, continues where the killed one stopped, and a run
with anything changed starts afresh. Each write is atomic: a kill leaves the previous checkpoint.

>>> import tempfile, pathlib
>>> path = pathlib.Path(tempfile.mkdtemp()) / "k.json"
>>> save(path, "k", 12.0, []); load(path, "k")
(12.0, [])
>>> load(path, "another key")   # a checkpoint of other settings is not resumed
(None, [])
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import asdict
from pathlib import Path

from rag_core.analysis.evaluation.question_result import QuestionResult
from rag_core.analysis.evaluation.questions import EvalQuestion
from rag_core.config import AnswerSettings, StackSpec, answer_settings
from rag_core.decoding.decode import DECODER_VERSION
from rag_core.generators.fingerprint import prompt_fingerprint
from rag_core.models.model_keys import model_key
from rag_core.storage import caches
from rag_core.storage.files import write_json_atomic


def run_key(pipe, questions: list[EvalQuestion], settings: AnswerSettings, diagnose: bool) -> str:
    """A stable fingerprint of one evaluation (the pipeline's stack, the questions, the settings):
    the same inputs give the same key on any machine."""
    manifest = getattr(pipe.index, "manifest", {}) or {}
    parts = {
        "questions": [asdict(q) for q in questions],
        "settings": answer_settings(settings),
        "index": [pipe.index_name, manifest.get("passages_checksum"), manifest.get("encoder")],
        "encoder": pipe.models.encoder.id,
        "generator": pipe.models.generator.id,
        "prompt": prompt_fingerprint(
            pipe.stack.generator
        ),  # the same model under another prompt answers differently
        "decoder": DECODER_VERSION,
        "diagnose": diagnose,
    }
    models = {name: getattr(pipe.stack, name) for name in StackSpec.MODELS}
    if models != {name: getattr(StackSpec(), name) for name in StackSpec.MODELS}:
        # any other stack: each model by content (a run retrained at its path is another model), and
        # the query encoder by name (a tuned query tower shares the encoder id of its passage tower)
        parts["models"] = {name: model_key(value) for name, value in models.items()}
    return hashlib.sha256(json.dumps(parts, sort_keys=True, default=str).encode("utf-8")).hexdigest()[:20]


def default_path(key: str) -> Path:
    return caches.folder("eval") / "partial" / f"{key}.json"


def save(path: Path, key: str, started: float, results: list[QuestionResult]) -> None:
    write_json_atomic(path, {"key": key, "started": started, "results": [r.to_dict() for r in results]})


def load(path: Path, key: str) -> tuple[float | None, list[QuestionResult]]:
    """(start time, the results so far) of the run with this key; (None, []) when there is none,
    when it belongs to other settings, or when it cannot be read (it is then simply recomputed)."""
    try:
        data = json.loads(Path(path).read_text(encoding="utf-8"))
        if data.get("key") != key:
            return None, []
        return float(data["started"]), [QuestionResult.from_dict(d) for d in data["results"]]
    except (OSError, ValueError, KeyError, TypeError):
        return None, []


def discard(path: Path) -> None:
    Path(path).unlink(missing_ok=True)
