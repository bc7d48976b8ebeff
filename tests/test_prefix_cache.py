"""The causal generator's shared prefix: computed once, reused by every row and question, and giving
the same numbers as a plain left-padded forward of the full prompts. Run on the tiny Llama, which
reads the untrained base's few-shot prompt (its shared prefix is most of every prompt) with the same
architecture and tokenizer; the trained default's short plain prompt is checked against a plain
forward too."""

from types import SimpleNamespace

import pytest
import torch
from transformers.integrations.sdpa_attention import sdpa_attention_forward

from rag_core.corpus import Passage
from rag_core.generators import causal
from rag_core.generators.shared_prefix import causal_mask, shared_prefix_attention

TOL = 1e-4  # docs/results.md's figure: the cached prefix changes log-probs by < 1e-4 (float32, another order)


@pytest.fixture(scope="module")
def gen(tiny_llama_pipeline):
    return tiny_llama_pipeline.models.generator


def plain_forward(gen, prompts, answer_ids=None):
    """The reference: full prompts, left-padded, one forward, no cache reuse. (R, V) or (R, T, V)."""
    with causal.TOKENIZER_LOCK:
        gen.tokenizer.padding_side = "left"
        enc = gen.tokenizer(prompts, return_tensors="pt", padding=True, add_special_tokens=False)
    ids, attn = enc["input_ids"], enc["attention_mask"]  # (R, L)
    if answer_ids is not None:
        ids = torch.cat([ids, answer_ids[:, :-1]], 1)  # (R, L+T-1)
        attn = torch.cat([attn, torch.ones_like(answer_ids[:, :-1])], 1)
    with torch.inference_mode():
        out = gen.model(input_ids=ids, attention_mask=attn, position_ids=(attn.cumsum(-1) - 1).clamp(min=0))
    logp = torch.log_softmax(out.logits.float(), -1)  # (R, L', V)
    return logp[:, -1] if answer_ids is None else logp[:, -answer_ids.shape[1] :]


@pytest.mark.parametrize("stack", ["tiny_llama", pytest.param("default", marks=pytest.mark.slow)])
def test_prepare_matches_a_plain_forward(request, stack):
    pipe = request.getfixturevalue(f"{stack}_pipeline")
    gen = pipe.models.generator
    assert gen.prompt_style == ("few-shot" if stack == "tiny_llama" else "plain")
    q = "Who wrote Moby-Dick?"
    passages = [h.passage for h in pipe.retrieve(q, 2)]
    passages.append(Passage("x", "A short one", "Tiny."))  # rows of very different lengths
    state = gen.prepare(q, passages)
    ref = plain_forward(gen, [causal.rag_prompt(q, p, gen.prompt_style) for p in passages])  # (K, V)
    print(f"prompt pass vs plain forward: max |Δ log p| = {(state.logprobs - ref).abs().max():.1e}")
    assert (state.logprobs - ref).abs().max() < TOL
    answers = torch.tensor([gen.encode_answer("Herman Melville")] * len(passages))  # (K, T)
    forced = gen.teacher_force(state, answers)  # (K, T, V)
    ref_forced = plain_forward(gen, [causal.rag_prompt(q, p, gen.prompt_style) for p in passages], answers)
    print(f"teacher forcing vs plain forward: max |Δ log p| = {(forced - ref_forced).abs().max():.1e}")
    assert (forced - ref_forced).abs().max() < TOL


def test_closed_book_matches_a_plain_forward(gen):
    q = "In what year did the Berlin Wall fall?"
    state = gen.prepare(q, None)
    assert (state.logprobs - plain_forward(gen, [causal.closed_book_prompt(q)])).abs().max() < TOL


def test_the_prefix_is_computed_once(tiny_llama_pipeline, gen):
    q = "Who painted the Mona Lisa?"
    passages = [h.passage for h in tiny_llama_pipeline.retrieve(q, 3)]
    gen.prepare(q, passages)
    before = dict(gen._prefix_store)
    start = causal.ForwardCounter.count
    gen.prepare("Who wrote Hamlet?", passages)
    assert gen._prefix_store.keys() == before.keys()  # no new prefix entry for a new question
    assert all(gen._prefix_store[k] is before[k] for k in before)
    assert causal.ForwardCounter.count - start == 1  # the rows' own tokens only
    # the shared part really is most of the prompt
    n_prefix = len(gen.tokenizer.encode(causal.rag_prefix(), add_special_tokens=False))
    n_full = len(gen.tokenizer.encode(causal.rag_prompt(q, passages[0]), add_special_tokens=False))
    assert n_prefix > n_full / 2


def test_decoding_after_a_beam_reorder_matches_a_plain_forward(tiny_llama_pipeline, gen):
    """The decode loop's own path: prompt pass, a beam reorder that drops and repeats rows, two
    steps. Rows keep only their own keys/values; the shared prefix is read, never copied."""
    q = "Who wrote Moby-Dick?"
    passages = [h.passage for h in tiny_llama_pipeline.retrieve(q, 3)]
    state = gen.prepare(q, passages)
    idx = torch.tensor([2, 0, 0])  # row 1 dropped, row 0 twice
    state = gen.select(state, idx)
    answers = torch.tensor([gen.encode_answer("Herman Melville is")[:3]] * 3)  # (3, T=3)
    answers[1, 0] = gen.encode_answer("Moby")[0]  # the two copies of row 0 part ways
    for step in range(2):
        state = gen.advance(state, answers[:, step])
    prompts = [causal.rag_prompt(q, passages[i]) for i in idx.tolist()]
    ref = plain_forward(gen, prompts, answers)[:, 2]  # (3, V): after the prompt and two tokens
    print(
        "two steps after a reorder vs plain forward: "
        f"max |Δ log p| = {(state.logprobs - ref).abs().max():.1e}"
    )
    assert (state.logprobs - ref).abs().max() < TOL


def test_shared_prefix_attention_equals_sdpa_on_a_joined_cache():
    """The attention alone, on random tensors with grouped key/value heads (3 query heads per
    key/value head, as the default model has) and a left-padded row whose first query sees nothing."""
    torch.manual_seed(0)
    r, h, hkv, n, m, t, d = 3, 6, 2, 7, 5, 3, 8
    module = SimpleNamespace(layer_idx=0, num_key_value_groups=h // hkv, is_causal=True, training=False)
    pk, pv = torch.randn(1, hkv, n, d), torch.randn(1, hkv, n, d)  # the shared prefix
    q = torch.randn(r, h, t, d)
    k, v = torch.randn(r, hkv, m, d), torch.randn(r, hkv, m, d)  # each row's own tokens, this step's last
    visible = torch.ones(r, n + m, dtype=torch.long)
    visible[1, n : n + 3] = 0  # row 1: left padding after the prefix
    mask = causal_mask(visible, t)  # (R, 1, T, n+m)
    mask[2, :, 0, :] = False  # row 2's first query sees nothing (a padding position)
    ours, _ = shared_prefix_attention(module, q, k, v, mask, scaling=d**-0.5, shared_prefix=[(pk, pv)])
    ref, _ = sdpa_attention_forward(
        module,
        q,
        torch.cat([pk.expand(r, -1, -1, -1), k], 2),
        torch.cat([pv.expand(r, -1, -1, -1), v], 2),
        mask,
        scaling=d**-0.5,
    )
    assert ours.shape == ref.shape == (r, t, h, d)
    assert torch.isfinite(ours).all()
    seen = mask.any(-1)[:, 0]  # (R, T): queries that see at least one key
    assert (ours - ref)[seen].abs().max() < 1e-5
