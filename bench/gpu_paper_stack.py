"""The paper's stack at real size with random weights, for a machine with a GPU:
BART-large generator, DPR-base question encoder, K=10, 300-token contexts.

Reports, per half-precision type (fp16 and bf16 on a GPU; fp32 on a CPU), the full-trace latency
(retrieval excluded: contexts are given) and, side by side, transformers'
RagTokenForGeneration.generate + RagSequenceForGeneration.generate; then the throughput of
BATCH questions decoded as one batch (`decode_queries`) over the same questions one at a time;
and the app's first answer on that stack given on its command line (`--device cuda` on a GPU):
from a new session to the Ask page's answer, model load and index build included.
Time does not depend on weight values. Run: `python bench/gpu_paper_stack.py` (add `--small` for
a CPU smoke run).
"""

import os
import random
import statistics
import sys
import tempfile
import time
from pathlib import Path

import torch
from common import ROOT, alternate, emit
from streamlit.testing.v1 import AppTest
from transformers import (
    BartConfig,
    BartForConditionalGeneration,
    DPRConfig,
    DPRContextEncoder,
    DPRQuestionEncoder,
    RagConfig,
    RagSequenceForGeneration,
    RagTokenForGeneration,
)

from rag_core import marginals
from rag_core.config import AnswerSettings
from rag_core.corpus import Passage
from rag_core.decoding.answering import Query, analyse, decode_queries
from rag_core.generators.seq2seq import Seq2SeqGenerator, rag_input
from rag_core.toys.tiny_models import bart_tokenizer, build_tiny_stack, corpus_rows, sentences
from rag_core.trace import Hit

K, NEW_TOKENS, REPEATS, BATCH = 10, 16, 10, 16


def main(small: bool):
    device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
    dtypes = [torch.float16, torch.bfloat16] if device.type == "cuda" else [torch.float32]
    result = {"device": str(device), "k": K, "new_tokens": NEW_TOKENS, "batch": BATCH}
    for dtype in dtypes:
        name = str(dtype).replace("torch.", "")
        result.update({f"{key}_{name}": value for key, value in measure(small, device, dtype).items()})
    result.update(app_first_answer(small, device))
    emit(result)


def sizes(small: bool) -> dict:
    """BART-large's shape, or a small one for a CPU smoke run."""
    if small:
        return dict(
            d_model=256,
            encoder_layers=2,
            decoder_layers=2,
            encoder_attention_heads=4,
            decoder_attention_heads=4,
            encoder_ffn_dim=512,
            decoder_ffn_dim=512,
        )
    return dict(
        d_model=1024,
        encoder_layers=12,
        decoder_layers=12,
        encoder_attention_heads=16,
        decoder_attention_heads=16,
        encoder_ffn_dim=4096,
        decoder_ffn_dim=4096,
    )


def app_first_answer(small: bool, device: torch.device) -> dict:
    """`streamlit run app/main.py -- --question-encoder DIR --ctx-encoder DIR --generator DIR --corpus FILE
    --device D` as the app sees it (AppTest, same process): seconds from a new session to the answer."""

    folder = Path(tempfile.mkdtemp())
    os.environ["RAG_LOUPE_CACHE"] = str(folder / "cache")
    paths = build_tiny_stack(
        folder / "stack"
    )  # the tokenizers and the corpus; the weights are replaced below
    BartForConditionalGeneration(
        BartConfig(
            vocab_size=50265,
            decoder_start_token_id=2,
            eos_token_id=2,
            bos_token_id=0,
            pad_token_id=1,
            forced_bos_token_id=None,
            forced_eos_token_id=None,
            **sizes(small),
        )
    ).save_pretrained(paths["bart"])
    DPRQuestionEncoder(DPRConfig(vocab_size=30522)).save_pretrained(paths["dpr_q"])
    DPRContextEncoder(DPRConfig(vocab_size=30522)).save_pretrained(paths["dpr_ctx"])
    sys.argv = [
        str(ROOT / "app" / "main.py"),
        "--question-encoder",
        str(paths["dpr_q"]),
        "--ctx-encoder",
        str(paths["dpr_ctx"]),
        "--generator",
        str(paths["bart"]),
        "--corpus",
        str(paths["corpus"]),
        "--device",
        device.type,
    ]
    at = AppTest.from_file(str(ROOT / "app" / "main.py"), default_timeout=900)
    at.session_state["max_new_tokens"] = NEW_TOKENS
    t = time.perf_counter()
    at.run()
    seconds = time.perf_counter() - t
    answered = any(m.label == "RAG-Sequence" for m in at.metric) and not at.exception
    return {
        "app_first_answer_s": round(seconds, 2),
        "app_answered": answered,
        "app_device": next(
            (
                c.value.removeprefix("Running on ").replace("\\", "")
                for c in at.sidebar.caption
                if c.value.startswith("Running on")
            ),
            "?",
        ),
    }


def paper_models(small: bool, device: torch.device, dtype: torch.dtype, tok):
    """Random BART (large or small) as our generator and inside transformers' two RAG classes."""
    size = sizes(small)
    bart = (
        BartForConditionalGeneration(
            BartConfig(
                vocab_size=50265,
                decoder_start_token_id=2,
                eos_token_id=2,
                bos_token_id=0,
                pad_token_id=1,
                forced_bos_token_id=None,
                forced_eos_token_id=None,
                **size,
            )
        )
        .to(device, dtype)
        .eval()
    )
    dpr = DPRQuestionEncoder(DPRConfig(vocab_size=30522)).to(device, dtype).eval()
    gen = Seq2SeqGenerator(bart, tok, "random-bart-large", device)
    config = RagConfig.from_question_encoder_generator_configs(dpr.config, bart.config, n_docs=K)
    rag_tok = RagTokenForGeneration(config, question_encoder=dpr, generator=bart).eval()
    rag_seq = RagSequenceForGeneration(config, question_encoder=dpr, generator=bart).eval()
    return gen, rag_tok, rag_seq


def measure(small: bool, device: torch.device, dtype: torch.dtype) -> dict:
    rng = random.Random(0)
    rows = corpus_rows(rng, 40)
    tok = bart_tokenizer(sentences(rng, rows))
    gen, rag_tok, rag_seq = paper_models(small, device, dtype, tok)
    question = "who built the old library of the northern city"
    passages = [Passage(str(i), r["title"], " ".join([r["text"]] * 12)) for i, r in enumerate(rows[:K])]
    scores = torch.randn(K)
    hits = [Hit(i + 1, p, float(s)) for i, (p, s) in enumerate(zip(passages, scores))]
    ctx = tok(
        [rag_input(question, p) for p in passages],
        return_tensors="pt",
        padding=True,
        truncation=True,
        max_length=300,
    )
    feed = dict(
        context_input_ids=ctx["input_ids"].to(device),
        context_attention_mask=ctx["attention_mask"].to(device),
        doc_scores=scores.view(1, K).to(device, dtype),
        n_docs=K,
        max_new_tokens=NEW_TOKENS,
        min_new_tokens=NEW_TOKENS,
        num_beams=1,
    )
    settings = AnswerSettings(k=K, max_new_tokens=NEW_TOKENS)
    lpz = marginals.log_prior(scores, 1.0)

    def sync():
        if device.type == "cuda":
            torch.cuda.synchronize()

    def ours():
        trace = analyse(gen, question, hits, lpz, settings, "bench", 1.0)
        trace.to_frame()
        sync()

    @torch.inference_mode()
    def theirs():
        rag_tok.generate(**feed)
        rag_seq.generate(**feed)
        sync()

    questions = [f"{question} number {i}" for i in range(BATCH)]

    def alone():
        for q in questions:
            decode_queries(gen, [Query(q, hits, "bench", [settings])], lambda c: 1.0)
        sync()

    def batched():
        decode_queries(gen, [Query(q, hits, "bench", [settings]) for q in questions], lambda c: 1.0)
        sync()

    ours(), theirs(), batched()
    t_ours, t_theirs = alternate(REPEATS, ours, theirs)
    t_alone, t_batch = alternate(3, alone, batched)
    return {
        "paper_stack_full_trace_ms": round(1000 * statistics.median(t_ours), 1),
        "paper_stack_transformers_generate_ms": round(1000 * statistics.median(t_theirs), 1),
        "paper_stack_speedup_vs_transformers": round(
            statistics.median(t_theirs) / statistics.median(t_ours), 2
        ),
        "paper_stack_batched_questions_per_s": round(BATCH / statistics.median(t_batch), 2),
        "paper_stack_batch_speedup": round(statistics.median(t_alone) / statistics.median(t_batch), 2),
        "context_tokens": int(ctx["input_ids"].shape[1]),
    }


if __name__ == "__main__":
    main("--small" in sys.argv)
