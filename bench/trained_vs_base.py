"""The trained default against the untrained base: seconds per question, side by side.

The same 8 dev-split questions (K=5, both decodings, thorough rescoring, greedy) answered
alternately by the two stacks, which share the encoder and the index, so machine noise hits both
alike. `trained_vs_base_speed` = base seconds / trained seconds (> 1: the trained default is
faster). The trained model reads the plain prompt (no worked examples), so its prompt pass is
shorter; `trained_prompt_tokens` and `base_prompt_tokens` say how much, for the first question's
top passage.
"""

import torch
from common import ROOT, emit, median, timed

from rag_core.analysis.evaluation.questions import read_questions
from rag_core.config import BASE_GENERATOR
from rag_core.generators import causal
from rag_core.generators.loading import load_generator
from rag_core.pipeline import Models, Pipeline, load_pipeline

ROUNDS = 3


def main():
    torch.set_num_threads(2)
    trained = load_pipeline()
    base_gen = load_generator(BASE_GENERATOR, trained.models.device)
    base = Pipeline(
        Models(trained.models.encoder, base_gen, trained.models.device),
        trained.index_name,
        trained.index,
        trained.settings,
        trained.stack.with_(generator=BASE_GENERATOR),
    )
    dev, _ = read_questions(ROOT / "assets" / "eval" / "dev.jsonl")
    questions = [q.question for q in dev[::18]][:8]
    for pipe in (trained, base):
        pipe.run_settings(questions[0], [pipe.settings])  # warm-up: the prefix caches
    ratios, seconds = [], {"trained": [], "base": []}
    for _ in range(ROUNDS):
        t_base, _ = timed(lambda: [base.run_settings(q, [base.settings]) for q in questions])
        t_trained, _ = timed(lambda: [trained.run_settings(q, [trained.settings]) for q in questions])
        ratios.append(t_base / t_trained)
        seconds["trained"].append(t_trained / len(questions))
        seconds["base"].append(t_base / len(questions))
    passage = trained.retrieve(questions[0], 1)[0].passage
    tokens = {
        style: len(trained.models.generator.tokenizer.encode(causal.rag_prompt(questions[0], passage, style)))
        for style in causal.PROMPT_STYLES
    }
    emit(
        {
            "trained_vs_base_speed": round(median(ratios), 3),
            "trained_s_per_question": round(median(seconds["trained"]), 3),
            "base_s_per_question": round(median(seconds["base"]), 3),
            "trained_prompt_tokens": tokens[causal.PLAIN_STYLE],
            "base_prompt_tokens": tokens[causal.FEW_SHOT_STYLE],
        }
    )


if __name__ == "__main__":
    main()
