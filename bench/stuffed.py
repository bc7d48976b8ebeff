"""The stuffed reading's exact leave-one-passage-out against the stuffed answer's own decoding, side
by side on the default stack at K = 5: per question, the seconds of `stuffed_decode` (the answer)
(its one prompt prepared, then searched) and of `leave_one_out` (the K prompts without one passage
each, the answer teacher-forced under them: reading each prompt's tokens before the passage it
leaves out from the stuffed prompt's own cache, the rest and the answer in one forward), and the
generator forward calls each makes. The goal: leave-one-out within 1.5x of the decoding it explains
(medians over the questions, each timed after one warm-up).

    python bench/stuffed.py [N_QUESTIONS]
"""

import sys

import torch
from common import QUESTIONS, emit, median, timed

from rag_core.config import AnswerSettings
from rag_core.decoding.search import SearchSettings
from rag_core.decoding.stuffed import leave_one_out, stuffed_decode, stuffed_state
from rag_core.generators.base import ForwardCounter
from rag_core.pipeline import load_pipeline

N = int(sys.argv[1]) if len(sys.argv) > 1 else len(QUESTIONS)
K = 5


def main() -> None:
    torch.set_num_threads(2)
    pipe = load_pipeline()
    gen = pipe.models.generator
    settings = SearchSettings.of(AnswerSettings())
    decode_s, loo_s, ratios, calls = [], [], [], []
    for q in QUESTIONS[:N]:
        passages = [h.passage for h in pipe.retrieve(q, K)]
        for warm in (True, False):
            t_prep, state = timed(stuffed_state, gen, q, passages)
            t_search, scored = timed(stuffed_decode, gen, q, passages, settings, state)
            t_dec = t_prep + t_search
            before = ForwardCounter.count
            t_loo, _ = timed(leave_one_out, gen, q, passages, scored[0].tokens, state)
            if not warm:
                decode_s.append(t_dec)
                loo_s.append(t_loo)
                ratios.append(t_loo / t_dec)
                calls.append(ForwardCounter.count - before)
    emit(
        {
            "stuffed_questions": len(ratios),
            "stuffed_decode_s_median": round(median(decode_s), 3),
            "stuffed_loo_s_median": round(median(loo_s), 3),
            "stuffed_loo_vs_decode": round(median(ratios), 3),
            "stuffed_loo_forward_calls_max": max(calls),
        }
    )


if __name__ == "__main__":
    main()
