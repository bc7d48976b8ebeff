"""Hand-made models from assets/examples/*.json, run through the real marginals, decoding and trace.

A toy gives passages with a prior (or 2-D vectors and a query vector for the retriever), and per
passage a table of next-word probabilities (see `generators.toy`). `run_toy` returns the prior,
the trace of the listed candidates under both marginals, and the decoded answers.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass
from pathlib import Path

import torch

from rag_core import marginals
from rag_core.config import ASSETS, RAG_SEQUENCE, RAG_TOKEN, AnswerSettings
from rag_core.corpus import Passage
from rag_core.decoding.answering import analyse, to_candidates
from rag_core.decoding.decode import Scored, score_answers
from rag_core.generators.toy import ToyGenerator
from rag_core.trace import Candidate, Hit, Trace

EXAMPLES = ASSETS / "examples"


class ToyError(ValueError):
    """A toy file is missing or malformed; the message says why."""


@dataclass
class ToyResult:
    spec: dict
    hits: list[Hit]
    log_prior: torch.Tensor  # (K,)
    trace: Trace | None  # candidates scored under both marginals (None for a retriever-only toy)
    decoded: Trace | None  # what decoding itself produces from the toy


def load_spec(name_or_path: str) -> dict:
    path = Path(name_or_path)
    if not path.suffix:
        path = EXAMPLES / f"{name_or_path}.json"
    if not path.is_file():
        names = ", ".join(sorted(p.stem for p in EXAMPLES.glob("*.json") if p.stem != "questions"))
        raise ToyError(f"no toy example {name_or_path!r} (shipped: {names})")
    try:
        spec = json.loads(path.read_text(encoding="utf-8"))
    except (ValueError, UnicodeDecodeError) as e:
        raise ToyError(f"{path.name} is not valid JSON: {e}") from None
    if not isinstance(spec, dict) or not isinstance(spec.get("passages"), list) or not spec["passages"]:
        raise ToyError(f"{path.name}: a toy needs a non-empty 'passages' list")
    return spec


def toy_prior(spec: dict) -> tuple[torch.Tensor, list[float]]:
    """log p(z|x) (K,) and the raw scores: from vectors (softmax of inner products) or given priors."""
    ps = spec["passages"]
    try:
        if "query_vector" in spec:
            q = torch.tensor(spec["query_vector"], dtype=torch.float64)  # (D,)
            d = torch.tensor([p["vector"] for p in ps], dtype=torch.float64)  # (K, D)
            scores = d @ q  # (K,)
            return marginals.log_prior(scores, float(spec.get("scale", 1.0))), scores.tolist()
        prior = torch.tensor([float(p["prior"]) for p in ps], dtype=torch.float64)  # (K,)
    except (KeyError, TypeError, ValueError, RuntimeError) as e:
        raise ToyError(f"toy passages need either 'vector' (with a 'query_vector') or 'prior': {e}") from None
    if not torch.isfinite(prior).all() or (prior < 0).any() or prior.sum() <= 0:
        raise ToyError("toy priors must be finite, non-negative and not all zero")
    # A given prior is treated as softmax(s) with s = log prior, so the score column stays meaningful.
    return torch.log(prior / prior.sum()), [math.log(p) if p > 0 else float("-inf") for p in prior.tolist()]


def check_tables(tables) -> None:
    """Each passage's table maps a prefix to next-word probabilities: each in [0, 1], summing to at
    most 1 (the rest is "any other word"). Anything else would make the marginals meaningless.

    >>> check_tables({"z1": {"": {"yes": 0.7, "no": 0.2}}})
    >>> check_tables({"z1": {"": {"yes": 0.7, "no": 0.5}}})
    Traceback (most recent call last):
    ...
    rag_core.toys.examples.ToyError: toy table z1, after '': the probabilities sum to 1.2, more than 1
    """
    if not isinstance(tables, dict):
        raise ToyError("toy 'tables' must map each passage id to its next-word table")
    for pid, table in tables.items():
        if not isinstance(table, dict):
            raise ToyError(f"toy table {pid} must map prefixes to next-word probabilities")
        for prefix, dist in table.items():
            where = f"toy table {pid}, after {prefix!r}"
            if not isinstance(dist, dict):
                raise ToyError(f"{where}: expected {{word: probability}}")
            try:
                probs = [float(v) for v in dist.values()]
            except (TypeError, ValueError):
                raise ToyError(f"{where}: every probability must be a number") from None
            if any(not (0.0 <= v <= 1.0) for v in probs):  # also rejects NaN
                raise ToyError(f"{where}: every probability must lie in [0, 1]")
            if sum(probs) > 1.0 + 1e-9:
                raise ToyError(f"{where}: the probabilities sum to {sum(probs):.3g}, more than 1")


def run_spec(spec: dict) -> ToyResult:
    log_pz, scores = toy_prior(spec)
    if "tables" in spec:
        check_tables(spec["tables"])
    hits = [
        Hit(i + 1, Passage(p["id"], p.get("title", p["id"]), p.get("text", ""), "toy"), s)
        for i, (p, s) in enumerate(zip(spec["passages"], scores))
    ]
    if "tables" not in spec:
        return ToyResult(spec, hits, log_pz, None, None)
    gen = ToyGenerator(spec["tables"])
    question = spec.get("question", "")
    state0 = gen.prepare(question, [h.passage for h in hits])
    answers = [gen.encode_answer(c) for c in spec.get("candidates", [])]
    candidates: list[Candidate] = []
    if answers:
        lp, mask, ids, vals = score_answers(gen, state0, answers)  # (N, K, T)
        scored = [
            Scored(a, lp[n, :, : len(a)], ids[n, :, : len(a)], vals[n, :, : len(a)])
            for n, a in enumerate(answers)
        ]
        for decoding, fn in ((RAG_TOKEN, marginals.rag_token), (RAG_SEQUENCE, marginals.rag_sequence)):
            ranked = sorted(scored, key=lambda s: float(fn(log_pz, s.token_logp)), reverse=True)
            candidates += to_candidates(gen, decoding, ranked)
    trace = Trace(question, f"toy:{spec.get('name', 'toy')}", hits, log_pz, 1.0, candidates)
    decoded = analyse(
        gen, question, hits, log_pz, AnswerSettings(beams=2, max_new_tokens=8), trace.index, 1.0, state0
    )
    return ToyResult(spec, hits, log_pz, trace, decoded)


def run_toy(name_or_path: str) -> ToyResult:
    return run_spec(load_spec(name_or_path))


def summary_lines(result: ToyResult) -> list[str]:
    """What `python -m rag_core toy NAME` prints."""
    if result.trace is None:
        return [" ".join(f"{p:.3f}" for p in result.log_prior.exp().tolist())]
    if result.spec.get("report") == "posterior":  # a spec may ask for p(z|x,y) of its one answer instead
        c = result.trace.candidates[0]
        return [" ".join(f"{p:.3f}" for p in marginals.citation(result.log_prior, c.token_logp).tolist())]
    lines = []
    for c in result.trace.of(RAG_SEQUENCE):
        p_seq = math.exp(c.log_p_seq(result.log_prior))
        p_tok = math.exp(c.log_p_tok(result.log_prior))
        lines.append(f"{c.answer}\tp_seq={p_seq:.3f}\tp_tok={p_tok:.3f}")
    order = {a: i for i, a in enumerate(result.spec.get("candidates", []))}
    return sorted(lines, key=lambda l: order.get(l.split("\t")[0], 99))
