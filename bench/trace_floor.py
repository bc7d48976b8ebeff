"""Full analysis of one query vs the unavoidable work, side by side on the same questions.

floor = one batched forward of the K prompts + greedy RAG-Token decoding of one answer.
full  = retrieve + RAG-Token and RAG-Sequence decoding with thorough rescoring + posteriors + trace.
Each question is run alternately (floor, full, floor, full, ...) so machine noise hits both alike;
the figure is the median of per-question ratios.
"""

import sys

import torch
from common import QUESTIONS, emit, median, timed

from rag_core import marginals
from rag_core.config import AnswerSettings
from rag_core.decoding.decode import SearchSettings, rag_token_decode
from rag_core.pipeline import load_pipeline


def main():
    pipe = load_pipeline(settings=AnswerSettings(index="wiki"))
    gen = pipe.models.generator
    result = {}
    for k in (5, 10):
        settings = AnswerSettings(index="wiki", k=k)
        ratios, fulls, floors = [], [], []
        pipe.run(QUESTIONS[0], settings)  # warm-up
        for q in QUESTIONS:
            hits = pipe.retrieve(q, k)
            lpz = marginals.log_prior(torch.tensor([h.score for h in hits]), pipe.scale_for(settings))

            def floor():
                state = gen.prepare(q, [h.passage for h in hits])
                return rag_token_decode(gen, state, lpz, SearchSettings.of(settings))

            for _ in range(2):
                t_floor, _ = timed(floor)
                t_full, trace = timed(lambda: (lambda tr: (tr, tr.to_frame()))(pipe.run(q, settings)))
                ratios.append(t_full / t_floor)
                print(
                    f"k={k} {q[:30]!r} floor {t_floor:.2f}s full {t_full:.2f}s", file=sys.stderr, flush=True
                )
                fulls.append(t_full)
                floors.append(t_floor)
        result[f"trace_vs_floor_k{k}"] = round(median(ratios), 3)
        result[f"trace_latency_cpu_k{k}_s"] = round(median(fulls), 3)
        result[f"floor_latency_cpu_k{k}_s"] = round(median(floors), 3)
    emit(result)


if __name__ == "__main__":
    main()
