"""The By-hand page's tables: toy specs built from what a user typed, and the numbers shown back.

Three shipped toys (assets/examples/obama.json, softmax.json, posterior.json) become editable
tables; the edited tables become a toy spec again, which `toys.run_spec` runs through the real
marginals, decoding and trace code. Nothing here draws or imports Streamlit: the page passes the
edited tables in and shows what comes out. A `result` below is what `toys.run_spec` returns (a
`toys.ToyResult`; this module sits beside `toys` in the engine's layers, so it does not import it).

An edit that cannot be a probability model raises `BadInput` (a ValueError) naming the cell and why.
"""

from __future__ import annotations

import copy
import math

import numpy as np
import pandas as pd

from rag_core import marginals
from rag_core.config import RAG_SEQUENCE

START = "(start)"  # how the tables show the empty prefix (the first word of an answer)


class BadInput(ValueError):
    """An edit that cannot be a probability model; the message says which cell and why."""


def numbers(col: pd.Series, what: str, probability: bool = True) -> list[float]:
    """The column as floats; with `probability`, each must lie in [0, 1]. Rows count from 1.

    >>> numbers(pd.Series([0.5, "0.25"]), "prior")
    [0.5, 0.25]
    >>> numbers(pd.Series([0.5, "lots"]), "prior")
    Traceback (most recent call last):
    ...
    rag_core.toys.by_hand.BadInput: every prior needs a number (row 2 does not)
    >>> numbers(pd.Series([-2.0, 3.0]), "coordinate", probability=False)
    [-2.0, 3.0]
    """
    vals = pd.to_numeric(col, errors="coerce")
    if vals.isna().any() or not np.isfinite(vals.to_numpy(dtype=float)).all():
        raise BadInput(
            f"every {what} needs a number (row {int(vals.isna().to_numpy().argmax()) + 1} does not)"
        )
    if probability and (vals < 0).any():
        raise BadInput(f"a {what} cannot be negative (row {int((vals < 0).to_numpy().argmax()) + 1})")
    if probability and (vals > 1).any():
        raise BadInput(f"a {what} cannot be above 1 (row {int((vals > 1).to_numpy().argmax()) + 1})")
    return vals.astype(float).tolist()


# ---------------- (a) two passages, two answers ----------------


def prior_table(spec: dict) -> pd.DataFrame:
    """One row per passage: id, title and prior p(z|x), as the page's prior editor shows them."""
    return pd.DataFrame(
        [{"passage": p["id"], "title": p["title"], "prior p(z|x)": p["prior"]} for p in spec["passages"]]
    )


def next_word_table(spec: dict) -> pd.DataFrame:
    """One row per (passage, prefix, next word) of the spec's tables; the empty prefix shows as START.

    >>> spec = {"tables": {"z1": {"": {"a": 0.5}, "a": {"b": 1.0}}}}
    >>> next_word_table(spec).values.tolist()
    [['z1', '(start)', 'a', 0.5], ['z1', 'a', 'b', 1.0]]
    """
    return pd.DataFrame(
        [
            {"passage": z, "after": pre or START, "next word": word, "p(word|x,z,after)": p}
            for z, table in spec["tables"].items()
            for pre, dist in table.items()
            for word, p in dist.items()
        ]
    )


def two_answer_spec(base: dict, prior_frame: pd.DataFrame, cond_frame: pd.DataFrame) -> dict:
    """`base` with the priors of `prior_frame` (in passage order) and the next-word tables rebuilt
    from the rows of `cond_frame` (fully blank rows skipped; repeated rows add up).

    >>> base = {"passages": [{"id": "z1", "prior": 1.0}], "tables": {}}
    >>> rows = pd.DataFrame([{"passage": "z1", "after": START, "next word": "yes", "p(word|x,z,after)": 0.25},
    ...                      {"passage": "z1", "after": " ", "next word": "yes", "p(word|x,z,after)": 0.5}])
    >>> two_answer_spec(base, pd.DataFrame({"prior p(z|x)": [0.5]}), rows)["tables"]
    {'z1': {'': {'yes': 0.75}}}
    """
    spec = copy.deepcopy(base)
    for p, v in zip(spec["passages"], numbers(prior_frame["prior p(z|x)"], "prior")):
        p["prior"] = v
    rows = cond_frame.dropna(how="all")
    probs = numbers(rows["p(word|x,z,after)"], "probability")
    tables: dict = {p["id"]: {} for p in spec["passages"]}
    for (_, r), p in zip(rows.iterrows(), probs):
        word, after = str(r["next word"] if pd.notna(r["next word"]) else "").strip(), r["after"]
        after = "" if pd.isna(after) or str(after).strip() in ("", START) else " ".join(str(after).split())
        if r["passage"] not in tables or not word or " " in word:
            raise BadInput("each row needs a passage and one next word (no spaces)")
        dist = tables[r["passage"]].setdefault(after, {})
        dist[word] = dist.get(word, 0.0) + p
        if sum(dist.values()) > 1 + 1e-9:
            raise BadInput(
                f"under {r['passage']} the next-word probabilities after “{after or START}” "
                "add up to more than 1"
            )
    spec["tables"] = tables
    return spec


def answer_rows(result) -> list[dict]:
    """Per candidate answer (in the spec's candidate order): p_seq, p_tok, p(y|x,z) for each passage
    and the RAG-Token mixture Σ_z p(z|x) p(y_j|x,z,y_<j) at each step (the last is the end token)."""
    lpz = result.log_prior
    rows = []
    for c in result.trace.of(RAG_SEQUENCE):
        p_doc = marginals.doc_sequence_logp(c.token_logp).exp().tolist()  # (K,) p(y|x,z)
        mix = marginals.token_mixture(lpz, c.token_logp).exp().tolist()  # (T,)
        row = {"answer": c.answer, "p_seq": math.exp(c.log_p_seq(lpz)), "p_tok": math.exp(c.log_p_tok(lpz))}
        row |= {f"p(y|x,{h.passage.id})": p for h, p in zip(result.hits, p_doc)}
        row |= {f"mixture at y_{j + 1}": v for j, v in enumerate(mix)}
        rows.append(row)
    order = {a: i for i, a in enumerate(result.spec.get("candidates", []))}
    rows.sort(key=lambda r: order.get(r["answer"], 99))
    return rows


# ---------------- (b) the retriever in two dimensions ----------------


def vector_table(spec: dict) -> pd.DataFrame:
    """The query vector, then one row per passage vector: columns vector, x, y."""
    return pd.DataFrame(
        [{"vector": "q (query)", "x": spec["query_vector"][0], "y": spec["query_vector"][1]}]
        + [{"vector": p["id"], "x": p["vector"][0], "y": p["vector"][1]} for p in spec["passages"]]
    )


def vector_spec(
    base: dict, vec_frame: pd.DataFrame, scale: float, query: tuple[float, float] | None = None
) -> dict:
    """`base` with the query vector (first row), the passage vectors (the rows after) and `scale`.
    With `query` given (the page's sliders), `vec_frame` holds the passage rows only.

    >>> base = {"query_vector": [1, 0], "passages": [{"id": "d1", "vector": [1, 0]}]}
    >>> s = vector_spec(base, pd.DataFrame({"x": [0.5, -1], "y": [2, 3]}), 4)
    >>> s["query_vector"], s["passages"][0]["vector"], s["scale"]
    ([0.5, 2.0], [-1.0, 3.0], 4.0)
    >>> vector_spec(base, pd.DataFrame({"x": [-1], "y": [3]}), 4, query=(0.2, 0.1))["query_vector"]
    [0.2, 0.1]
    """
    spec = copy.deepcopy(base)
    xs, ys = numbers(vec_frame["x"], "coordinate", False), numbers(vec_frame["y"], "coordinate", False)
    if query is None:
        query, xs, ys = (xs[0], ys[0]), xs[1:], ys[1:]
    spec["query_vector"] = [float(query[0]), float(query[1])]
    for p, x, y in zip(spec["passages"], xs, ys):
        p["vector"] = [x, y]
    spec["scale"] = float(scale)
    return spec


def prior_probs(result) -> list[float]:
    """p(z|x) of each passage, in hit order."""
    return result.log_prior.exp().tolist()


def retriever_table(result) -> pd.DataFrame:
    """One row per passage: its score s(z) = d·q and its prior p(z|x)."""
    return pd.DataFrame(
        {
            "passage": [h.passage.id for h in result.hits],
            "s(z) = d·q": [h.score for h in result.hits],
            "p(z|x)": prior_probs(result),
        }
    )


# ---------------- (c) prior to posterior ----------------


def posterior_table(spec: dict) -> pd.DataFrame:
    """One row per passage: prior p(z|x) and p(word|x,z) of the spec's one-word answer."""
    word = spec["candidates"][0]
    return pd.DataFrame(
        [
            {
                "passage": p["id"],
                "prior p(z|x)": p["prior"],
                f"p({word}|x,z)": spec["tables"][p["id"]][""][word],
            }
            for p in spec["passages"]
        ]
    )


def posterior_spec(base: dict, frame: pd.DataFrame) -> dict:
    """`base` with the priors and one-word probabilities of `frame` (in passage order).

    >>> base = {"candidates": ["yes"], "passages": [{"id": "z1", "prior": 1.0}],
    ...         "tables": {"z1": {"": {"yes": 1.0}}}}
    >>> s = posterior_spec(base, pd.DataFrame({"prior p(z|x)": [0.4], "p(yes|x,z)": [0.3]}))
    >>> s["passages"][0]["prior"], s["tables"]
    (0.4, {'z1': {'': {'yes': 0.3}}})
    """
    spec = copy.deepcopy(base)
    word = spec["candidates"][0]
    priors, conds = numbers(frame["prior p(z|x)"], "prior"), numbers(frame[f"p({word}|x,z)"], "probability")
    for p, pr, c in zip(spec["passages"], priors, conds):
        p["prior"] = pr
        spec["tables"][p["id"]] = {"": {word: c}}
    return spec


def posterior(result) -> list[float]:
    """p(z|x,y) of each passage after the toy's first candidate answer (Bayes over the passages)."""
    return marginals.citation(result.log_prior, result.trace.candidates[0].token_logp).tolist()
