"""Replay of a 5-document trace against what it builds on, side by side on the default stack: per
question, the seconds of the stuffed reading's decoding plus its exact leave-one-out on the top 5
passages, and of `replay` on a trace logging those passages and that answer (the same prompt
decoded and cut, plus the logged answer teacher-forced, closed-book, and each document alone in
the generator's own reading). Two kinds of trace: no prompt logged (the stuffed reading's own
template), and a logged prompt in a typical framework's template. The goal: replay within 1.3x
(medians over the questions, each timed after one warm-up).

    python bench/replay.py [N_QUESTIONS]
"""

import sys

import torch
from common import QUESTIONS, emit, median, timed

from rag_core.config import AnswerSettings
from rag_core.decoding.search import SearchSettings
from rag_core.decoding.stuffed import leave_one_out, stuffed_decode, stuffed_state
from rag_core.pipeline import load_pipeline
from rag_core.replay.records import LoggedDocument, LoggedTrace
from rag_core.replay.run import replay

N = int(sys.argv[1]) if len(sys.argv) > 1 else len(QUESTIONS)
K = 5
TEMPLATE = "Use the context to answer.\n\nContext:\n{context}\n\nQuestion: {question}\nAnswer:"


def stuffed_and_loo(gen, q, passages, settings):
    state = stuffed_state(gen, q, passages)
    best = stuffed_decode(gen, q, passages, settings, state)[0]
    leave_one_out(gen, q, passages, best.tokens, state)
    return gen.decode(best.tokens)


def main() -> None:
    torch.set_num_threads(2)
    pipe = load_pipeline()
    gen = pipe.models.generator
    settings = SearchSettings.of(AnswerSettings())
    ratios = {"own": [], "logged": []}
    base_s, replay_s = [], []
    for q in QUESTIONS[:N]:
        passages = [h.passage for h in pipe.retrieve(q, K)]
        docs = [LoggedDocument(p.id, p.title, p.text) for p in passages]
        for warm in (True, False):
            t_base, answer = timed(stuffed_and_loo, gen, q, passages, settings)
            own = LoggedTrace("own", q, docs, answer)
            context = "\n\n".join(p.text for p in passages)
            logged = LoggedTrace(
                "logged", q, docs, answer, prompt=TEMPLATE.format(context=context, question=q)
            )
            t_own, _ = timed(replay, gen, own)
            t_logged, _ = timed(replay, gen, logged)
            if not warm:
                base_s.append(t_base)
                replay_s.append(t_own)
                ratios["own"].append(t_own / t_base)
                ratios["logged"].append(t_logged / t_base)
    emit(
        {
            "replay_questions": len(base_s),
            "replay_base_s_median": round(median(base_s), 3),
            "replay_s_median": round(median(replay_s), 3),
            "replay_vs_stuffed_loo": round(median(ratios["own"]), 3),
            "replay_logged_prompt_vs_stuffed_loo": round(median(ratios["logged"]), 3),
        }
    )


if __name__ == "__main__":
    main()
