"""The vectorised marginals against a brute-force loop over passages, on random numbers."""

import math
import random

import pytest
import torch

from rag_core import marginals


def brute(prior, cond):
    """Plain Python: prior[k], cond[k][t] probabilities."""
    k, t = len(prior), len(cond[0])
    p_seq = sum(prior[z] * math.prod(cond[z]) for z in range(k))
    mix = [sum(prior[z] * cond[z][i] for z in range(k)) for i in range(t)]
    p_tok = math.prod(mix)
    resp = [[prior[z] * cond[z][i] / mix[i] for i in range(t)] for z in range(k)]
    post = []
    for z in range(k):
        row = []
        for i in range(t):
            num = prior[z] * math.prod(cond[z][: i + 1])
            den = sum(prior[w] * math.prod(cond[w][: i + 1]) for w in range(k))
            row.append(num / den)
        post.append(row)
    return p_seq, p_tok, mix, resp, post


@pytest.mark.parametrize("seed", range(8))
def test_vectorised_matches_brute_force(seed):
    rng = random.Random(seed)
    k, t = rng.randint(1, 7), rng.randint(1, 6)
    raw = [rng.random() + 0.01 for _ in range(k)]
    prior = [r / sum(raw) for r in raw]
    cond = [[rng.random() * 0.98 + 0.01 for _ in range(t)] for _ in range(k)]
    p_seq, p_tok, mix, resp, post = brute(prior, cond)
    lpz = torch.tensor(prior, dtype=torch.float64).log()
    lc = torch.tensor(cond, dtype=torch.float64).log()
    assert marginals.rag_sequence(lpz, lc).exp().item() == pytest.approx(p_seq, rel=1e-9)
    assert marginals.rag_token(lpz, lc).exp().item() == pytest.approx(p_tok, rel=1e-9)
    assert marginals.token_mixture(lpz, lc).exp().tolist() == pytest.approx(mix, rel=1e-9)
    assert marginals.responsibilities(lpz, lc).tolist() == [pytest.approx(r, rel=1e-9) for r in resp]
    assert marginals.prefix_posteriors(lpz, lc).tolist() == [pytest.approx(r, rel=1e-9) for r in post]
    assert marginals.citation(lpz, lc).tolist() == pytest.approx([row[-1] for row in post], rel=1e-9)


def test_batched_candidates_with_padding_equal_one_by_one():
    torch.manual_seed(0)
    lpz = torch.log_softmax(torch.randn(4, dtype=torch.float64), -1)
    lc = torch.log(torch.rand(3, 4, 5, dtype=torch.float64))  # (N, K, T)
    mask = torch.tensor([[1, 1, 1, 1, 1], [1, 1, 0, 0, 0], [1, 1, 1, 0, 0]], dtype=torch.bool)
    batched = marginals.rag_sequence(lpz, lc, mask)
    for n in range(3):
        t = int(mask[n].sum())
        assert batched[n].item() == pytest.approx(marginals.rag_sequence(lpz, lc[n, :, :t]).item())
        assert marginals.rag_token(lpz, lc, mask)[n].item() == pytest.approx(
            marginals.rag_token(lpz, lc[n, :, :t]).item()
        )


def test_long_answers_do_not_underflow():
    """500 tokens at p=0.01 each: raw products underflow to 0, log space does not."""
    lpz = torch.log(torch.tensor([0.5, 0.5], dtype=torch.float64))
    lc = torch.full((2, 500), math.log(0.01), dtype=torch.float64)
    assert marginals.rag_sequence(lpz, lc).item() == pytest.approx(500 * math.log(0.01))
    assert marginals.rag_token(lpz, lc).item() == pytest.approx(500 * math.log(0.01))
    assert marginals.prefix_posteriors(lpz, lc)[:, -1].tolist() == pytest.approx([0.5, 0.5])


def test_unscored_pairs_count_as_zero_and_posteriors_stay_normalised():
    lpz = torch.log(torch.tensor([0.6, 0.4], dtype=torch.float64))
    lc = torch.tensor([[math.log(0.5), math.log(0.5)], [float("nan"), float("nan")]], dtype=torch.float64)
    assert marginals.rag_sequence(lpz, lc).exp().item() == pytest.approx(0.6 * 0.25)
    post = marginals.prefix_posteriors(lpz, lc)
    assert post[:, -1].tolist() == pytest.approx([1.0, 0.0])
    dead = torch.full((2, 3), float("-inf"), dtype=torch.float64)
    assert torch.allclose(marginals.responsibilities(lpz, dead).sum(0), torch.ones(3, dtype=torch.float64))


def test_drop_passage_renormalises_prior():
    lpz = torch.log(torch.tensor([0.5, 0.3, 0.2], dtype=torch.float64))
    out = marginals.drop_passages(lpz, torch.tensor([True, False, True])).exp()
    assert out.tolist() == pytest.approx([0.5 / 0.7, 0.0, 0.2 / 0.7])
