"""The quality of leave-one-sentence-out attribution, as ContextCite measures its own: on each test
question, take the RAG-Sequence answer and the passage it cites (the top posterior p(z|x,y)),
remove the top-1 and the top-3 sentences of a ranking together, and measure how far
log p(y|x,z) falls. Our ranking (the exact Δ per sentence) is set beside the baseline that ranks
sentences by the retriever's similarity to the answer. Nothing here is tuned, so the held-out test
split is the one reported; passages of one sentence are skipped (every ranking is the same).

    python bench/sentence_drop.py [N_QUESTIONS]
"""

import sys

import numpy as np
from common import ROOT, emit

from rag_core.analysis.attribution.sentences import attribute, similarity_ranking, top_k_drop
from rag_core.analysis.evaluation.questions import read_questions
from rag_core.config import RAG_SEQUENCE
from rag_core.marginals import citation
from rag_core.pipeline import load_pipeline

N = int(sys.argv[1]) if len(sys.argv) > 1 else 60
KS = (1, 3)


def main() -> None:
    questions, _ = read_questions(ROOT / "assets" / "eval" / "test.jsonl")
    pipe = load_pipeline()
    drops = {"attribution": {k: [] for k in KS}, "similarity": {k: [] for k in KS}}
    skipped = 0
    for q in questions[:N]:
        trace = pipe.run(q.question)
        c = trace.answer(RAG_SEQUENCE)
        if c is None or not c.token_ids:
            skipped += 1
            continue
        z = int(citation(trace.log_prior, c.token_logp).argmax())
        passage = trace.hits[z].passage
        att = attribute(pipe, trace.question, passage, c.token_ids)
        if len(att.sentences) < 2:
            skipped += 1
            continue
        rankings = {
            "attribution": att.ranking(),
            "similarity": similarity_ranking(pipe.models.encoder, att.sentences, c.answer),
        }
        for name, per_k in top_k_drop(pipe, trace.question, att, c.token_ids, rankings, KS).items():
            for k, d in per_k.items():
                drops[name][k].append(d)
    out = {"sentence_drop_questions": len(drops["attribution"][1]), "sentence_drop_skipped": skipped}
    for name, per_k in drops.items():
        for k, values in per_k.items():
            out[f"sentence_drop_{name}_top{k}_mean"] = round(float(np.mean(values)), 3) if values else None
    for k in KS:
        a, s = np.array(drops["attribution"][k]), np.array(drops["similarity"][k])
        out[f"sentence_drop_top{k}_attribution_at_least_as_far"] = (
            round(float(np.mean(a >= s - 1e-9)), 3) if len(a) else None
        )
    emit(out)


if __name__ == "__main__":
    main()
