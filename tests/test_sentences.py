"""Leave-one-sentence-out against a full recomputation with the sentence physically removed, and
the top-k drop of a ranking."""

import pytest
import torch

from rag_core.analysis.attribution.sentences import (
    attribute,
    attribute_stuffed,
    split_sentences,
    top_k_drop,
    without,
)
from rag_core.corpus import Passage, Stuffed

from conftest import tiny_pipeline

PASSAGE = Passage(
    "p1",
    "Old bridge",
    "The old bridge of Paris was built by Ada Lovelace in 1843. It crosses the river. "
    "Tourists visit it every summer! Was it rebuilt? No, it stands as built.",
)


@pytest.fixture(scope="module")
def pipe(tmp_path_factory):
    return tiny_pipeline(tmp_path_factory.mktemp("tiny-stack"))[0]


def alone(pipe, question: str, passage: Passage, ids: list[int]) -> float:
    """log p(y|x,z) from a fresh one-passage prompt: prepare, teacher-force, sum (no batching)."""
    gen = pipe.models.generator
    state = gen.prepare(question, [passage])
    logp = gen.teacher_force(state, torch.tensor([ids]))[0]  # (T, V)
    return float(logp.double().gather(-1, torch.tensor(ids).unsqueeze(-1)).sum())


def test_each_delta_equals_the_passage_rebuilt_without_that_sentence(pipe):
    question, answer = "Who built the old bridge of Paris?", "Ada Lovelace"
    ids = pipe.models.generator.encode_answer(answer)
    att = attribute(pipe, question, PASSAGE, ids)
    assert len(att.sentences) == 5
    assert att.logp_full == pytest.approx(alone(pipe, question, PASSAGE, ids), abs=1e-4)
    for j, sentence in enumerate(att.sentences):
        rebuilt = Passage("p1", "Old bridge", PASSAGE.text.replace(sentence, "").replace("  ", " ").strip())
        assert att.delta[j] == pytest.approx(att.logp_full - alone(pipe, question, rebuilt, ids), abs=1e-4), j
    assert sorted(r["rank"] for r in att.rows()) == [1, 2, 3, 4, 5]
    assert att.ranking()[0] == max(range(5), key=lambda j: att.delta[j])


def test_top_k_drop_removes_the_ranked_sentences_together(pipe):
    question, ids = "Who built the old bridge of Paris?", pipe.models.generator.encode_answer("Ada Lovelace")
    att = attribute(pipe, question, PASSAGE, ids)
    order = [4, 0, 2, 1, 3]
    drops = top_k_drop(pipe, question, att, ids, {"given": order}, ks=(1, 3))
    gone = without(PASSAGE, att.sentences, {4, 0, 2})
    assert drops["given"][3] == pytest.approx(att.logp_full - alone(pipe, question, gone, ids), abs=1e-4)
    assert drops["given"][1] == pytest.approx(
        att.delta[4], abs=1e-4
    )  # top-1 removal is that sentence's own Δ


def test_sentence_splitting_keeps_decimals_inside_and_needs_a_capital_after():
    assert split_sentences("It has 2.1 million people. it goes on. Then 1990 came.") == [
        "It has 2.1 million people. it goes on.",
        "Then 1990 came.",
    ]
    assert split_sentences("no full stop at all") == ["no full stop at all"]
    assert split_sentences("   ") == []


def test_a_sentence_left_out_inside_the_stuffed_prompt_is_that_prompt_rebuilt(pipe):
    """The stuffed reading's Δ_j: the K passages in one prompt with sentence j of passage z removed,
    against the prompt rebuilt by hand without it, read alone (no batching)."""
    question, ids = "Who built the old bridge of Paris?", pipe.models.generator.encode_answer("Ada Lovelace")
    other = Passage("p2", "River", "The river runs through the city. It floods in spring.")
    passages = (other, PASSAGE)
    att = attribute_stuffed(pipe, question, passages, 1, ids)
    gen = pipe.models.generator

    def read(context: Stuffed) -> float:
        state = gen.prepare_rows([(question, context)])
        logp = gen.teacher_force(state, torch.tensor([ids]))[0]  # (T, V)
        return float(logp.double().gather(-1, torch.tensor(ids).unsqueeze(-1)).sum())

    assert att.logp_full == pytest.approx(read(Stuffed(passages)), abs=1e-4)
    for j, sentence in enumerate(att.sentences):
        rebuilt = Passage("p1", "Old bridge", PASSAGE.text.replace(sentence, "").replace("  ", " ").strip())
        assert att.delta[j] == pytest.approx(att.logp_full - read(Stuffed((other, rebuilt))), abs=1e-4), j
    assert att.delta != attribute(pipe, question, PASSAGE, ids).delta  # not the passage read alone
