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
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable

from rag_core.config import DECODE_NAMES, AnswerSettings, Progress, StackSpec
from rag_core.decoding.answering import decode_queries
from rag_core.index_swap.judge import judge, names_holder
from rag_core.index_swap.results import YEARS, ExperimentResult, position_split
from rag_core.index_swap.store import (
    Experiment,
    assemble,
    cache_folder,
    experiment_key,
    index_checksums,
    known_rows,
    leaders_frame,
    settings_of,
)
from rag_core.marginals import NEG_INF, prob
from rag_core.pipeline import Pipeline, clean_question
from rag_core.retrieval.catalog import load_named
from rag_core.storage import caches
from rag_core.storage.files import append_line, write_json_atomic
from rag_core.trace import Trace, log_p_under


def _answer_rows(trace: Trace, leader: dict, settings: AnswerSettings) -> list[dict]:
    """The judged rows of one trace (one position on one index), one per decoding."""
    h16, h18 = leader["holder_2016"], leader["holder_2018"]
    base = {k: leader[k] for k in ("position", "country", "holder_2016", "holder_2018", "question")}
    blobs = [h.passage.title + "\n" + h.passage.text for h in trace.hits]
    named = {
        "2016": sum(names_holder(b, h16, h18) for b in blobs),
        "2018": sum(names_holder(b, h18, h16) for b in blobs),
    }
    rows = []
    for decoding in DECODE_NAMES[settings.decode]:
        best = trace.answer(decoding)
        answer = best.answer if best is not None else ""
        logp = NEG_INF
        if best is not None:
            logp = log_p_under(best, decoding, trace.log_prior)
        c16, c18, both = judge(answer, h16, h18)
        rows.append(
            {
                **base,
                "index": trace.index,
                "decoding": decoding,
                "answer": answer,
                "correct_2016": c16,
                "correct_2018": c18,
                "ambiguous": both,
                "split": position_split(leader["position"]),
                "p_answer": prob(logp),
                "passages_name_2016": named["2016"],
                "passages_name_2018": named["2018"],
                "top_passage": trace.hits[0].passage.title if trace.hits else "",
                "passages": [h.passage.id for h in trace.hits],
            }
        )
    return rows


def positions_records(
    pipes: dict[str, Pipeline], leaders: list[dict], settings: list[AnswerSettings]
) -> list[list[dict]]:
    """Answers for several positions under each of `settings`: both indexes × the decodings, plus
    closed-book; per position, one record per setting.

    Every (position, index) question is retrieved for the largest K, and all of them are decoded
    as one batch (`decode_queries`: settings that differ in K or scale cost a decoding each, not
    another prompt pass, and a prompt row both indexes retrieve is computed once); the closed-book
    answers are another batch. Each answer is the one the question decoded alone gets.
    """
    t0 = time.perf_counter()
    questions = [clean_question(leader["question"])[0] for leader in leaders]
    first = pipes[YEARS[0]]
    with first.models.lock:  # one batch at a time through the shared models, as every path
        queries = [pipes[year].query(q, settings) for q in questions for year in YEARS]
        # the rows judge answers only: a stuffed reading needs no leave-one-out here
        runs = decode_queries(first.models.generator, queries, first.scale_for, explain=False)
        closed_answers = first.closed_book_many(questions, settings[0])
    seconds = (time.perf_counter() - t0) / len(leaders)
    out = []
    for p, (leader, closed_answer) in enumerate(zip(leaders, closed_answers)):
        rows: list[list[dict]] = [[] for _ in settings]
        for y in range(len(YEARS)):
            for i, run in enumerate(runs[p * len(YEARS) + y]):
                rows[i] += _answer_rows(run.trace, leader, settings[i])
        c16, c18, both = judge(closed_answer, leader["holder_2016"], leader["holder_2018"])
        base = {k: leader[k] for k in ("position", "country", "holder_2016", "holder_2018", "question")}
        closed = {
            **base,
            "answer": closed_answer,
            "correct_2016": c16,
            "correct_2018": c18,
            "ambiguous": both,
            "split": position_split(leader["position"]),
        }
        records = []
        for own_rows in rows:
            for r in own_rows:
                r["closed_book"] = closed_answer
            records.append(
                {
                    "position": leader["position"],
                    "rows": own_rows,
                    "closed": closed,
                    "seconds": seconds,
                    "shared_with": len(settings),
                }
            )
        out.append(records)
    return out


def experiment_of(stack: StackSpec | None = None, **changes) -> Experiment:
    """The experiment of `stack` (the default stack without one) with the app's default settings
    (K=5, the encoder's scale, greedy), changed by the `changes` that are not None; validated."""
    settings = AnswerSettings().with_(**{k: v for k, v in changes.items() if v is not None})
    return Experiment((stack or StackSpec()).validate(), settings.validate())


def run_experiment(
    exp: Experiment,
    pipeline_factory: Callable[[], object] | None = None,
    limit: int | None = None,
    progress: Progress | None = None,
    use_cache: bool = True,
    positions: list[str] | None = None,
    checksums: dict[str, str] | None = None,
    variants: list[Experiment] = (),
) -> ExperimentResult:
    """Run (or resume) the hot-swap experiment; returns the result for the chosen positions.

    `pipeline_factory()` returns a loaded `Pipeline` (its index does not matter: both year indexes
    are swapped in under its models) or a dict {"2016": pipeline, "2018": pipeline}; it is called
    only when some position still has to be computed, so a fully cached run loads no model.
    `use_cache=False` recomputes every position (the fresh answers replace the cached ones).
    `variants`: other settings (K, scale, ...) computed alongside from the same prepared prompts and
    cached under their own keys (see `cached_result`); the result returned is `exp`'s.
    """
    progress = progress or (lambda m, f: None)
    checksums = checksums or index_checksums()
    runs = [exp] + [v for v in variants if v != exp]
    folders = [cache_folder(experiment_key(r, checksums)) for r in runs]
    leaders = leaders_frame(limit)
    if positions is not None:
        unknown = set(positions) - set(leaders["position"])
        if unknown:
            raise ValueError(f"unknown positions: {sorted(unknown)}")
        leaders = leaders[leaders["position"].isin(positions)]
    known = [known_rows(r, checksums) if use_cache else {} for r in runs]
    todo = [r for r in leaders.to_dict("records") if any(r["position"] not in k for k in known)]
    if todo:
        pipes = year_pipelines(pipeline_factory, progress)
        for folder in folders:
            folder.mkdir(parents=True, exist_ok=True)
            caches.keep_newest("leaders", keep=folder)
        t_start = time.perf_counter()
        size = pipes[YEARS[0]].batch_size()
        for i in range(0, len(todo), size):
            batch = todo[i : i + size]
            eta = ""
            if i:
                per = (time.perf_counter() - t_start) / i
                eta = f", about {per * (len(todo) - i) / 60:.0f} min left"
            names = batch[0]["position"] + (f" and {len(batch) - 1} more" if len(batch) > 1 else "")
            span = f"{i + 1}" if len(batch) == 1 else f"{i + 1}-{i + len(batch)}"
            done_before = f", {len(leaders) - len(todo)} done before" if len(todo) < len(leaders) else ""
            progress(
                f"{names}: position {span} of the {len(todo)} to compute{done_before}{eta}", i / len(todo)
            )
            for leader, records in zip(batch, positions_records(pipes, batch, [r.settings for r in runs])):
                for rec, folder, done in zip(records, folders, known):
                    done[leader["position"]] = rec
                    append_line(
                        folder / "rows.jsonl", json.dumps(rec, ensure_ascii=False)
                    )  # one line a position: resumable
        progress("done", 1.0)
    results = []
    for run, folder, done in zip(runs, folders, known):
        records = [done[p] for p in leaders["position"]]
        complete = positions is None and len(records) == len(leaders_frame())
        result = assemble(records, settings_of(run), folder.name, complete)
        if complete:
            write_json_atomic(folder / "result.json", result.to_json())
        results.append(result)
    return results[0]


def year_pipelines(pipeline_factory, progress: Progress | None = None) -> dict:
    """The 2016 and 2018 pipelines: one set of loaded models, two indexes swapped under them."""
    if pipeline_factory is None:
        raise ValueError("no cached result for these settings, and no models to compute one")
    progress = progress or (lambda m, f: None)
    progress("Loading the models", 0.0)
    pipe = pipeline_factory()
    if isinstance(pipe, dict):  # the caller has both year pipelines already (the app's cached indexes)
        return {year: pipe[year] for year in YEARS}
    out = {}
    for year in YEARS:
        out[year] = (
            pipe
            if pipe.index_name == year
            else pipe.with_index(year, load_named(year, pipe.models.encoder, progress))
        )
    return out
