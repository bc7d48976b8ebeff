"""Where hot-swap results live: keys that fingerprint everything an answer depends on, the
per-position cache that lets a run resume, and the shipped reference run.

Results are cached under `cache_dir()/leaders/<key>/`, the key covering the models, both indexes'
passages, the prompt, the leaders file, the settings, the judge and the decoder. Positions are
appended to `rows.jsonl` as they finish, so an interrupted run resumes; `result.json` appears
when all are done. The reference run ships in `assets/leaders_run.json` under the same key, so the
Index swap page shows a table from the first start, and only while the key still matches.
"""

from __future__ import annotations

import hashlib
import json
import os
from dataclasses import asdict, dataclass, field
from functools import lru_cache
from pathlib import Path

import pandas as pd

from rag_core.config import ASSETS, DECODE_NAMES, AnswerSettings, StackSpec, answer_settings
from rag_core.corpus import passage_checksum
from rag_core.decoding.decode import DECODER_VERSION
from rag_core.generators.fingerprint import prompt_fingerprint
from rag_core.index_swap.judge import JUDGE_VERSION
from rag_core.index_swap.results import YEARS, ExperimentResult
from rag_core.models.model_keys import model_key
from rag_core.models.presets import PRESETS
from rag_core.retrieval.catalog import named_passages
from rag_core.retrieval.snapshots import load_leaders
from rag_core.storage import caches
from rag_core.storage.files import write_json_atomic

FORMAT_VERSION = 1  # bump when the cached record layout changes


def leaders_frame(limit: int | None = None) -> pd.DataFrame:
    frame = load_leaders(ASSETS / "leaders.csv")
    return frame.head(limit) if limit else frame


def _sha(obj) -> str:
    return hashlib.sha256(json.dumps(obj, sort_keys=True, ensure_ascii=False).encode("utf-8")).hexdigest()


@dataclass(frozen=True)
class Experiment:
    """One run of the index swap: the stack that answers and the settings it answers with (their
    index aside: the run searches both years' indexes).

    >>> Experiment().with_(decode="stuffed").settings.decode
    <Decode.STUFFED: 'stuffed'>
    """

    stack: StackSpec = field(default_factory=StackSpec)
    settings: AnswerSettings = field(default_factory=AnswerSettings)

    def with_(self, **changes) -> Experiment:
        """The same stack under changed answer settings."""
        return Experiment(self.stack, self.settings.with_(**changes))


def experiment_settings(settings: AnswerSettings) -> dict:
    """What the answers depend on, apart from models, indexes and prompt."""
    return answer_settings(settings) | {"decoder": DECODER_VERSION}


def experiment_key(exp: Experiment, index_checksums: dict[str, str]) -> str:
    """Cache key: model ids, both indexes' passage checksums, the prompt, leaders.csv, settings."""
    leaders_sha = hashlib.sha256((ASSETS / "leaders.csv").read_bytes()).hexdigest()
    stack = exp.stack
    parts = {
        "question_encoder": model_key(stack.question_encoder),
        "ctx_encoder": model_key(stack.ctx_encoder or stack.question_encoder),
        "generator": model_key(stack.generator),
        "indexes": index_checksums,
        "prompt": prompt_fingerprint(stack.generator),
        "leaders": leaders_sha,
        "settings": experiment_settings(exp.settings),
        "judge": JUDGE_VERSION,
        "format": FORMAT_VERSION,
    }
    return _sha(parts)[:20]


def index_checksums() -> dict[str, str]:
    """Checksums of the passages of the 2016 and 2018 indexes (no model needed; the same values
    as the built indexes' manifests). Memoised per version of the files they are built from."""
    stamp = tuple(
        os.stat(p).st_mtime_ns
        for p in [ASSETS / "leaders.csv"] + [ASSETS / "snapshots" / f"leaders_{y}.jsonl" for y in YEARS]
        if p.exists()
    )
    return dict(_index_checksums(stamp))


@lru_cache(maxsize=4)
def _index_checksums(stamp: tuple) -> tuple:
    return tuple((y, passage_checksum(named_passages(y)[0])) for y in YEARS)


def cache_folder(key: str) -> Path:
    return caches.folder("leaders") / key


def _read_rows(folder: Path) -> dict[str, dict]:
    """Per-position records already computed (a torn last line from a killed run is skipped)."""
    out = {}
    path = folder / "rows.jsonl"
    if not path.is_file():
        return out
    for line in path.read_text(encoding="utf-8").splitlines():
        try:
            rec = json.loads(line)
        except json.JSONDecodeError:
            continue
        out[rec["position"]] = rec
    return out


def assemble(records: list[dict], settings: dict, key: str, complete: bool) -> ExperimentResult:
    rows = [r for rec in records for r in rec["rows"]]
    closed = [rec["closed"] for rec in records]
    return ExperimentResult(
        rows, closed, settings, key, sum(rec.get("seconds", 0.0) for rec in records), complete
    )


def cached_result(
    exp: Experiment, checksums: dict[str, str] | None = None, limit: int | None = None, partial: bool = False
) -> ExperimentResult | None:
    """The cached result for these settings if every (first `limit`) position is in; else None.
    With `partial=True`, whatever positions are cached (None if none is): `complete` says which."""
    checksums = checksums or index_checksums()
    key = experiment_key(exp, checksums)
    folder = cache_folder(key)
    leaders = leaders_frame(limit)
    if limit is None and (folder / "result.json").is_file():
        try:
            return ExperimentResult.from_json(
                json.loads((folder / "result.json").read_text(encoding="utf-8"))
            )
        except (ValueError, TypeError):
            pass
    done = known_rows(exp, checksums)
    if partial:
        have = [p for p in leaders["position"] if p in done]
        return (
            assemble([done[p] for p in have], settings_of(exp), key, len(have) == len(leaders_frame()))
            if have
            else None
        )
    if not all(p in done for p in leaders["position"]):
        return None
    return assemble(
        [done[p] for p in leaders["position"]], settings_of(exp), key, len(leaders) == len(leaders_frame())
    )


def known_rows(exp: Experiment, checksums: dict[str, str]) -> dict[str, dict]:
    """Cached records for these settings; a one-marginal run also reuses a `decode="both"` run's (a
    run that reads stuffed does not: a `both` record holds no stuffed row)."""
    done = _read_rows(cache_folder(experiment_key(exp, checksums)))
    decode = exp.settings.decode
    wanted = DECODE_NAMES[decode]
    if decode != "both" and set(wanted) <= set(DECODE_NAMES["both"]):
        for pos, rec in _read_rows(cache_folder(experiment_key(exp.with_(decode="both"), checksums))).items():
            if pos not in done:
                done[pos] = {**rec, "rows": [r for r in rec["rows"] if r["decoding"] in wanted]}
    return done


def settings_of(exp: Experiment) -> dict:
    """The settings a result records: what its answers depend on, and the stack's two model ids."""
    stack = exp.stack
    return {
        **experiment_settings(exp.settings),
        "question_encoder": stack.question_encoder,
        "generator": stack.generator,
    }


# ------------------------------------------------------------------------------------------ shipped run
SHIPPED = (
    ASSETS / "leaders_run.json"
)  # the default stack's reference run, so the table shows from the first start
SHIPPED_BY_PRESET = {
    "default": SHIPPED,
    "base": ASSETS / "leaders_run_base.json",
}  # one reference run per shipped stack, in the paper's two marginals
STUFFED_SUFFIX = "_stuffed"  # its run in the stuffed reading ships beside it: leaders_run_stuffed.json
SHIPPED_READINGS = ("both", "stuffed")  # the Index swap page's two readings, as `AnswerSettings.decode`


def shipped_path(exp: Experiment) -> Path | None:
    """Where the reference run of the experiment's stack in its reading ships (the marginals, or
    the stuffed reading for `decode="stuffed"`), or None when that stack ships none.

    >>> shipped_path(Experiment().with_(decode="stuffed")).name
    'leaders_run_stuffed.json'
    """
    for name, path in SHIPPED_BY_PRESET.items():
        preset = StackSpec(**PRESETS[name])
        if all(getattr(exp.stack, f) == getattr(preset, f) for f in StackSpec.MODELS):
            return path.with_stem(path.stem + STUFFED_SUFFIX) if exp.settings.decode == "stuffed" else path
    return None


def write_shipped(result: ExperimentResult, path: Path = SHIPPED) -> Path:
    """Store a complete run as the shipped reference (its key is the fingerprint of models, prompt,
    snapshots, leaders.csv, settings, judge and decoder)."""
    if not result.complete:
        raise ValueError("only a complete run (every position) can be shipped")
    data = {**asdict(result), "shipped": True}
    write_json_atomic(path, data)
    return path


def overlay(live: ExperimentResult | None, shipped: ExperimentResult) -> ExperimentResult:
    """The shipped run with every position that has been recomputed live replaced by its live rows
    (a running or partial run shows its answers as they come; the rest stay the shipped ones)."""
    if live is None:
        return shipped
    fresh = {c["position"] for c in live.closed}
    rows = [r for r in shipped.rows if r["position"] not in fresh] + list(live.rows)
    closed = [c for c in shipped.closed if c["position"] not in fresh] + list(live.closed)
    return ExperimentResult(
        rows,
        closed,
        shipped.settings,
        shipped.key,
        shipped.elapsed_s,
        shipped.complete,
        shipped.created,
        shipped=len(fresh) < len(shipped.closed),
    )


def shipped_result(
    exp: Experiment, checksums: dict[str, str] | None = None, path: Path | None = None
) -> ExperimentResult | None:
    """The shipped reference run of the experiment's stack, if it was made with exactly these settings,
    models, prompt and data (its fingerprint equals the current key); None otherwise (then only a
    live run counts)."""
    path = path or shipped_path(exp)
    if path is None:
        return None
    try:
        data = json.loads(Path(path).read_text(encoding="utf-8"))
        result = ExperimentResult.from_json(data)
    except (OSError, ValueError, TypeError):
        return None
    if result.key != experiment_key(exp, checksums or index_checksums()):
        return None
    result.shipped = True
    return result
