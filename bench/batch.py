"""Batching across questions: questions per second through one batch over one at a time.

The same questions, the same settings (K=5, both decodings, thorough rescoring, greedy), run
alternately one at a time (`Pipeline.run_settings`) and as batches (`Pipeline.run_many`), so
machine noise hits both alike. Two workloads:
- `batch_speedup`: 8 dev-split questions (every answer must match the one-at-a-time answer);
- `batch_speedup_leaders`: 8 index-swap positions, each asked on the 2016 and the 2018 index, as
  `index-swap` runs them (a prompt row both indexes retrieve is computed once in a batch).
Also reports the speedup for each batch size tried, and the share of one question's time spent
in its prompt pass (the part a batch cannot shrink on a CPU: it is compute-bound).
"""

import sys

import torch
from common import ROOT, emit, median, timed

from rag_core.analysis.evaluation.questions import read_questions
from rag_core.index_swap import run as index_swap_run
from rag_core.index_swap.store import leaders_frame
from rag_core.pipeline import load_pipeline

SIZES = (2, 4, 8)
ROUNDS = 1


def answers(runs):
    return [[c.answer for c in r.trace.candidates if c.rank == 0] for rs in runs for r in rs]


def main():
    torch.set_num_threads(2)
    pipe = load_pipeline()
    settings = pipe.settings
    dev, _ = read_questions(ROOT / "assets" / "eval" / "dev.jsonl")
    questions = [q.question for q in dev[::18]][:8]
    pipe.run_many(questions[:2], [settings])  # warm-up
    result, per_size = {}, {}
    for size in SIZES:
        ratios = []
        for _ in range(ROUNDS):
            t_alone, alone = timed(lambda: [pipe.run_settings(q, [settings]) for q in questions])
            t_batch, batched = timed(
                lambda: [
                    r
                    for i in range(0, len(questions), size)
                    for r in pipe.run_many(questions[i : i + size], [settings])
                ]
            )
            assert answers(batched) == answers(alone), "a batch changed an answer"
            ratios.append(t_alone / t_batch)
            print(f"batch {size}: alone {t_alone:.1f}s batched {t_batch:.1f}s", file=sys.stderr, flush=True)
        per_size[size] = round(median(ratios), 3)
    result["batch_speedup"] = max(per_size.values())
    result["batch_speedup_by_size"] = per_size
    # the prompt pass's share of one question's time, one at a time
    shares = []
    for q in questions[:6]:
        query = pipe.query(q, [settings])
        t_prep, _ = timed(lambda: pipe.models.generator.prepare(q, [h.passage for h in query.hits]))
        t_all, _ = timed(lambda: pipe.run_settings(q, [settings]))
        shares.append(t_prep / t_all)
    result["prompt_pass_share"] = round(median(shares), 3)
    # the index swap: each position on both indexes, as `leaders` runs it
    pipes = index_swap_run.year_pipelines(lambda: pipe)
    leaders = leaders_frame().to_dict("records")[:8]
    swap_settings = [index_swap_run.experiment_of().settings]
    size = pipe.batch_size()
    ratios = []
    for _ in range(ROUNDS):
        t_alone, _ = timed(
            lambda: [index_swap_run.positions_records(pipes, [p], swap_settings) for p in leaders]
        )
        t_batch, _ = timed(
            lambda: [
                index_swap_run.positions_records(pipes, leaders[i : i + size], swap_settings)
                for i in range(0, len(leaders), size)
            ]
        )
        ratios.append(t_alone / t_batch)
        print(
            f"leaders batch {size}: alone {t_alone:.1f}s batched {t_batch:.1f}s", file=sys.stderr, flush=True
        )
    result["batch_speedup_leaders"] = round(median(ratios), 3)
    result["batch_size_cpu"] = size
    emit(result)


if __name__ == "__main__":
    main()
