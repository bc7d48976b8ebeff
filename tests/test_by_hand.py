"""rag_core.toys.by_hand, the By-hand page's tables, against brute force.

Every expected number here is computed by explicit Python loops over passages and tokens from the
toy's rules (generators/toy.py: a table maps the words so far to next-word probabilities; mass left
over goes to "<other>"; after a prefix with no row the answer ends with "</s>"), never through
`rag_core.marginals`.
"""

import copy
import math

import pandas as pd
import pytest

from rag_core.decoding import stepper
from rag_core.toys import by_hand
from rag_core.toys import examples as toys

EOS, OTHER = "</s>", "<other>"
OBAMA, PULSE, POST = toys.load_spec("obama"), toys.load_spec("softmax"), toys.load_spec("posterior")
FRANK = toys.load_spec("frankenstein")


# ---------------------------------------------------------------------------- brute force


def vocab(tables: dict) -> set[str]:
    return {w for table in tables.values() for dist in table.values() for w in dist}


def answer_tokens(answer: str, tables: dict) -> list[str]:
    """The toy's tokens of an answer: its words (a word no table knows is "<other>"), then "</s>"."""
    known = vocab(tables)
    return [w if w in known else OTHER for w in answer.split()] + [EOS]


def cond(table: dict, prefix: list[str], token: str) -> float:
    """p(token | x, z, prefix) under one passage's table."""
    dist = table.get(" ".join(prefix))
    if dist is None:
        return 1.0 if token == EOS else 0.0
    p = 0.0
    for w, v in dist.items():
        if w == token:
            p += v
    if token == OTHER:
        left = 1.0
        for v in dist.values():
            left -= v
        p += max(0.0, left)
    return p


def priors(spec: dict) -> list[float]:
    raw = [p["prior"] for p in spec["passages"]]
    total = 0.0
    for r in raw:
        total += r
    return [r / total for r in raw]


def brute(spec: dict, tables: dict, answer: str) -> dict:
    """p(y|x,z) per passage, the per-step mixtures, p_seq and p_tok of `answer`, by loops."""
    pz, ids = priors(spec), [p["id"] for p in spec["passages"]]
    toks = answer_tokens(answer, tables)
    per_doc = []
    for z in ids:
        prod = 1.0
        for i, t in enumerate(toks):
            prod *= cond(tables.get(z, {}), toks[:i], t)
        per_doc.append(prod)
    mixtures = []
    for i, t in enumerate(toks):
        mix = 0.0
        for k, z in enumerate(ids):
            mix += pz[k] * cond(tables.get(z, {}), toks[:i], t)
        mixtures.append(mix)
    p_seq = 0.0
    for k in range(len(ids)):
        p_seq += pz[k] * per_doc[k]
    p_tok = 1.0
    for m in mixtures:
        p_tok *= m
    return {"per_doc": dict(zip(ids, per_doc)), "mixtures": mixtures, "p_seq": p_seq, "p_tok": p_tok}


def check_rows(spec: dict, tables: dict, rows: list[dict], shown: list[str] | None = None) -> None:
    """`rows` are the spec's candidates in the spec's order (not the decoder's), each as brute force
    has it; `shown`: how the rows name them, where that differs from the candidate text."""
    expected = spec["candidates"] if shown is None else shown
    assert [r["answer"] for r in rows] == expected
    for r, answer in zip(rows, spec["candidates"]):
        b = brute(spec, tables, answer)
        assert r["p_seq"] == pytest.approx(b["p_seq"], abs=1e-12)
        assert r["p_tok"] == pytest.approx(b["p_tok"], abs=1e-12)
        for z, p in b["per_doc"].items():
            assert r[f"p(y|x,{z})"] == pytest.approx(p, abs=1e-12)
        mixes = [r[k] for k in r if k.startswith("mixture at y_")]
        assert mixes == pytest.approx(b["mixtures"], abs=1e-12)


def frames(spec: dict) -> tuple[pd.DataFrame, pd.DataFrame]:
    return by_hand.prior_table(spec), by_hand.next_word_table(spec)


# ---------------------------------------------------------------------------- (a) two answers


def test_shipped_two_answer_toy_matches_brute_force():
    spec = by_hand.two_answer_spec(OBAMA, *frames(OBAMA))
    assert spec["tables"] == OBAMA["tables"] and priors(spec) == pytest.approx([0.7, 0.3])
    rows = by_hand.answer_rows(toys.run_spec(spec))
    check_rows(OBAMA, OBAMA["tables"], rows)
    by = {r["answer"]: r for r in rows}
    # by hand from the tables: RAG-Sequence prefers "born Hawaii", RAG-Token the stitched answer more
    assert round(by["born Hawaii"]["p_seq"], 3) == 0.516 and round(by["born Hawaii"]["p_tok"], 3) == 0.449
    assert by["Chicago Hawaii"]["p_tok"] > by["Chicago Hawaii"]["p_seq"]
    assert by["born Hawaii"]["p_seq"] > by["born Hawaii"]["p_tok"]
    assert len([k for k in by["born Hawaii"] if k.startswith("mixture")]) == 3  # two words and the end token


def test_the_frankenstein_preset_is_won_by_a_stitched_answer():
    """The By hand page's second preset: RAG-Token's greedy answer takes its first word from z2 and its
    second from z1, an answer neither passage writes as a whole; RAG-Sequence picks z2's answer."""
    spec = by_hand.two_answer_spec(FRANK, *frames(FRANK))
    result = toys.run_spec(spec)
    check_rows(FRANK, FRANK["tables"], by_hand.answer_rows(result))
    b = {a: brute(FRANK, FRANK["tables"], a) for a in FRANK["candidates"]}
    assert max(b, key=lambda a: b[a]["p_tok"]) == "Chicago Hawaii"  # by brute force over the candidates
    assert max(b, key=lambda a: b[a]["p_seq"]) == "Chicago Illinois"
    assert b["Chicago Hawaii"]["per_doc"]["z1"] < b["born Hawaii"]["per_doc"]["z1"]  # z1 writes "born Hawaii"
    assert (
        b["Chicago Hawaii"]["per_doc"]["z2"] < b["Chicago Illinois"]["per_doc"]["z2"]
    )  # z2 writes "Chicago Illinois"
    dec = {d: result.decoded.answer(d) for d in ("rag-token", "rag-sequence")}
    assert dec["rag-token"].answer == "Chicago Hawaii" and dec["rag-sequence"].answer == "Chicago Illinois"
    assert stepper.frankenstein_steps(result.decoded, dec["rag-token"]) == [
        1
    ]  # the passage changes at word 2


def test_edited_tables_are_parsed_and_recomputed():
    prior_in, cond_in = frames(OBAMA)
    prior_in["prior p(z|x)"] = [0.2, 0.6]  # normalised to 0.25 / 0.75
    cond = cond_in.copy()
    cond.loc[0, "p(word|x,z,after)"] = 0.3  # z1: p(born) 0.8 -> 0.3
    extra = pd.DataFrame(
        [
            {
                "passage": "z1",
                "after": by_hand.START,
                "next word": "born",
                "p(word|x,z,after)": 0.25,
            },  # adds up: 0.55
            {
                "passage": "z2",
                "after": "  born ",
                "next word": " Hawaii",
                "p(word|x,z,after)": 0.3,
            },  # 0.1 + 0.3
            {
                "passage": None,
                "after": None,
                "next word": None,
                "p(word|x,z,after)": None,
            },  # a blank row: skipped
            {"passage": "z2", "after": "born Hawaii", "next word": "today", "p(word|x,z,after)": 0.5},
        ]
    )
    spec = by_hand.two_answer_spec(OBAMA, prior_in, pd.concat([cond, extra], ignore_index=True))
    expected = copy.deepcopy(OBAMA["tables"])
    expected["z1"][""]["born"] = 0.3 + 0.25
    expected["z2"]["born"]["Hawaii"] = 0.1 + 0.3
    expected["z2"]["born Hawaii"] = {"today": 0.5}
    assert _same_tables(spec["tables"], expected)
    assert [p["prior"] for p in spec["passages"]] == [0.2, 0.6]
    assert OBAMA["tables"]["z1"][""]["born"] == 0.8  # the shipped spec is not modified
    rows = by_hand.answer_rows(toys.run_spec(spec))
    check_rows(spec, expected, rows)
    # by hand: z2 now has a row after "born Hawaii" with no "</s>" in it, so under z2 the answer cannot
    # end there: p_seq(born Hawaii) = .25 * .55 * .9 * 1 + .75 * .4 * .4 * 0
    assert rows[0]["p_seq"] == pytest.approx(0.25 * 0.55 * 0.9)
    assert rows[0]["p(y|x,z2)"] == 0.0 and rows[0]["mixture at y_3"] == pytest.approx(0.25)


def _same_tables(got: dict, want: dict) -> bool:
    assert got.keys() == want.keys()
    for z in want:
        assert got[z].keys() == want[z].keys(), z
        for pre in want[z]:
            assert got[z][pre] == pytest.approx(want[z][pre]), (z, pre)
    return True


def test_a_word_no_table_knows_counts_as_other():
    prior_in, cond_in = frames(OBAMA)
    cond = cond_in[cond_in["next word"] != "Chicago"]  # now "Chicago Hawaii" starts with an unknown word
    spec = by_hand.two_answer_spec(OBAMA, prior_in, cond)
    assert (
        "Chicago" not in spec["tables"]["z1"][""] and "Chicago" in spec["tables"]["z1"]
    )  # the prefix rows stay
    rows = by_hand.answer_rows(toys.run_spec(spec))
    check_rows(spec, spec["tables"], rows, shown=["born Hawaii", "<other> Hawaii"])  # the toy's own tokens
    chicago = rows[1]
    # "<other>" gets z1's left-over 0.2 and z2's 0.6; after "<other>" no row, so "Hawaii" has p = 0
    assert chicago["mixture at y_1"] == pytest.approx(0.7 * 0.2 + 0.3 * 0.6)
    assert chicago["p_seq"] == 0.0 and chicago["p_tok"] == 0.0


@pytest.mark.parametrize(
    "row, value, message",
    [
        (0, -0.5, "a probability cannot be negative (row 1)"),
        (2, 1.5, "a probability cannot be above 1 (row 3)"),
        (1, "lots", "every probability needs a number (row 2 does not)"),
        (3, float("inf"), "every probability needs a number"),
        (4, 0.9, "under z1 the next-word probabilities after “Chicago” add up to more than 1"),
    ],
)
def test_bad_probabilities_are_refused_with_the_row(row, value, message):
    prior_in, cond_in = frames(OBAMA)
    cond = cond_in.astype({"p(word|x,z,after)": object})
    if row == 4:  # a second "Chicago" row under z1 pushes that table over 1 (0.5 + 0.9)
        cond = pd.concat(
            [
                cond,
                pd.DataFrame(
                    [{"passage": "z1", "after": "Chicago", "next word": "Hawaii", "p(word|x,z,after)": value}]
                ),
            ],
            ignore_index=True,
        )
    else:
        cond.loc[row, "p(word|x,z,after)"] = value
    with pytest.raises(by_hand.BadInput, match=message.replace("(", r"\(").replace(")", r"\)")):
        by_hand.two_answer_spec(OBAMA, prior_in, cond)


@pytest.mark.parametrize("edit", [{"next word": "two words"}, {"next word": "  "}, {"passage": "z9"}])
def test_rows_need_a_passage_and_one_word(edit):
    prior_in, cond_in = frames(OBAMA)
    for col, v in edit.items():
        cond_in.loc[1, col] = v
    with pytest.raises(by_hand.BadInput, match="one next word"):
        by_hand.two_answer_spec(OBAMA, prior_in, cond_in)


def test_bad_prior_is_refused():
    prior_in, cond_in = frames(OBAMA)
    prior_in["prior p(z|x)"] = prior_in["prior p(z|x)"].astype(object)
    prior_in.loc[1, "prior p(z|x)"] = "lots"
    with pytest.raises(by_hand.BadInput, match=r"every prior needs a number \(row 2"):
        by_hand.two_answer_spec(OBAMA, prior_in, cond_in)


# ---------------------------------------------------------------------------- (b) the retriever


def brute_softmax(
    query: list[float], vectors: list[list[float]], scale: float
) -> tuple[list[float], list[float]]:
    scores = []
    for v in vectors:
        s = 0.0
        for a, b in zip(v, query):
            s += a * b
        scores.append(s)
    weights = [math.exp(scale * s) for s in scores]
    total = 0.0
    for w in weights:
        total += w
    return scores, [w / total for w in weights]


def test_shipped_retriever_toy():
    spec = by_hand.vector_spec(PULSE, by_hand.vector_table(PULSE), PULSE["scale"])
    assert spec == {**PULSE, "scale": 1.0}
    table = by_hand.retriever_table(toys.run_spec(spec))
    scores, probs = brute_softmax(PULSE["query_vector"], [p["vector"] for p in PULSE["passages"]], 1.0)
    assert list(table["passage"]) == ["d1", "d2", "d3"]
    assert table["s(z) = d·q"].tolist() == pytest.approx(scores)
    assert table["p(z|x)"].tolist() == pytest.approx(probs, abs=1e-12)
    assert [round(p, 3) for p in probs] == [0.550, 0.247, 0.202]


@pytest.mark.parametrize("scale", [0.0, 0.5, 3.0, 20.0])
def test_edited_vectors_and_scale(scale):
    vec = by_hand.vector_table(PULSE)
    vec["x"] = [0.3, -1.0, 2.0, 0.5]
    vec["y"] = [-2.0, 0.5, 0.0, -1.5]
    spec = by_hand.vector_spec(PULSE, vec, scale)
    assert spec["query_vector"] == [0.3, -2.0] and spec["passages"][1]["vector"] == [2.0, 0.0]
    result = toys.run_spec(spec)
    scores, probs = brute_softmax([0.3, -2.0], [[-1.0, 0.5], [2.0, 0.0], [0.5, -1.5]], scale)
    assert by_hand.prior_probs(result) == pytest.approx(probs, abs=1e-12)
    assert by_hand.retriever_table(result)["s(z) = d·q"].tolist() == pytest.approx(scores)
    if scale == 0.0:
        assert probs == pytest.approx([1 / 3] * 3)
    else:  # d3 = (0.5, -1.5) points most along q: it wins
        assert max(range(3), key=lambda j: probs[j]) == 2


def test_a_bad_coordinate_is_refused():
    vec = by_hand.vector_table(PULSE).astype({"x": object})
    vec.loc[2, "x"] = "abc"
    with pytest.raises(by_hand.BadInput, match=r"every coordinate needs a number \(row 3"):
        by_hand.vector_spec(PULSE, vec, 1.0)


# ---------------------------------------------------------------------------- (c) the posterior


def brute_posterior(pz: list[float], p_word: list[float]) -> list[float]:
    joint = [a * b * 1.0 for a, b in zip(pz, p_word)]  # the end token after the word: no row, p = 1
    total = 0.0
    for j in joint:
        total += j
    return [j / total for j in joint]


@pytest.mark.parametrize(
    "prior, p_word", [([0.7, 0.3], [0.9, 0.2]), ([0.9, 0.1], [0.05, 0.8]), ([0.2, 0.6], [0.5, 0.5])]
)
def test_posterior_is_bayes(prior, p_word):
    frame = by_hand.posterior_table(POST)
    assert list(frame.columns) == ["passage", "prior p(z|x)", "p(Hawaii|x,z)"]
    frame["prior p(z|x)"], frame["p(Hawaii|x,z)"] = prior, p_word
    spec = by_hand.posterior_spec(POST, frame)
    assert spec["tables"] == {"z1": {"": {"Hawaii": p_word[0]}}, "z2": {"": {"Hawaii": p_word[1]}}}
    post = by_hand.posterior(toys.run_spec(spec))
    total = sum(prior)
    assert post == pytest.approx(brute_posterior([p / total for p in prior], p_word), abs=1e-12)
    if prior == [0.7, 0.3]:
        assert [round(p, 3) for p in post] == [0.913, 0.087]  # 0.7·0.9 / (0.7·0.9 + 0.3·0.2), by hand
    if prior == [0.9, 0.1]:  # the word moves belief to z2 despite its small prior
        assert post[1] > 0.5 > prior[1]
    if p_word[0] == p_word[1]:  # a word both passages explain equally leaves the prior as it was
        assert post == pytest.approx([0.25, 0.75])


def test_posterior_refuses_a_probability_above_one():
    frame = by_hand.posterior_table(POST)
    frame["p(Hawaii|x,z)"] = [0.5, 1.2]
    with pytest.raises(by_hand.BadInput, match=r"cannot be above 1 \(row 2\)"):
        by_hand.posterior_spec(POST, frame)
