"""The paper's code path (DPR retriever + BART generator) against transformers' own RAG classes.

Tiny randomly initialised models are built and saved in a temp folder (tests/tiny_models.py), then
loaded by the engine exactly as it loads the real checkpoints. transformers' RagTokenForGeneration
and RagSequenceForGeneration, built from the same question encoder and generator and fed the
contexts and raw doc scores directly (no RagRetriever), are the reference for:
- the retriever scores s(z) = d(z)·q(x) and the prior softmax(s) (DPR's scale is 1);
- the input format `title / text // question` (RagRetriever.postprocess_docs builds the reference);
- per-token log p(y_i|x,z,y_<i) (direct BART calls), the RAG-Token and RAG-Sequence likelihoods.

Answer convention (the engine's, and transformers' when labels = [decoder_start] + answer ids):
answer ids = tokenizer(answer)["input_ids"] = <s> a_1 .. a_n </s>, decoder input =
[decoder_start] + answer[:-1], every answer token scored, <s> included. transformers'
RAG-Sequence rescoring inside `generate` passes exclude_bos_score=True, which drops the <s> step;
`test_exclude_bos_drops_the_first_step` pins that relation down.
"""

from __future__ import annotations

import csv
import io
import json
import os
import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace

import pytest
import torch

from rag_core import marginals
from rag_core.corpus import read_corpus_file
from rag_core.decoding.decode import SearchSettings, rag_sequence_beams, rag_token_decode, score_answers
from rag_core.generators import load_generator
from rag_core.generators.seq2seq import Seq2SeqGenerator, rag_input
from rag_core.retrieval.catalog import build_corpus_index
from rag_core.retrieval.encoders import DPREncoder, load_encoder
from rag_core.retrieval.retriever import Retriever
from rag_core.toys.tiny_models import build_tiny_stack

ROOT = Path(__file__).resolve().parent.parent
CPU = torch.device("cpu")
# Tolerances the docs quote (docs/results.md, "The engine against transformers"); measured on the seeded
# tiny models: 4.8e-7 on s(z), 1.9e-6 per token, 9.5e-6 on the likelihoods (float32 sums over ~20 steps).
TOL_SCORE = 1e-5
TOL_TOKEN = 5e-6
TOL_LIKELIHOOD = 2e-5
K = 4
ANSWERS = ["Ada Lovelace", "Nikola Tesla in 1750", "Paris", "the old tower of Oslo was built"]


@pytest.fixture(scope="module")
def stack(tmp_path_factory):
    return build_tiny_stack(tmp_path_factory.mktemp("tiny-stack"))


@pytest.fixture(scope="module")
def engine(stack, tmp_path_factory):
    encoder = load_encoder(str(stack["dpr_q"]), str(stack["dpr_ctx"]), CPU)
    gen = load_generator(str(stack["bart"]), CPU)
    passages = read_corpus_file(stack["corpus"]).passages
    index = build_corpus_index(passages, encoder, tmp_path_factory.mktemp("index") / "tiny")
    return SimpleNamespace(encoder=encoder, gen=gen, retriever=Retriever(encoder, index, "tiny"))


@pytest.fixture(scope="module")
def case(stack, engine):
    """One question, its K hits, the prior, the prepared state and the engine's scores of ANSWERS."""
    question = stack["questions"][0]
    hits = engine.retriever.retrieve(question, K)
    log_pz = marginals.log_prior(torch.tensor([h.score for h in hits]), engine.encoder.default_scale)  # (K,)
    state0 = engine.gen.prepare(question, [h.passage for h in hits])
    ids = [engine.gen.encode_answer(a) for a in ANSWERS]
    tok_lp, mask, _, _ = score_answers(engine.gen, state0, ids)  # (N, K, T), (N, T)
    return SimpleNamespace(
        question=question, hits=hits, log_pz=log_pz, state0=state0, ids=ids, tok_lp=tok_lp, mask=mask
    )


def reference_contexts(gen: Seq2SeqGenerator, question: str, hits) -> dict:
    """Context ids exactly as transformers' RagRetriever builds them (padded to max_combined_length)."""
    from transformers import RagConfig
    from transformers.models.rag.retrieval_rag import RagRetriever

    fake = SimpleNamespace(config=RagConfig(), generator_tokenizer=gen.tokenizer)
    docs = [{"title": [h.passage.title for h in hits], "text": [h.passage.text for h in hits]}]
    ids, mask = RagRetriever.postprocess_docs(fake, docs, [question], None, len(hits), return_tensors="pt")
    return {"context_input_ids": ids, "context_attention_mask": mask}  # (K, 300) each


def fresh_parts(stack):
    """The question encoder and generator loaded afresh, independent of the engine's own copies."""
    from transformers import BartForConditionalGeneration, DPRQuestionEncoder

    return DPRQuestionEncoder.from_pretrained(
        stack["dpr_q"]
    ).eval(), BartForConditionalGeneration.from_pretrained(stack["bart"]).eval()


def rag_models(stack):
    from transformers import RagConfig, RagSequenceForGeneration, RagTokenForGeneration

    q_model, bart = fresh_parts(stack)
    config = RagConfig.from_question_encoder_generator_configs(q_model.config, bart.config, n_docs=K)
    assert config.label_smoothing == 0.0  # epsilon 0: the loss is the plain negative log-likelihood
    token = RagTokenForGeneration(config, question_encoder=q_model, generator=bart).eval()
    sequence = RagSequenceForGeneration(config, question_encoder=q_model, generator=bart).eval()
    return token, sequence


def labels_for(ids: list[list[int]], start: int, pad: int) -> torch.Tensor:
    """[decoder_start] + answer, right-padded: transformers feeds labels as the decoder input and
    scores labels shifted left, so this scores exactly the engine's answer tokens."""
    width = 1 + max(len(a) for a in ids)
    out = torch.full((len(ids), width), pad, dtype=torch.long)  # (N, 1 + T)
    for n, a in enumerate(ids):
        out[n, : 1 + len(a)] = torch.tensor([start] + a)
    return out


@pytest.fixture(scope="module")
def reference(stack, engine, case):
    """transformers' RAG-Token and RAG-Sequence log-likelihoods of ANSWERS, (N,) each."""
    token, sequence = rag_models(stack)
    gen = engine.gen
    ctx = reference_contexts(gen, case.question, case.hits)
    n = len(case.ids)
    scores = (
        engine.encoder.encode_queries([case.question])
        @ engine.encoder.encode_passages([h.passage for h in case.hits]).T
    )
    feed = dict(
        context_input_ids=ctx["context_input_ids"].repeat(n, 1),
        context_attention_mask=ctx["context_attention_mask"].repeat(n, 1),
        doc_scores=torch.tensor(scores, dtype=torch.float32).repeat(n, 1),
        labels=labels_for(case.ids, gen.start_id, gen.pad_id),
        reduce_loss=False,
    )
    with torch.no_grad():
        out = {
            "token": -token(**feed).loss,
            "sequence": -sequence(**feed, exclude_bos_score=False).loss,
            "sequence_no_bos": -sequence(**feed, exclude_bos_score=True).loss,
        }
    out.update(
        token_model=token,
        bart=sequence.generator,
        ctx=ctx,
        doc_scores=torch.tensor(scores[0], dtype=torch.float32),
    )
    return SimpleNamespace(**out)


def test_dpr_scores_and_prior(stack, engine, case):
    """s(z) from the FAISS index = the DPR models' pooler outputs' inner product; prior = softmax(s)."""
    from transformers import AutoTokenizer, DPRContextEncoder, DPRQuestionEncoder

    assert isinstance(engine.encoder, DPREncoder) and engine.encoder.default_scale == 1.0
    q_tok, c_tok = (
        AutoTokenizer.from_pretrained(stack["dpr_q"]),
        AutoTokenizer.from_pretrained(stack["dpr_ctx"]),
    )
    q_model, c_model = (
        DPRQuestionEncoder.from_pretrained(stack["dpr_q"]),
        DPRContextEncoder.from_pretrained(stack["dpr_ctx"]),
    )
    with torch.no_grad():
        q = q_model(**q_tok([case.question], return_tensors="pt")).pooler_output  # (1, D)
        d = torch.cat(
            [
                c_model(**c_tok([h.passage.title], [h.passage.text], return_tensors="pt")).pooler_output
                for h in case.hits
            ]
        )  # (K, D)
    direct = (q @ d.T)[0]  # (K,)
    ours = torch.tensor([h.score for h in case.hits])  # (K,)
    print(
        f"max |Δ s(z)| = {(ours - direct).abs().max().item():.2e}, "
        f"prior {[round(p, 3) for p in case.log_pz.exp().tolist()]}"
    )
    assert (ours - direct).abs().max().item() < TOL_SCORE
    assert ours.tolist() == sorted(ours.tolist(), reverse=True)
    assert (case.log_pz.exp() - torch.softmax(direct.double(), -1)).abs().max().item() < TOL_SCORE
    prior = case.log_pz.exp()
    assert (
        prior.max() < 0.9 and prior.max() - prior.min() > 0.05
    )  # neither one-hot nor uniform: the mixtures matter


def test_input_format_matches_rag_retriever(engine, case, reference):
    """Our `title / text // question` inputs are RagRetriever's, token for token."""
    enc = engine.gen.tokenizer([rag_input(case.question, h.passage) for h in case.hits], padding=True)
    for z in range(K):
        ref = reference.ctx["context_input_ids"][z][
            reference.ctx["context_attention_mask"][z].bool()
        ].tolist()
        assert enc["input_ids"][z][: len(ref)] == ref


def test_per_token_logprobs_match_bart(engine, case, reference):
    """(c) score_answers' log p(y_i|x,z,y_<i) = a direct BartForConditionalGeneration call per (z, answer)."""
    gen, ctx = engine.gen, reference.ctx
    worst = 0.0
    with torch.no_grad():
        for z in range(K):
            keep = ctx["context_attention_mask"][z].bool()
            src = ctx["context_input_ids"][z][keep].unsqueeze(0)  # (1, L_z), unpadded
            first = torch.log_softmax(
                reference.bart(input_ids=src, decoder_input_ids=torch.tensor([[gen.start_id]])).logits[0, -1],
                -1,
            )
            worst = max(worst, (case.state0.logprobs[z] - first).abs().max().item())
            for n, a in enumerate(case.ids):
                dec = torch.tensor([[gen.start_id] + a[:-1]])  # (1, T)
                lp = torch.log_softmax(
                    reference.bart(input_ids=src, decoder_input_ids=dec).logits[0], -1
                )  # (T, V)
                direct = lp.gather(-1, torch.tensor(a).unsqueeze(-1)).squeeze(-1)  # (T,)
                worst = max(worst, (case.tok_lp[n, z, : len(a)] - direct).abs().max().item())
                assert torch.isnan(case.tok_lp[n, z, len(a) :]).all()  # padded steps are never scored
    print(f"max |Δ log p(y_i|x,z,y<i)| vs BART = {worst:.2e}")
    assert worst < TOL_TOKEN


def test_rag_token_likelihood_matches_transformers(case, reference):
    """(a) marginals.rag_token over score_answers = -RagTokenForGeneration(labels=...).loss."""
    ours = marginals.rag_token(case.log_pz, case.tok_lp, case.mask)  # (N,)
    diff = (ours - reference.token.double()).abs().max().item()
    print(f"max |Δ log p_tok(y|x)| = {diff:.2e}")
    assert diff < TOL_LIKELIHOOD


def test_rag_sequence_likelihood_matches_transformers(case, reference):
    """(b) marginals.rag_sequence over score_answers = -RagSequenceForGeneration(labels=...).loss."""
    ours = marginals.rag_sequence(case.log_pz, case.tok_lp, case.mask)  # (N,)
    diff = (ours - reference.sequence.double()).abs().max().item()
    print(f"max |Δ log p_seq(y|x)| = {diff:.2e}")
    assert diff < TOL_LIKELIHOOD
    # The two models disagree on these answers (the test would be weak if they did not).
    tok = marginals.rag_token(case.log_pz, case.tok_lp, case.mask)
    assert (ours - tok).abs().max().item() > 1e-3


def test_exclude_bos_drops_the_first_step(case, reference):
    """transformers' generate rescoring (exclude_bos_score=True) = our score without the <s> step."""
    assert all(a[0] == 0 for a in case.ids)  # BART answers start with <s>
    ours = marginals.rag_sequence(case.log_pz, case.tok_lp[..., 1:], case.mask[:, 1:])  # (N,)
    diff = (ours - reference.sequence_no_bos.double()).abs().max().item()
    print(f"max |Δ log p_seq(y|x)| without <s> = {diff:.2e}")
    assert diff < TOL_LIKELIHOOD


def with_forced(gen, argmax: list[int], answer) -> list[int]:
    """The argmax path with the steps the generation config forced (BART's forced end token at the
    length limit) set to the forced token, as transformers' logits processors do."""
    out = list(argmax)
    for i, forced in enumerate(answer.forced):
        if forced:
            assert answer.tokens[i] in gen.forced_eos_ids | {gen.forced_bos_id}
            out[i] = answer.tokens[i]
    return out


def test_greedy_rag_token_follows_the_transformers_mixture(engine, case, reference):
    """Each greedy RAG-Token step is the argmax of RagTokenForGeneration's marginalised logits, and the
    per-passage log-probs stored along the way are the model's."""
    gen = engine.gen
    best = rag_token_decode(gen, case.state0, case.log_pz, SearchSettings(max_new_tokens=6))[0]
    t = best.length
    dec = torch.tensor([[gen.start_id] + best.tokens[:-1]])  # (1, T)
    with torch.no_grad():
        out = reference.token_model(
            **reference.ctx,
            doc_scores=reference.doc_scores.unsqueeze(0),
            decoder_input_ids=dec,
            use_cache=False,
        )
    mix = reference.token_model.marginalize(out.logits, reference.doc_scores.unsqueeze(0), n_docs=K)[
        0
    ]  # (T, V)
    assert with_forced(gen, mix.argmax(-1).tolist(), best) == best.tokens
    per_doc = (
        torch.log_softmax(out.logits, -1)
        .gather(-1, dec.new_tensor(best.tokens).view(1, t, 1).expand(K, t, 1))
        .squeeze(-1)
    )  # (K, T)
    diff = (best.token_logp - per_doc).abs().max().item()
    print(f"max |Δ log p(y_i|x,z,y<i)| along the greedy path = {diff:.2e}")
    assert diff < TOL_TOKEN
    # and the greedy RAG-Sequence beam of each passage is the argmax under that passage alone
    for z, beams_z in enumerate(rag_sequence_beams(gen, case.state0, SearchSettings(max_new_tokens=6))):
        tokens = beams_z[0].tokens
        with torch.no_grad():
            logits = reference.bart(
                input_ids=reference.ctx["context_input_ids"][z : z + 1],
                attention_mask=reference.ctx["context_attention_mask"][z : z + 1],
                decoder_input_ids=torch.tensor([[gen.start_id] + tokens[:-1]]),
            ).logits[0]  # (T, V)
        assert with_forced(gen, logits.argmax(-1).tolist(), beams_z[0]) == tokens


@pytest.mark.parametrize("kind", ["token", "sequence"])
def test_rag_checkpoint_loads_the_same_parts(stack, engine, case, tmp_path, kind):
    """A saved RagTokenForGeneration / RagSequenceForGeneration (+ RagTokenizer subfolders) as
    --generator / --question-encoder gives the same scores as the separate folders."""
    from transformers import RagTokenizer

    rag = dict(zip(["token", "sequence"], rag_models(stack)))[kind]
    folder = tmp_path / f"rag-{kind}-tiny"
    rag.save_pretrained(folder)
    RagTokenizer(engine.encoder.question_tokenizer, engine.gen.tokenizer).save_pretrained(folder)
    assert (folder / "question_encoder_tokenizer").is_dir() and (folder / "generator_tokenizer").is_dir()

    gen = load_generator(str(folder), CPU)
    encoder = load_encoder(str(folder), str(stack["dpr_ctx"]), CPU)
    assert isinstance(gen, Seq2SeqGenerator) and isinstance(encoder, DPREncoder)
    assert (gen.start_id, gen.eos_ids, gen.pad_id) == (
        engine.gen.start_id,
        engine.gen.eos_ids,
        engine.gen.pad_id,
    )
    assert [gen.encode_answer(a) for a in ANSWERS] == case.ids
    q_diff = abs(
        encoder.encode_queries([case.question]) - engine.encoder.encode_queries([case.question])
    ).max()
    assert q_diff < 1e-6
    state0 = gen.prepare(case.question, [h.passage for h in case.hits])
    tok_lp, mask, _, _ = score_answers(gen, state0, case.ids)
    assert torch.equal(mask, case.mask)
    diff = (tok_lp - case.tok_lp).nan_to_num(0.0).abs().max().item()
    print(f"RAG-{kind} checkpoint vs separate folders: max |Δ| = {diff:.2e}, query vectors {q_diff:.2e}")
    assert diff < 1e-6


@pytest.mark.parametrize("rescore", ["thorough", "fast"])
@pytest.mark.slow  # over 5 s on 2 cores
def test_cli_ask_with_the_paper_stack(stack, tmp_path, rescore):
    out_csv = tmp_path / "out.csv"
    env = dict(os.environ, RAG_LOUPE_CACHE=str(tmp_path / "cache"))
    cmd = [
        sys.executable,
        "-m",
        "rag_core",
        "ask",
        stack["questions"][1],
        "--question-encoder",
        str(stack["dpr_q"]),
        "--ctx-encoder",
        str(stack["dpr_ctx"]),
        "--generator",
        str(stack["bart"]),
        "--corpus",
        str(stack["corpus"]),
        "-k",
        "3",
        "--max-new-tokens",
        "5",
        "--rescore",
        rescore,
        "--csv",
        str(out_csv),
        "--json",
        "--device",
        "cpu",
    ]
    done = subprocess.run(cmd, cwd=ROOT, env=env, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr[-2000:]
    summary = json.loads(done.stdout)
    assert set(summary["answers"]) == {"rag-token", "rag-sequence"}
    assert summary["k"] == 3 and summary["scale"] == 1.0
    assert abs(sum(p["prior"] for p in summary["passages"]) - 1) < 1e-6

    rows = list(csv.DictReader(io.StringIO(out_csv.read_text(encoding="utf-8"))))
    assert rows and {r["decoding"] for r in rows} == {"rag-token", "rag-sequence"}
    groups: dict[tuple, list[dict]] = {}
    for r in rows:
        groups.setdefault((r["decoding"], r["candidate"], r["step"]), []).append(r)
    for key, group in groups.items():
        assert len(group) == 3, key
        for col in ("prior", "posterior_step", "posterior_prefix"):
            assert abs(sum(float(r[col]) for r in group) - 1) < 1e-6, (key, col)
        # an unscored pair (fast rescoring leaves it empty) counts p = 0 in the mixture
        mix = sum(float(r["prior"]) * float(r["p_token_doc"] or 0.0) for r in group)
        assert abs(mix - float(group[0]["p_token_mix"])) < 1e-6 * max(1.0, mix) + 1e-12, key
