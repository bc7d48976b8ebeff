"""`--decode token`, `--decode sequence` and `--decode both` agree on the default stack.

Greedy decoding is one rule for every path, so on every shipped example question the RAG-Token
answer of `--decode token` equals that of `--decode both`, and likewise for RAG-Sequence: the same
token ids and the same stored per-passage log-probabilities. The three decodings read one prepared
prompt state (the prompt pass is deterministic; sharing it keeps the test short)."""
import json

import torch

from rag_core import marginals
from rag_core.config import ASSETS, Config
from rag_core.pipeline import analyse


def test_every_decode_mode_gives_the_same_greedy_answers(default_pipeline):
    examples = json.loads((ASSETS / "examples" / "questions.json").read_text(encoding="utf-8"))
    gen = default_pipeline.models.generator
    cfg = Config()
    for ex in examples:
        hits = default_pipeline.retrieve(ex["question"], cfg.k)
        scale = default_pipeline.scale_for(cfg)
        log_pz = marginals.log_prior(torch.tensor([h.score for h in hits]), scale)  # (K,)
        with default_pipeline.models.lock:
            state0 = gen.prepare(ex["question"], [h.passage for h in hits])
            runs = {mode: analyse(gen, ex["question"], hits, log_pz, cfg.with_(decode=mode), "t", scale, state0)
                    for mode in ("token", "sequence", "both")}
        for decoding, alone in (("rag-token", "token"), ("rag-sequence", "sequence")):
            a, b = runs[alone].answer(decoding), runs["both"].answer(decoding)
            assert a.token_ids == b.token_ids, (ex["question"], decoding, a.answer, b.answer)
            assert a.finished == b.finished
            assert torch.allclose(a.token_logp.nan_to_num(9.0), b.token_logp.nan_to_num(9.0), atol=1e-5)
        assert runs["token"].answer("rag-sequence") is None and runs["sequence"].answer("rag-token") is None
