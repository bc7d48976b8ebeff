"""Training (rag_core/training): the analytic retriever gradient against autograd, the two cases
where it vanishes, the differentiable passes against the inference passes, and short runs on tiny
random models (query encoder, LoRA generator, a resumed run, the saved folders loaded back)."""

import math
import re

import pytest
import torch

from rag_core import marginals
from rag_core.analysis.evaluation.questions import EvalQuestion
from rag_core.config import AnswerSettings
from rag_core.corpus import Passage, read_corpus_file
from rag_core.decoding.decode import score_answers
from rag_core.generators import load_generator
from rag_core.generators.causal import CausalGenerator
from rag_core.pipeline import Models
from rag_core.retrieval.encoders import MeanPoolEncoder, load_encoder
from rag_core.retrieval.index import PassageIndex
from rag_core.toys.tiny_models import bart_tokenizer, build_tiny_stack, dpr_tokenizers
from rag_core.trace import Hit
from rag_core.training import checkpoint, heldout, lora
from rag_core.training.conditionals import answer_token_logp
from rag_core.training.gradient import bracket, log_likelihood, query_gradient
from rag_core.training.loop import (
    TrainSettings,
    question_loss,
    question_terms,
    restore,
    snapshot,
    start_run,
    train,
)
from rag_core.training.output import save_outputs
from rag_core.training.query import query_model, query_tensor

from conftest import tiny_llama

CPU = torch.device("cpu")


def random_case(k: int, t: int = 4, dim: int = 6, vocab: int = 7, seed: int = 0):
    """q (D,), d (K, D), token log-probs (K, T) read off random next-token tables, a mask with padding."""
    g = torch.Generator().manual_seed(seed)
    q = torch.randn(dim, generator=g, dtype=torch.float64)
    d = torch.randn(k, dim, generator=g, dtype=torch.float64)
    tables = torch.log_softmax(
        torch.randn(k, t, vocab, generator=g, dtype=torch.float64) * 2, dim=-1
    )  # (K, T, V)
    answer = torch.randint(0, vocab, (t,), generator=g)
    token_logp = tables.gather(-1, answer.view(1, t, 1).expand(k, t, 1)).squeeze(-1)  # (K, T)
    mask = torch.ones(t, dtype=torch.bool)
    mask[-1] = seed % 2 == 1  # odd seeds: a padded last step
    return q, d, token_logp, mask


@pytest.mark.parametrize("marginal", ["sequence", "token"])
@pytest.mark.parametrize("k", [1, 2, 5, 9])
@pytest.mark.parametrize("seed", [0, 1])
def test_the_analytic_gradient_equals_autograd(marginal, k, seed):
    q, d, token_logp, mask = random_case(k, seed=seed)
    scale = 0.5  # a spread-out prior: every passage matters
    q = q.clone().requires_grad_(True)
    log_pz = marginals.log_prior(d @ q, scale)  # (K,)
    log_likelihood(marginal, log_pz, token_logp, mask).backward()
    analytic = query_gradient(bracket(marginal, log_pz.detach(), token_logp, mask), d, scale)  # (D,)
    assert torch.allclose(analytic, q.grad, atol=1e-6, rtol=0), (analytic, q.grad)
    if k > 1:  # with one passage the gradient is zero by design (tested below)
        assert q.grad.abs().max() > 1e-3  # a real signal, not two zeros agreeing


@pytest.mark.parametrize("marginal", ["sequence", "token"])
def test_the_bracket_vanishes_with_one_passage_or_equal_conditionals(marginal):
    q, d, token_logp, mask = random_case(1, seed=3)
    one = marginals.log_prior(d @ q, 2.0)
    assert torch.allclose(
        bracket(marginal, one, token_logp, mask), torch.zeros(1, dtype=torch.float64), atol=1e-12
    )
    q, d, token_logp, mask = random_case(5, seed=4)
    equal = token_logp[:1].expand(5, -1)  # every passage explains the answer the same way
    log_pz = marginals.log_prior(d @ q, 2.0)
    assert torch.allclose(
        query_gradient(bracket(marginal, log_pz, equal, mask), d, 2.0),
        torch.zeros(6, dtype=torch.float64),
        atol=1e-12,
    )
    assert bracket(marginal, log_pz, token_logp, mask).abs().max() > 1e-3  # and unequal ones do pull


# ------------------------------------------------------------------------------------ tiny stack
@pytest.fixture(scope="module")
def stack(tmp_path_factory):
    return build_tiny_stack(tmp_path_factory.mktemp("tiny"))


def tiny_questions(corpus) -> list[EvalQuestion]:
    """Questions the tiny corpus answers: 'Who built the old bridge of Paris?' -> the person named."""
    out = []
    for p in read_corpus_file(str(corpus)).passages[:8]:
        m = re.match(r"The (.+?) was (\w+) by (.+?) in \d+\.", p.text)
        out.append(EvalQuestion(f"Who {m.group(2)} the {m.group(1)}?", [m.group(3)]))
    return out


def tiny_models(stack) -> tuple[Models, PassageIndex]:
    encoder = load_encoder(str(stack["dpr_q"]), str(stack["dpr_ctx"]), CPU)
    passages = read_corpus_file(str(stack["corpus"])).passages
    index = PassageIndex.build(encoder.encode_passages(passages), passages, encoder.id)
    return Models(encoder, load_generator(str(stack["bart"]), CPU), CPU), index


def test_the_differentiable_query_vector_equals_the_encoders(stack):
    dpr, _ = tiny_models(stack)
    texts = ["Who built the old bridge of Paris?", "Where is the library?"]
    assert torch.allclose(
        query_tensor(dpr.encoder, texts), torch.from_numpy(dpr.encoder.encode_queries(texts)), atol=1e-5
    )
    from transformers import BertConfig, BertModel

    tok, _ = dpr_tokenizers(texts)
    torch.manual_seed(0)
    bert = BertModel(
        BertConfig(
            vocab_size=len(tok),
            hidden_size=16,
            num_hidden_layers=1,
            num_attention_heads=2,
            intermediate_size=32,
        )
    ).eval()
    pooled = MeanPoolEncoder("tiny-minilm", bert, tok, CPU)
    assert torch.allclose(
        query_tensor(pooled, texts), torch.from_numpy(pooled.encode_queries(texts)), atol=1e-5
    )


def tiny_causal(stack) -> CausalGenerator:
    """A tiny random Llama reading the generator's real few-shot prompt (byte-level BPE tokenizer)."""
    tok = bart_tokenizer([p.text for p in read_corpus_file(str(stack["corpus"])).passages] * 3)
    return CausalGenerator(tiny_llama(len(tok), bos=0, eos=2, pad=1, width=16), tok, "tiny-llama", CPU)


def test_the_differentiable_conditionals_equal_teacher_forcing(stack):
    models, index = tiny_models(stack)
    passages = index.passages[:3]
    for gen in (models.generator, tiny_causal(stack)):
        answer = gen.encode_answer("Ada Lovelace")
        expected, _, _, _ = score_answers(
            gen, gen.prepare("Who built it?", passages), [answer], top_alternatives=1
        )
        got = answer_token_logp(gen, "Who built it?", passages, answer)  # (K, T)
        assert got.shape == expected[0].shape
        assert torch.allclose(got, expected[0].float(), atol=2e-5), (gen.id, (got - expected[0]).abs().max())


def test_the_loop_hands_the_encoder_the_gradient_autograd_would(stack):
    models, index = tiny_models(stack)
    qs = tiny_questions(stack["corpus"])
    run = start_run(models, index, qs, TrainSettings(part="query", k=4, marginal="token"))
    question_loss(run, 0, 1.0)
    ours = [p.grad.clone() for p in query_model(models.encoder).parameters()]
    for p in query_model(models.encoder).parameters():
        p.grad = None
    q = query_tensor(models.encoder, [qs[0].question])[0]  # the same loss, now through autograd end to end
    _, rows = index.search(q.detach().numpy()[None], 4)
    d = torch.from_numpy(index.index.reconstruct_batch(rows[0])).double()
    token_logp = run.remembered[(0, tuple(index.passages[int(r)].id for r in rows[0]))]
    (-log_likelihood("token", marginals.log_prior(d @ q.double(), run.scale), token_logp)).backward()
    theirs = [p.grad for p in query_model(models.encoder).parameters()]
    worst = max(float((a - b).abs().max() / (b.abs().max() + 1e-12)) for a, b in zip(ours, theirs))
    assert worst < 1e-5, worst


@torch.no_grad()
def dataset_loss(run) -> float:
    """Mean −log p(y|x) over the training questions with the current weights (no step taken)."""
    return sum(float(question_terms(run, qi).loss) for qi in range(len(run.questions))) / len(run.questions)


@pytest.mark.parametrize("part", ["query", "generator"])
def test_a_few_steps_lower_the_loss(stack, tmp_path, part):
    models, index = tiny_models(stack)
    lr = {"query": 3e-3, "generator": 3e-2}[part]
    run = start_run(
        models, index, tiny_questions(stack["corpus"]), TrainSettings(part=part, k=3, steps=6, batch=4, lr=lr)
    )
    before = dataset_loss(run)
    assert not train(run, tmp_path)
    after = dataset_loss(run)
    assert after < before - 0.05, (before, after, run.losses)


@pytest.mark.parametrize("generator", ["bart", "causal"])
def test_saved_folders_load_back_with_the_same_numbers(stack, tmp_path, generator):
    models, index = tiny_models(stack)
    if generator == "causal":
        models = Models(models.encoder, tiny_causal(stack), CPU)
    lora.save_generator(models.generator, tmp_path / "base")  # the untrained generator, to compare with
    base = load_generator(str(tmp_path / "base"), CPU)
    run = start_run(
        models, index, tiny_questions(stack["corpus"]), TrainSettings(part="both", k=3, steps=2, lr=1e-2)
    )
    train(run, tmp_path)
    trained, outputs = save_outputs(run, tmp_path)
    assert outputs == {"question_encoder": "question_encoder", "generator": "generator"}
    assert (tmp_path / "generator" / "adapter" / "adapter_config.json").is_file()
    passages, answer = index.passages[:3], trained.generator.encode_answer("Marie Curie")
    loaded = load_generator(str(tmp_path / "generator"), CPU)
    assert type(loaded) is type(models.generator)
    assert torch.allclose(
        answer_token_logp(loaded, "Who?", passages, answer),
        answer_token_logp(trained.generator, "Who?", passages, answer),
        atol=1e-5,
    )
    assert not torch.allclose(
        answer_token_logp(base, "Who?", passages, answer),  # and training changed it
        answer_token_logp(loaded, "Who?", passages, answer),
        atol=1e-4,
    )
    enc = load_encoder(str(tmp_path / "question_encoder"), str(stack["dpr_ctx"]), CPU)
    texts = ["Who built the old bridge of Paris?"]
    assert torch.allclose(
        torch.from_numpy(enc.encode_queries(texts)),
        torch.from_numpy(trained.encoder.encode_queries(texts)),
        atol=1e-5,
    )


@pytest.mark.parametrize("part", ["query", "both"])
def test_a_resumed_run_ends_where_an_uninterrupted_one_does(stack, tmp_path, part):
    settings = TrainSettings(part=part, k=3, steps=4, batch=2, lr=1e-2, checkpoint_every=1)
    qs = tiny_questions(stack["corpus"])
    whole = start_run(*tiny_models(stack), qs, settings)
    train(whole, tmp_path / "whole")
    first = start_run(*tiny_models(stack), qs, settings)
    stops = iter([False, False, True])
    assert train(first, tmp_path / "cut", should_stop=lambda: next(stops))  # stopped after 2 steps
    again = start_run(*tiny_models(stack), qs, settings)  # a new process: fresh models
    restore(again, checkpoint.load(tmp_path / "cut"))
    assert again.step == 2 and again.losses == first.losses
    train(again, tmp_path / "cut")
    assert again.losses == whole.losses
    for part, tensors in snapshot(whole).weights.items():
        for name, value in tensors.items():
            assert torch.equal(value, snapshot(again).weights[part][name]), (part, name)


class StubPipeline:
    """Answers and top-K passages fixed per question: held-out figures can be counted by hand."""

    def __init__(self, table, settings):
        self.table = table  # question -> (token answer, sequence answer, [passage texts])
        self.settings = settings

    def run(self, question, settings):
        tok, seq, texts = self.table[question]
        hits = [Hit(r + 1, Passage(t, "", t), 1.0) for r, t in enumerate(texts)]
        answers = {"rag-token": tok, "rag-sequence": seq}
        return type(
            "T", (), {"hits": hits, "answer": lambda self, d: type("C", (), {"answer": answers[d]})()}
        )()


def test_held_out_figures_count_em_recall_and_the_collapse_monitor():
    pipe = StubPipeline(
        {
            "q1": ("Paris", "Lyon", ["Paris is the capital", "Lyon"]),  # token right; the answer at rank 1
            "q2": ("Rome", "Rome", ["Milan", "in Rome"]),  # both right; the answer at rank 2
            "q3": ("x", "y", ["Milan", "Lyon"]),  # both wrong; no passage holds it
        },
        AnswerSettings(k=2),
    )
    qs = [EvalQuestion("q1", ["Paris"]), EvalQuestion("q2", ["Rome"]), EvalQuestion("q3", ["Oslo"])]
    h = heldout.evaluate(pipe, qs)
    assert h.em == {"rag-token": 2 / 3, "rag-sequence": 1 / 3}
    assert (h.recall_at_1, h.recall_at_k) == (1 / 3, 2 / 3)
    assert h.distinct == 4  # "Paris is the capital", "Lyon", "Milan", "in Rome"; Milan and Lyon twice
    assert h.entropy_bits == pytest.approx(-2 * (2 / 6) * math.log2(2 / 6) - 2 * (1 / 6) * math.log2(1 / 6))
