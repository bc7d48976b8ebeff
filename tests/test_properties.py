"""Property tests over the marginals and the CSV writer: random priors and conditionals, extreme
logits, K from 1 to 50. Probabilities stay in [0, 1], the sums of docs/design.md §4.3 hold, no NaN/inf."""

import io

import numpy as np
import pandas as pd
import torch
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from rag_core import marginals
from rag_core.corpus import Passage
from rag_core.trace import Candidate, Hit, Trace

from conftest import check_trace_invariants

logits = st.floats(min_value=-1e4, max_value=1e4, allow_nan=False, allow_infinity=False)


@st.composite
def cases(draw):
    k = draw(st.integers(1, 50))
    t = draw(st.integers(1, 8))
    scores = torch.tensor(draw(st.lists(logits, min_size=k, max_size=k)), dtype=torch.float64)
    scale = draw(st.sampled_from([0.01, 1.0, 20.0, 1000.0]))
    raw = torch.tensor(
        draw(st.lists(st.lists(logits, min_size=t, max_size=t), min_size=k, max_size=k)), dtype=torch.float64
    )
    cond = torch.log_softmax(torch.stack([raw, torch.zeros_like(raw)], -1), -1)[
        ..., 0
    ]  # (K, T) valid log-probs
    return marginals.log_prior(scores, scale), cond


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(cases())
def test_marginals_stay_probabilities(case):
    lpz, cond = case
    for value in (marginals.rag_sequence(lpz, cond), marginals.rag_token(lpz, cond)):
        assert not torch.isnan(value) and value <= 1e-9
    mix = marginals.token_mixture(lpz, cond)  # (T,)
    assert torch.isfinite(mix).all() and (mix <= 1e-9).all()
    for table in (marginals.responsibilities(lpz, cond), marginals.prefix_posteriors(lpz, cond)):
        assert not torch.isnan(table).any()
        assert ((table >= 0) & (table <= 1 + 1e-9)).all()
        assert torch.allclose(table.sum(0), torch.ones(table.shape[1], dtype=torch.float64), atol=1e-6)
    assert torch.allclose(
        marginals.citation(lpz, cond).sum(), torch.tensor(1.0, dtype=torch.float64), atol=1e-6
    )
    # A mixture lies between its weighted best component and its best component:
    # max_z [log p(z) + log p(y|z)] <= log p_seq(y) <= max_z log p(y|z); per step the same for p_tok.
    seq_doc = cond.sum(-1)  # (K,) log p(y|x,z)
    p_seq = float(marginals.rag_sequence(lpz, cond))
    assert float((lpz + seq_doc).max()) - 1e-9 <= p_seq <= float(seq_doc.max()) + 1e-9
    assert ((lpz.view(-1, 1) + cond).max(0).values - 1e-9 <= mix).all()
    assert (mix <= cond.max(0).values + 1e-9).all()


@settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(cases())
def test_marginals_equal_a_brute_force_loop_over_passages(case):
    """The vectorised marginals = a plain Python loop over passages and steps (np.logaddexp)."""
    lpz, cond = case
    k, t = cond.shape
    seq = float("-inf")
    for z in range(k):
        seq = np.logaddexp(seq, float(lpz[z]) + sum(float(cond[z, i]) for i in range(t)))
    tok = 0.0
    for i in range(t):
        step = float("-inf")
        for z in range(k):
            step = np.logaddexp(step, float(lpz[z]) + float(cond[z, i]))
        tok += step
    assert abs(float(marginals.rag_sequence(lpz, cond)) - seq) <= 1e-9 * max(1.0, abs(seq))
    assert abs(float(marginals.rag_token(lpz, cond)) - tok) <= 1e-9 * max(1.0, abs(tok))


texts = st.text(alphabet=st.characters(blacklist_categories=("Cs",)), min_size=0, max_size=30)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(cases(), texts, texts)
def test_csv_round_trip_keeps_invariants_and_is_spreadsheet_safe(case, title, token):
    lpz, cond = case
    k, t = cond.shape
    hits = [Hit(i + 1, Passage(f"=id{i}", title or "t", "text"), float(i)) for i in range(k)]
    cand = Candidate(
        "rag-token",
        0,
        "-answer" + token,
        list(range(t)),
        [token] * t,
        cond.float(),
        torch.zeros((k, t, 1), dtype=torch.long),
        [[["x"]] * t] * k,
        torch.zeros((k, t, 1)),
    )
    trace = Trace("@question", "idx", hits, lpz, 1.0, [cand])
    frame = pd.read_csv(io.StringIO(trace.to_csv()), keep_default_na=False, na_values=[""])
    assert len(frame) == k * t
    assert not frame[["prior", "posterior_step", "posterior_prefix"]].isna().any().any()
    check_trace_invariants(frame)
    for col in ("query", "doc_id", "answer"):
        assert not frame[col].astype(str).str.match(r"^[=+\-@]").any()
    assert np.isfinite(frame["prior"]).all()
