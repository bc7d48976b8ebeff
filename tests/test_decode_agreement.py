"""`--decode token`, `--decode sequence` and `--decode both` agree on the default stack.

Greedy decoding is one rule for every path, so on every shipped example question the RAG-Token
answer of `--decode token` equals that of `--decode both`, and likewise for RAG-Sequence: the same
token ids and the same stored per-passage log-probabilities. `--decode both` is the pipeline's own
run of the question (shared with the diagnosis tests); the single decodings read its prepared
prompt state (the prompt pass is deterministic; sharing it keeps the test short)."""
import torch

from rag_core.config import Config
from rag_core.answering import analyse


def test_every_decode_mode_gives_the_same_greedy_answers(default_pipeline, example_runs):
    gen = default_pipeline.models.generator
    cfg = Config()
    assert cfg.decode == "both"
    for ex, run in example_runs:
        both = run.trace
        with default_pipeline.models.lock:
            runs = {mode: analyse(gen, both.query, both.hits, both.log_prior, cfg.with_(decode=mode), "t", both.scale,
                                  run.state0)
                    for mode in ("token", "sequence")}
        for decoding, alone in (("rag-token", "token"), ("rag-sequence", "sequence")):
            a, b = runs[alone].answer(decoding), both.answer(decoding)
            assert a.token_ids == b.token_ids, (ex["question"], decoding, a.answer, b.answer)
            assert a.finished == b.finished
            assert torch.allclose(a.token_logp.nan_to_num(9.0), b.token_logp.nan_to_num(9.0), atol=1e-5)
        assert runs["token"].answer("rag-sequence") is None and runs["sequence"].answer("rag-token") is None
