"""The index hot-swap experiment of the RAG paper (Lewis et al. 2020, §4.5), on any model stack.

One frozen model, two indexes (`2016`, `2018`: the same base passages plus world-leader passages
written as of 31 December of that year), and for each position of `assets/leaders.csv` the
question "Who is {position}?". Every question is answered on both indexes, swapped under the same
loaded models (`Pipeline.with_index`, no reload), with RAG-Token and RAG-Sequence decoded from one
prepared state per (position, index); and once closed-book (no passage), to see what the
generator "knows" by itself.

An answer is correct for a year when it names that year's holder (`names_holder`). The result is
a 2×2 table per decoding: rows = the index, columns = the leaders' year; the diagonal is matched
accuracy (the paper: 70% on 2016/2016, 68% on 2018/2018), the off-diagonal mismatched accuracy
(12% for the 2018 index asked for 2016 leaders, 4% for the 2016 index asked for 2018 leaders).

Results are cached under `cache_dir()/leaders/<key>/`, the key covering the models, both indexes'
passages, the prompt, the leaders file and the settings. Positions are appended to `rows.jsonl`
as they finish, so an interrupted run resumes; `result.json` appears when all are done.

>>> names_holder("The president is Sebastián Piñera.", "Sebastián Piñera")
True
>>> names_holder("Michelle Bachelet", "Sebastián Piñera")
False
>>> judge("Pravind Jugnauth", "Anerood Jugnauth", "Pravind Jugnauth")  # same surname: first names decide
(False, True, False)
"""
from __future__ import annotations

import hashlib
import json
import math
import os
import re
import tempfile
import time
from dataclasses import asdict, dataclass, field
from functools import lru_cache
from pathlib import Path
from typing import Callable, Iterable

import pandas as pd

from .config import ASSETS, Config, cache_dir
from .decoding import DECODER_VERSION
from .snapshots import fold, load_leaders

YEARS = ("2016", "2018")
DECODINGS = ("rag-token", "rag-sequence")
DECODE_NAMES = {"token": ("rag-token",), "sequence": ("rag-sequence",), "both": DECODINGS}
JUDGE_VERSION = 2  # bump when the judge changes: cached results are keyed by it (2: "ambiguous")
FORMAT_VERSION = 1  # bump when the cached record layout changes

# The paper's Table (§4.5): accuracy by (index year, leaders year), RAG on Natural Questions models.
PAPER = {("2016", "2016"): 0.70, ("2018", "2018"): 0.68, ("2018", "2016"): 0.12, ("2016", "2018"): 0.04}
# The goal this project set itself: beat the paper on both diagonals and both off-diagonals.
GOAL_MATCHED = 0.80
GOAL_MISMATCHED = 0.10

ROW_COLUMNS = ["position", "country", "holder_2016", "holder_2018", "question", "index", "decoding", "answer",
               "correct_2016", "correct_2018", "p_answer", "closed_book", "passages_name_2016",
               "passages_name_2018", "top_passage", "ambiguous", "split"]
SPLITS = ("tune", "test")  # prompt and settings are chosen on "tune"; results are reported on "test"

Progress = Callable[[str, float], None]  # (message, fraction done)

_SUFFIXES = {"jr", "sr", "ii", "iii", "iv"}
_LEFT, _RIGHT = r"(?<![\w-])", r"(?![\w-])"  # whole words; a hyphenated name is one word


# ------------------------------------------------------------------------------------------ judge

def _tokens(name: str) -> list[str]:
    """Folded, lower-case words of a name without generational suffixes.

    >>> _tokens("John King Jr."), _tokens("Milo Đukanović")
    (['john', 'king'], ['milo', 'dukanovic'])
    """
    words = [w.strip(".,").lower() for w in fold(name).split()]
    return [w for w in words if w and w not in _SUFFIXES]


def _has_words(text: str, words: Iterable[str]) -> bool:
    """Whether the words occur in `text` together, in order, as whole words (case/accents ignored)."""
    words = list(words)
    if not words:
        return False
    pattern = _LEFT + r"\s+".join(re.escape(w) for w in words) + _RIGHT
    return re.search(pattern, fold(text).lower()) is not None


def names_holder(text: str, name: str, other: str | None = None) -> bool:
    """Whether `text` names the person `name`: the full name, or its last word (the surname).

    The surname is the last word of the name with "Jr."/"Sr."/"II" dropped, so multi-word
    surnames count by their last word ("López Obrador" names "Andrés Manuel López Obrador"; so
    does "Obrador"). Accents and case are ignored; matches are whole words, a hyphenated name
    being one word ("Zuma" does not name "Nkosazana Dlamini-Zuma"). When `other` (the other
    year's holder) has the same last word, the surname says nothing: a word of `name` that
    `other` lacks must appear too ("Anerood Jugnauth" vs "Pravind Jugnauth").

    >>> names_holder("Andrés Manuel López Obrador", "Andres Manuel Lopez Obrador")
    True
    >>> names_holder("Lopez Obrador", "Andrés Manuel López Obrador"), names_holder("Trumpet", "Donald Trump")
    (True, False)
    >>> names_holder("John King", "John King Jr."), names_holder("Jacob Zuma", "Nkosazana Dlamini-Zuma")
    (True, False)
    """
    if not isinstance(text, str) or not text.strip():
        return False
    words = _tokens(name)
    if not words:
        return False
    if _has_words(text, words):
        return True
    surname = words[-1]
    if not _has_words(text, [surname]):
        return False
    other_words = _tokens(other) if other else []
    if other_words and other_words[-1] == surname:
        distinct = [w for w in words[:-1] if w not in other_words]
        return any(_has_words(text, [w]) for w in distinct)
    return True


def judge(answer: str, holder_2016: str, holder_2018: str) -> tuple[bool, bool, bool]:
    """(right for 2016, right for 2018, ambiguous) for one answer.

    An answer that names both years' holders is ambiguous: right in neither cell, counted apart.

    >>> judge("Barack Obama", "Barack Obama", "Donald Trump")
    (True, False, False)
    >>> judge("Obama, then Trump", "Barack Obama", "Donald Trump")
    (False, False, True)
    """
    n16, n18 = names_holder(answer, holder_2016, holder_2018), names_holder(answer, holder_2018, holder_2016)
    return (n16 and not n18, n18 and not n16, n16 and n18)


def position_split(position: str) -> str:
    """The fixed half a position belongs to, from a stable hash of its name (80 tune, 84 test).

    >>> position_split("President of the United States") in SPLITS
    True
    """
    return SPLITS[int(hashlib.sha256(f"split:{position}".encode("utf-8")).hexdigest(), 16) % 2]


# ------------------------------------------------------------------------------------------ results

@dataclass
class ExperimentResult:
    """All answers of one run: `rows` one per (position, index, decoding); `closed` one per position."""

    rows: list[dict]
    closed: list[dict]
    settings: dict
    key: str
    elapsed_s: float = 0.0  # compute time summed over the positions (cached ones included)
    complete: bool = False  # every position of leaders.csv is in
    created: str = field(default_factory=lambda: time.strftime("%Y-%m-%dT%H:%M:%S"))
    shipped: bool = False  # the reference run shipped in assets/, not computed on this machine

    @property
    def positions(self) -> int:
        return len(self.closed)

    def frame(self) -> pd.DataFrame:
        frame = pd.DataFrame(self.rows, columns=ROW_COLUMNS)
        frame["split"] = [position_split(p) for p in frame["position"]]  # fixed by the name, never stored wrong
        frame["ambiguous"] = frame["ambiguous"].fillna(False).astype(bool)
        return frame

    def decodings(self) -> list[str]:
        return [d for d in DECODINGS if any(r["decoding"] == d for r in self.rows)]

    def table(self, decoding: str, split: str | None = None, column: str = "correct") -> pd.DataFrame:
        """Accuracy 2×2: rows 'index 2016'/'index 2018', columns 'leaders 2016'/'leaders 2018'.

        `split`: "tune" or "test" for one half of the positions, None for all. `column="ambiguous"`
        gives the share of answers naming both holders instead (the same in both columns)."""
        frame = self.frame()
        frame = frame[frame["decoding"] == decoding]
        if split is not None:
            frame = frame[frame["split"] == split]
        out = pd.DataFrame(index=[f"index {y}" for y in YEARS], columns=[f"leaders {y}" for y in YEARS], dtype=float)
        for idx in YEARS:
            part = frame[frame["index"] == idx]
            for year in YEARS:
                col = "ambiguous" if column == "ambiguous" else f"correct_{year}"
                out.loc[f"index {idx}", f"leaders {year}"] = float(part[col].astype(bool).mean()) if len(part) else math.nan
        return out

    def closed_book_accuracy(self) -> dict[str, float]:
        frame = pd.DataFrame(self.closed)
        if frame.empty:
            return {y: math.nan for y in YEARS}
        return {y: float(frame[f"correct_{y}"].mean()) for y in YEARS}

    def goal_met(self, decoding: str, split: str | None = "test") -> bool:
        """The goal, judged on the held-out half by default."""
        t = self.table(decoding, split)
        matched = [t.loc[f"index {y}", f"leaders {y}"] for y in YEARS]
        mismatched = [t.loc["index 2016", "leaders 2018"], t.loc["index 2018", "leaders 2016"]]
        return all(m >= GOAL_MATCHED for m in matched) and all(m <= GOAL_MISMATCHED for m in mismatched)

    def summary(self) -> pd.DataFrame:
        """One row per (decoding, index, leaders year): measured accuracy beside the paper's."""
        rows = []
        for d in self.decodings():
            t = self.table(d)
            for idx in YEARS:
                for year in YEARS:
                    rows.append({"decoding": d, "index": idx, "leaders": year,
                                 "accuracy": t.loc[f"index {idx}", f"leaders {year}"], "paper": PAPER[(idx, year)]})
        return pd.DataFrame(rows)

    def override(self, decoding: str) -> dict[str, int]:
        """Where the generator's memory beats the passages: counts over the positions.

        - `other_year`: the answer names the other year's holder and not this index's;
        - `other_year_in_passages`: ... and a retrieved passage names that holder (copied from the
          passages, e.g. "X succeeded Y", rather than recalled from the generator's own memory);
        - `other_year_closed_book`: ... and the closed-book answer names that same holder;
        - `passages_lack_holder`: the K passages never name this index's holder (a retrieval miss);
        - `ambiguous`: the answer names both holders (right in neither cell);
        - `neither`: the answer names neither holder.
        """
        closed = {c["position"]: c for c in self.closed}
        out = {"other_year": 0, "other_year_in_passages": 0, "other_year_closed_book": 0, "passages_lack_holder": 0,
               "neither": 0, "ambiguous": 0, "total": 0}
        for r in self.rows:
            if r["decoding"] != decoding:
                continue
            mine, other = r["index"], YEARS[1 - YEARS.index(r["index"])]
            out["total"] += 1
            out["passages_lack_holder"] += int(r[f"passages_name_{mine}"] == 0)
            if r[f"correct_{other}"] and not r[f"correct_{mine}"]:
                out["other_year"] += 1
                out["other_year_in_passages"] += int(r[f"passages_name_{other}"] > 0)
                out["other_year_closed_book"] += int(bool(closed.get(r["position"], {}).get(f"correct_{other}")))
            if r.get("ambiguous"):
                out["ambiguous"] += 1
            elif not r["correct_2016"] and not r["correct_2018"]:
                out["neither"] += 1
        return out

    def finding(self, decoding: str) -> str:
        """One sentence on where the wrong answers come from, from `override`'s counts.

        Memory overriding the index would show as wrong answers that the closed-book model also
        gives; answers copied from the passages show as the other holder named in a retrieved one.
        """
        o = self.override(decoding)
        cb = self.closed_book_accuracy()
        if not o["other_year"]:
            return "No answer names the other year's holder: the answers follow the index."
        copied, memory = o["other_year_in_passages"], o["other_year_closed_book"]
        text = (f"{o['other_year']} of {o['total']} answers name the other year's holder; "
                f"{copied} of those copy a name that a retrieved passage contains, and {memory} match the "
                f"closed-book answer (which names the 2016 holder {100 * cb['2016']:.0f}% and the 2018 holder "
                f"{100 * cb['2018']:.0f}% of the time). ")
        if copied >= max(1, 2 * memory):
            text += "Most of them copy the other holder from the retrieved passages rather than from the model's memory."
        elif memory >= max(1, 2 * copied):
            text += "Most of them agree with the closed-book answer: the model's memory overrides the passages."
        else:
            text += "Neither copying from the passages nor the model's memory accounts for most of them."
        if o["ambiguous"]:
            text += f" {o['ambiguous']} answers name both holders and count as right in neither cell."
        return text

    def failures(self, decoding: str | None = None) -> pd.DataFrame:
        """Rows whose answer misses this index's holder."""
        frame = self.frame()
        if decoding:
            frame = frame[frame["decoding"] == decoding]
        ok = [bool(r[f"correct_{r['index']}"]) for _, r in frame.iterrows()]
        return frame[[not o for o in ok]] if len(frame) else frame

    def to_csv(self, path) -> None:
        from .trace import spreadsheet_safe

        spreadsheet_safe(self.frame()).to_csv(path, index=False)

    def to_json(self) -> dict:
        return asdict(self)

    @classmethod
    def from_json(cls, data: dict) -> "ExperimentResult":
        return cls(**data)


# ------------------------------------------------------------------------------------------ shipped run
SHIPPED = ASSETS / "leaders_run.json"  # the reference run's rows, so the table shows from the first start


def write_shipped(result: ExperimentResult, path: Path = SHIPPED) -> Path:
    """Store a complete run as the shipped reference (its key is the fingerprint of models, prompt,
    snapshots, leaders.csv, settings, judge and decoder)."""
    if not result.complete:
        raise ValueError("only a complete run (every position) can be shipped")
    data = {**asdict(result), "shipped": True}
    _write_json_atomic(path, data)
    return path


def overlay(live: ExperimentResult | None, shipped: ExperimentResult) -> ExperimentResult:
    """The shipped run with every position that has been recomputed live replaced by its live rows
    (a running or partial run shows its answers as they come; the rest stay the shipped ones)."""
    if live is None:
        return shipped
    fresh = {c["position"] for c in live.closed}
    rows = [r for r in shipped.rows if r["position"] not in fresh] + list(live.rows)
    closed = [c for c in shipped.closed if c["position"] not in fresh] + list(live.closed)
    return ExperimentResult(rows, closed, shipped.settings, shipped.key, shipped.elapsed_s, shipped.complete,
                            shipped.created, shipped=len(fresh) < len(shipped.closed))


def shipped_result(cfg: Config, checksums: dict[str, str] | None = None, path: Path = SHIPPED) -> ExperimentResult | None:
    """The shipped reference run, if it was made with exactly these settings, models, prompt and
    data (its fingerprint equals the current key); None otherwise (then only a live run counts)."""
    try:
        data = json.loads(Path(path).read_text(encoding="utf-8"))
        result = ExperimentResult.from_json(data)
    except (OSError, ValueError, TypeError):
        return None
    if result.key != experiment_key(cfg, checksums or index_checksums()):
        return None
    result.shipped = True
    return result


# ------------------------------------------------------------------------------------------ cache key

def leaders_frame(limit: int | None = None) -> pd.DataFrame:
    frame = load_leaders(ASSETS / "leaders.csv")
    return frame.head(limit) if limit else frame


def _sha(obj) -> str:
    return hashlib.sha256(json.dumps(obj, sort_keys=True, ensure_ascii=False).encode("utf-8")).hexdigest()


def prompt_fingerprint() -> str:
    """The generators' prompts rendered on a placeholder, so a prompt change makes a new cache key."""
    from .corpus import Passage
    from .generators import causal, seq2seq

    p = Passage("{id}", "{title}", "{text}")
    parts = [causal.rag_prompt("{question}", p), causal.closed_book_prompt("{question}"),
             seq2seq.rag_input("{question}", p), seq2seq.rag_input("{question}", None)]
    return _sha(parts)[:16]


def experiment_settings(cfg: Config) -> dict:
    """What the answers depend on, apart from models, indexes and prompt."""
    return {"k": cfg.k, "scale": cfg.scale, "beams": cfg.beams, "max_new_tokens": cfg.max_new_tokens,
            "length_penalty": cfg.length_penalty, "early_stopping": cfg.early_stopping,
            "rescore": cfg.rescore, "decode": cfg.decode, "decoder": DECODER_VERSION}


def experiment_key(cfg: Config, index_checksums: dict[str, str]) -> str:
    """Cache key: model ids, both indexes' passage checksums, the prompt, leaders.csv, settings."""
    leaders_sha = hashlib.sha256((ASSETS / "leaders.csv").read_bytes()).hexdigest()
    parts = {"question_encoder": cfg.question_encoder, "ctx_encoder": cfg.ctx_encoder or cfg.question_encoder,
             "generator": cfg.generator, "indexes": index_checksums, "prompt": prompt_fingerprint(),
             "leaders": leaders_sha, "settings": experiment_settings(cfg), "judge": JUDGE_VERSION,
             "format": FORMAT_VERSION}
    return _sha(parts)[:20]


def index_checksums() -> dict[str, str]:
    """Checksums of the passages of the 2016 and 2018 indexes (no model needed; the same values
    as the built indexes' manifests). Memoised per version of the files they are built from."""
    stamp = tuple(os.stat(p).st_mtime_ns for p in [ASSETS / "leaders.csv"] +
                  [ASSETS / "snapshots" / f"leaders_{y}.jsonl" for y in YEARS] if p.exists())
    return dict(_index_checksums(stamp))


@lru_cache(maxsize=4)
def _index_checksums(stamp: tuple) -> tuple:
    from .catalog import named_passages
    from .corpus import passage_checksum

    return tuple((y, passage_checksum(named_passages(y)[0])) for y in YEARS)


def cache_folder(key: str) -> Path:
    return cache_dir() / "leaders" / key


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


def _write_json_atomic(path: Path, data) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", dir=path.parent)
    with os.fdopen(fd, "w", encoding="utf-8") as f:
        json.dump(data, f, ensure_ascii=False)
    os.replace(tmp, path)


def _assemble(records: list[dict], settings: dict, key: str, complete: bool) -> ExperimentResult:
    rows = [r for rec in records for r in rec["rows"]]
    closed = [rec["closed"] for rec in records]
    return ExperimentResult(rows, closed, settings, key, sum(rec.get("seconds", 0.0) for rec in records), complete)


def cached_result(cfg: Config, checksums: dict[str, str] | None = None, limit: int | None = None,
                  partial: bool = False) -> ExperimentResult | None:
    """The cached result for these settings if every (first `limit`) position is in; else None.
    With `partial=True`, whatever positions are cached (None if none is): `complete` says which."""
    checksums = checksums or index_checksums()
    key = experiment_key(cfg, checksums)
    folder = cache_folder(key)
    leaders = leaders_frame(limit)
    if limit is None and (folder / "result.json").is_file():
        try:
            return ExperimentResult.from_json(json.loads((folder / "result.json").read_text(encoding="utf-8")))
        except (ValueError, TypeError):
            pass
    done = _known_rows(cfg, checksums)
    if partial:
        have = [p for p in leaders["position"] if p in done]
        return _assemble([done[p] for p in have], _settings_of(cfg), key, len(have) == len(leaders_frame())) if have else None
    if not all(p in done for p in leaders["position"]):
        return None
    return _assemble([done[p] for p in leaders["position"]], _settings_of(cfg), key, len(leaders) == len(leaders_frame()))


def _known_rows(cfg: Config, checksums: dict[str, str]) -> dict[str, dict]:
    """Cached records for these settings; a one-decoding run also reuses a `decode="both"` run's."""
    done = _read_rows(cache_folder(experiment_key(cfg, checksums)))
    if cfg.decode != "both":
        wanted = DECODE_NAMES[cfg.decode]
        for pos, rec in _read_rows(cache_folder(experiment_key(cfg.with_(decode="both"), checksums))).items():
            if pos not in done:
                done[pos] = {**rec, "rows": [r for r in rec["rows"] if r["decoding"] in wanted]}
    return done


def _settings_of(cfg: Config) -> dict:
    return {**experiment_settings(cfg), "question_encoder": cfg.question_encoder, "generator": cfg.generator}


# ------------------------------------------------------------------------------------------ the run

def _answer_rows(trace, leader: dict, cfg: Config) -> list[dict]:
    """The judged rows of one trace (one position on one index), one per decoding."""
    h16, h18 = leader["holder_2016"], leader["holder_2018"]
    base = {k: leader[k] for k in ("position", "country", "holder_2016", "holder_2018", "question")}
    blobs = [h.passage.title + "\n" + h.passage.text for h in trace.hits]
    named = {"2016": sum(names_holder(b, h16, h18) for b in blobs), "2018": sum(names_holder(b, h18, h16) for b in blobs)}
    rows = []
    for decoding in DECODE_NAMES[cfg.decode]:
        best = trace.answer(decoding)
        answer = best.answer if best is not None else ""
        logp = -math.inf
        if best is not None:
            logp = best.log_p_tok(trace.log_prior) if decoding == "rag-token" else best.log_p_seq(trace.log_prior)
        c16, c18, both = judge(answer, h16, h18)
        rows.append({**base, "index": trace.index, "decoding": decoding, "answer": answer, "correct_2016": c16,
                     "correct_2018": c18, "ambiguous": both, "split": position_split(leader["position"]), "p_answer": math.exp(logp) if logp > -math.inf else 0.0,
                     "passages_name_2016": named["2016"], "passages_name_2018": named["2018"],
                     "top_passage": trace.hits[0].passage.title if trace.hits else "",
                     "passages": [h.passage.id for h in trace.hits]})
    return rows


def position_records(pipes: dict, leader: dict, cfgs: list[Config]) -> list[dict]:
    """Answers for one position under each of `cfgs`: both indexes × the decodings, plus closed-book.

    Per index the question is retrieved and its K prompts prepared once, for the largest K; a
    setting with a smaller K decodes from the first K rows of that state (`Generator.select`), so
    settings that differ in K or scale cost a decoding each, not another prompt pass.
    """
    import torch

    from . import marginals
    from .pipeline import QuestionError, analyse, clean_question

    t0 = time.perf_counter()
    kmax = max(c.k for c in cfgs)
    rows: list[list[dict]] = [[] for _ in cfgs]
    question, _ = clean_question(leader["question"])
    for year in YEARS:
        pipe = pipes[year]
        gen = pipe.models.generator
        hits = pipe.retrieve(question, kmax)
        if not hits:
            raise QuestionError("the index returned no passages")
        state0 = gen.prepare(question, [h.passage for h in hits])  # one batched pass over the K prompts
        for i, cfg in enumerate(cfgs):
            sub = hits[: cfg.k]
            state = state0 if len(sub) == len(hits) else gen.select(state0, torch.arange(len(sub)))
            scale = pipe.scale_for(cfg)
            log_pz = marginals.log_prior(torch.tensor([h.score for h in sub]), scale)  # (k,)
            trace = analyse(gen, question, sub, log_pz, cfg, year, scale, state0=state)
            rows[i] += _answer_rows(trace, leader, cfg)
    closed_answer = pipes[YEARS[0]].closed_book(question, cfgs[0])
    c16, c18, both = judge(closed_answer, leader["holder_2016"], leader["holder_2018"])
    base = {k: leader[k] for k in ("position", "country", "holder_2016", "holder_2018", "question")}
    closed = {**base, "answer": closed_answer, "correct_2016": c16, "correct_2018": c18, "ambiguous": both,
              "split": position_split(leader["position"])}
    seconds = time.perf_counter() - t0
    out = []
    for cfg_rows in rows:
        for r in cfg_rows:
            r["closed_book"] = closed_answer
        out.append({"position": leader["position"], "rows": cfg_rows, "closed": closed, "seconds": seconds,
                    "shared_with": len(cfgs)})
    return out


def position_record(pipes: dict, leader: dict, cfg: Config) -> dict:
    """Answers for one position under one setting (see `position_records`)."""
    return position_records(pipes, leader, [cfg])[0]


def experiment_config(base: Config | None = None, **changes) -> Config:
    """The settings the experiment runs with by default: the app's defaults (K=5, scale 20, greedy)."""
    cfg = (base or Config()).with_(**{k: v for k, v in changes.items() if v is not None})
    return cfg.validate()


def run_experiment(cfg: Config, pipeline_factory: Callable[[], object] | None = None, limit: int | None = None,
                   progress: Progress | None = None, use_cache: bool = True, positions: list[str] | None = None,
                   checksums: dict[str, str] | None = None, variants: list[Config] = ()) -> ExperimentResult:
    """Run (or resume) the hot-swap experiment; returns the result for the chosen positions.

    `pipeline_factory()` returns a loaded `Pipeline` (its index does not matter: both year indexes
    are swapped in under its models) or a dict {"2016": pipeline, "2018": pipeline}; it is called
    only when some position still has to be computed, so a fully cached run loads no model.
    `use_cache=False` recomputes every position (the fresh answers replace the cached ones).
    `variants`: other settings (K, scale, ...) computed alongside from the same prepared prompts and
    cached under their own keys (see `cached_result`); the result returned is `cfg`'s.
    """
    progress = progress or (lambda m, f: None)
    checksums = checksums or index_checksums()
    cfgs = [cfg] + [v for v in variants if v != cfg]
    folders = [cache_folder(experiment_key(c, checksums)) for c in cfgs]
    leaders = leaders_frame(limit)
    if positions is not None:
        unknown = set(positions) - set(leaders["position"])
        if unknown:
            raise ValueError(f"unknown positions: {sorted(unknown)}")
        leaders = leaders[leaders["position"].isin(positions)]
    known = [_known_rows(c, checksums) if use_cache else {} for c in cfgs]
    todo = [r for r in leaders.to_dict("records") if any(r["position"] not in k for k in known)]
    if todo:
        pipes = year_pipelines(pipeline_factory, progress)
        for folder in folders:
            folder.mkdir(parents=True, exist_ok=True)
        t_start = time.perf_counter()
        for i, leader in enumerate(todo):
            eta = ""
            if i:
                per = (time.perf_counter() - t_start) / i
                eta = f", about {per * (len(todo) - i) / 60:.0f} min left"
            progress(f"{leader['position']} ({i + 1}/{len(todo)}{eta})", i / len(todo))
            with pipes[YEARS[0]].models.lock:  # one position at a time through the shared models, as every path
                records = position_records(pipes, leader, cfgs)
            for rec, folder, done in zip(records, folders, known):
                done[leader["position"]] = rec
                with open(folder / "rows.jsonl", "a", encoding="utf-8") as f:  # one line per position: resumable
                    f.write(json.dumps(rec, ensure_ascii=False) + "\n")
        progress("done", 1.0)
    results = []
    for c, folder, done in zip(cfgs, folders, known):
        records = [done[p] for p in leaders["position"]]
        complete = positions is None and len(records) == len(leaders_frame())
        result = _assemble(records, _settings_of(c), folder.name, complete)
        if complete:
            _write_json_atomic(folder / "result.json", result.to_json())
        results.append(result)
    return results[0]


def year_pipelines(pipeline_factory, progress: Progress | None = None) -> dict:
    """The 2016 and 2018 pipelines: one set of loaded models, two indexes swapped under them."""
    from .catalog import load_named

    if pipeline_factory is None:
        raise ValueError("no cached result for these settings, and no models to compute one")
    progress = progress or (lambda m, f: None)
    progress("Loading the models", 0.0)
    pipe = pipeline_factory()
    if isinstance(pipe, dict):  # the caller has both year pipelines already (the app's cached indexes)
        return {year: pipe[year] for year in YEARS}
    out = {}
    for year in YEARS:
        out[year] = pipe if pipe.index_name == year else pipe.with_index(year, load_named(year, pipe.models.encoder, progress))
    return out
