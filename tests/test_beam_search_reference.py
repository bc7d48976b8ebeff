"""Our search against transformers' own `generate()` on random next-token tables.

A `TableLM` is a transformers model whose next-token distribution after a prefix is read from a
table, so `generate(num_beams=B)` runs transformers' real beam search (and greedy at B = 1) over
exactly the numbers our toy generator serves. Hundreds of random tables, with the end token given
a large share so that runner-up end tokens, early finishes and length-cut hypotheses all occur:
- RAG-Token: our search on the mixture = `generate` on a TableLM of the mixture Σ_z p(z) p_z(.);
- RAG-Sequence: each passage's hypotheses = `generate(num_return_sequences=B)` on its own table;
- the search score of each returned hypothesis = transformers' `sequences_scores`.
"""

from __future__ import annotations

import itertools

import numpy as np
import pytest
import torch

from rag_core.corpus import Passage
from rag_core.decoding.decode import SearchSettings, rag_sequence_beams, rag_token_decode
from rag_core.generators.toy import EOS, OTHER, ToyGenerator

WORDS = ["a", "b", "c", "d", "e"]
VOCAB = [EOS, OTHER] + WORDS  # the toy generator's own order: end token 0, catch-all 1
MAX_NEW = 4
CASES = 120


def random_tables(rng: np.random.Generator, k: int) -> dict[str, dict[str, dict[str, float]]]:
    """K passages, each with a strictly positive distribution after every prefix shorter than MAX_NEW."""
    tables = {}
    for z in range(k):
        table = {}
        for n in range(MAX_NEW):
            for prefix in itertools.product([OTHER] + WORDS, repeat=n):
                alpha = np.ones(len(VOCAB))
                alpha[0] = rng.uniform(0.5, 4.0)  # the end token often near the top
                p = rng.dirichlet(alpha) * 0.98 + 0.02 / len(VOCAB)  # (V,) > 0 everywhere
                table[" ".join(prefix)] = {w: float(x) for w, x in zip(VOCAB, p)}
        tables[f"z{z}"] = table
    return tables


def table_lm(next_logp):
    """A transformers causal LM over VOCAB (+ a start token) whose next-token log-probs after the
    generated prefix are `next_logp(prefix) -> (V,)`."""
    from transformers import GenerationMixin, PretrainedConfig, PreTrainedModel
    from transformers.modeling_outputs import CausalLMOutput

    start = len(VOCAB)

    class TableLM(PreTrainedModel, GenerationMixin):
        config_class = PretrainedConfig

        def __init__(self):
            super().__init__(
                PretrainedConfig(vocab_size=start + 1, eos_token_id=0, pad_token_id=0, bos_token_id=start)
            )
            self.dummy = torch.nn.Parameter(torch.zeros(1))

        def forward(self, input_ids=None, attention_mask=None, **kwargs):
            rows = []
            for seq in input_ids.tolist():
                steps = []
                for t in range(len(seq)):
                    lp = torch.full((start + 1,), float("-inf"))  # the start token is never generated
                    lp[:start] = next_logp(tuple(seq[1 : t + 1]))
                    steps.append(lp)
                rows.append(torch.stack(steps))
            return CausalLMOutput(logits=torch.stack(rows))  # (B, L, V + 1)

    return TableLM().eval(), start


def generate(next_logp, beams: int, returns: int = 1):
    model, start = table_lm(next_logp)
    with torch.no_grad():
        out = model.generate(
            torch.tensor([[start]]),
            num_beams=beams,
            num_return_sequences=returns,
            do_sample=False,
            max_new_tokens=MAX_NEW,
            early_stopping=False,
            length_penalty=1.0,
            use_cache=False,
            return_dict_in_generate=True,
            output_scores=True,
            eos_token_id=0,
            pad_token_id=0,
        )
    answers = []
    for seq in out.sequences.tolist():
        ids = []
        for t in seq[1:]:
            ids.append(t)
            if t == 0:
                break
        answers.append(ids)
    scores = out.sequences_scores.tolist() if beams > 1 else [None] * len(answers)
    return answers, scores


def setup(seed: int):
    rng = np.random.default_rng(seed)
    k = int(rng.integers(1, 4))
    gen = ToyGenerator(random_tables(rng, k))
    assert gen.vocab == VOCAB
    state = gen.prepare("q", [Passage(f"z{z}", "", "") for z in range(k)])
    log_pz = torch.tensor(rng.dirichlet(np.ones(k)), dtype=torch.float64).log()  # (K,)
    return gen, state, log_pz, k


def table_logp(gen: ToyGenerator, z: int):
    return lambda prefix: gen._dist(gen.tables[f"z{z}"], prefix).float()  # (V,)


@pytest.mark.parametrize("beams", [1, 2, 3])
@pytest.mark.slow  # over 5 s on 2 cores
def test_rag_token_search_equals_generate(beams):
    mismatches, shapes = [], set()
    for seed in range(CASES):
        gen, state, log_pz, k = setup(seed)
        mix = lambda prefix: torch.logsumexp(  # noqa: E731  (V,) log Σ_z p(z) p_z(.)
            log_pz.view(k, 1) + torch.stack([gen._dist(gen.tables[f"z{z}"], prefix) for z in range(k)]), dim=0
        ).float()
        ours = rag_token_decode(gen, state, log_pz, SearchSettings(beams=beams, max_new_tokens=MAX_NEW))[0]
        (ref,), (ref_score,) = generate(mix, beams)
        if ours.tokens != ref or (ref_score is not None and abs(ours.search_score - ref_score) > 1e-5):
            mismatches.append((seed, ours.tokens, ref, ours.search_score, ref_score))
        shapes.add((ours.length, ours.finished))
    assert not mismatches, mismatches[:5]
    assert {f for _, f in shapes} == {True, False}  # both ended and length-cut answers were compared


@pytest.mark.parametrize("beams", [1, 2, 3])
@pytest.mark.slow  # over 5 s on 2 cores
def test_each_passage_search_equals_generate(beams):
    mismatches = []
    for seed in range(CASES // 2):
        gen, state, _, k = setup(seed)
        per_passage = rag_sequence_beams(gen, state, SearchSettings(beams=beams, max_new_tokens=MAX_NEW))
        for z in range(k):
            refs, ref_scores = generate(table_logp(gen, z), beams, returns=beams)
            ours = [h.tokens for h in per_passage[z]]
            if ours != refs:
                mismatches.append((seed, z, ours, refs))
            elif beams > 1:
                got = [h.search_score for h in per_passage[z]]
                if max(abs(a - b) for a, b in zip(got, ref_scores)) > 1e-5:
                    mismatches.append((seed, z, got, ref_scores))
    assert not mismatches, mismatches[:5]
