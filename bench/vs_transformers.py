"""Our engine vs transformers' own RAG classes, at BART-base / DPR-base sizes with random weights.

Time does not depend on weight values, so random models of the real shapes measure the real cost.
transformers: RagTokenForGeneration.generate + RagSequenceForGeneration.generate, producing just the
answers (greedy, thorough RAG-Sequence rescoring). Ours: both answers with full traces (per-passage
conditionals, alternatives, posteriors, the CSV frame). Both get the same K contexts and doc scores
(retrieval is outside both timings); runs alternate so noise hits both alike.

Equal work: both sides decode to the same length limit (`max_length` = start token + NEW_TOKENS;
RagTokenForGeneration.generate ignores `max_new_tokens`) and stop at the end token, and every
context is cut to exactly 300 tokens, so no padding reaches RagSequenceForGeneration.generate (which
runs each passage's search with `attention_mask=None`). The ratio is reported only when both
answers equal transformers' token for token; otherwise the benchmark says they differ.
"""

import tempfile
from pathlib import Path

import torch
from common import emit, median, timed

K, NEW_TOKENS, REPEATS = 5, 16, 3


def build(folder: Path):
    import random

    from transformers import BartConfig, BartForConditionalGeneration, DPRConfig, DPRQuestionEncoder

    from rag_core.toys.tiny_models import bart_tokenizer, corpus_rows, dpr_tokenizers, sentences

    rng = random.Random(0)
    rows = corpus_rows(rng, 40)
    texts = sentences(rng, rows)
    q_tok, _ = dpr_tokenizers(texts)
    b_tok = bart_tokenizer(texts)
    torch.manual_seed(0)
    dpr = DPRQuestionEncoder(DPRConfig(vocab_size=30522)).eval()  # BERT-base: 12 x 768
    bart_cfg = BartConfig(
        vocab_size=50265,
        d_model=768,
        encoder_layers=6,
        decoder_layers=6,
        encoder_attention_heads=12,
        decoder_attention_heads=12,
        encoder_ffn_dim=3072,
        decoder_ffn_dim=3072,
        decoder_start_token_id=2,
        eos_token_id=2,
        bos_token_id=0,
        pad_token_id=1,
        forced_bos_token_id=None,
        forced_eos_token_id=None,
    )
    bart = BartForConditionalGeneration(bart_cfg).eval()
    with (
        torch.no_grad()
    ):  # a random model ends at once; this one never ends, so both sides decode all NEW_TOKENS
        bart.final_logits_bias[0, bart_cfg.eos_token_id] = -1e4
    bart.save_pretrained(folder / "bart")
    b_tok.save_pretrained(folder / "bart")
    return rows, dpr, bart, b_tok


def same_answer(gen, seq: torch.Tensor, ours: list[int]) -> bool:
    """transformers' output row = [start] + our answer ids, then only padding."""
    row = seq.tolist()
    n = len(ours)
    return row[1 : 1 + n] == list(ours) and all(t == gen.pad_id for t in row[1 + n :])


def main():
    from transformers import RagConfig, RagSequenceForGeneration, RagTokenForGeneration

    from rag_core import marginals
    from rag_core.config import AnswerSettings
    from rag_core.corpus import Passage
    from rag_core.decoding.answering import analyse
    from rag_core.generators import load_generator
    from rag_core.generators.seq2seq import rag_input
    from rag_core.models.sources import set_threads
    from rag_core.trace import Hit

    set_threads(None)
    with tempfile.TemporaryDirectory() as tmp:
        rows, dpr, bart, tok = build(Path(tmp))
        gen = load_generator(str(Path(tmp) / "bart"), torch.device("cpu"))
        config = RagConfig.from_question_encoder_generator_configs(dpr.config, bart.config, n_docs=K)
        rag_tok = RagTokenForGeneration(config, question_encoder=dpr, generator=bart).eval()
        rag_seq = RagSequenceForGeneration(config, question_encoder=dpr, generator=gen.model).eval()
        question = "Who built the old library of the northern city?"
        passages = [
            Passage(str(i), r["title"], r["text"] * 20) for i, r in enumerate(rows[:K])
        ]  # > 300 tokens each
        scores = torch.randn(K)
        hits = [Hit(i + 1, p, float(s)) for i, (p, s) in enumerate(zip(passages, scores))]
        ctx = tok(
            [rag_input(question, p) for p in passages],
            return_tensors="pt",
            padding=True,
            truncation=True,
            max_length=300,
        )
        assert bool(ctx["attention_mask"].all()), "every context must fill the 300 tokens (no padding)"
        feed = dict(
            context_input_ids=ctx["input_ids"],
            context_attention_mask=ctx["attention_mask"],
            doc_scores=scores.view(1, K),
            n_docs=K,
            max_length=1 + NEW_TOKENS,
            num_beams=1,
        )
        settings = AnswerSettings(k=K, max_new_tokens=NEW_TOKENS)
        lpz = marginals.log_prior(scores, 1.0)

        @torch.inference_mode()
        def theirs():
            a = rag_tok.generate(**feed)
            b = rag_seq.generate(**feed)
            return a, b

        def ours():
            trace = analyse(gen, question, hits, lpz, settings, "bench", 1.0)
            return trace, trace.to_frame()

        (ref_tok, ref_seq), (trace, _) = theirs(), ours()  # warm-up, and the outputs compared
        same = {
            d: same_answer(gen, ref[0], trace.answer(d).token_ids)
            for d, ref in (("rag-token", ref_tok), ("rag-sequence", ref_seq))
        }
        lengths = {d: len(trace.answer(d).token_ids) for d in same}
        ratios, t_ours, t_theirs = [], [], []
        for _ in range(REPEATS):
            a, _ = timed(theirs)
            b, (trace, frame) = timed(ours)
            ratios.append(a / b)
            t_ours.append(b)
            t_theirs.append(a)
        match = all(same.values())
        emit(
            {
                "speedup_vs_transformers": round(median(ratios), 3) if match else None,
                "vs_transformers_outputs_match": match,
                "vs_transformers_answer_tokens": lengths,
                "transformers_generate_s": round(median(t_theirs), 3),
                "ours_full_trace_s": round(median(t_ours), 3),
                "vs_transformers_max_tokens": NEW_TOKENS,
                "vs_transformers_context_tokens": int(ctx["input_ids"].shape[1]),
            }
        )


if __name__ == "__main__":
    main()
