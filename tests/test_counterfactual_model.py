"""Counterfactuals on the default stack's retrieval, passages and prompts: with nothing changed, the
Diagnose panel's counterfactual is the trace itself (same tokens, same probability) for both
decodings under greedy and beam search, over the Ask page's example questions and over an uploaded
corpus (four beams on the corpus questions), read by the tiny Llama: its flat, random distributions
leave the stored top tokens least able to prove a greedy choice, and the check holds for any model.
The model call of a counterfactual is the pipeline's own run of the question with fewer passages or
another scale, on the trained default. (Toy models: tests/test_counterfactual.py.)"""

import json

import pytest

from rag_core import marginals
from rag_core.analysis.diagnosis import counterfactual
from rag_core.config import ASSETS, AnswerSettings
from rag_core.retrieval import catalog_actions as actions
from rag_core.retrieval.index import PassageIndex

# A small uploaded corpus about a firm the Wikipedia questions know nothing of: "Who wrote
# Moby-Dick?" on it is answered from the passages at a low probability, where the stored top tokens
# are least able to prove the greedy choice.
ROBOTICS = [
    {"title": title, "text": text}
    for title, text in [
        (
            "Nimbleworks Robotics",
            "Nimbleworks Robotics is a robotics company founded in 2014 in Tartu, "
            "Estonia, by the engineer Kadri Lepik. It builds small warehouse robots that sort parcels.",
        ),
        (
            "Kadri Lepik",
            "Kadri Lepik is an Estonian engineer and the chief executive of Nimbleworks "
            "Robotics. She studied mechatronics and wrote a book on robot grippers.",
        ),
        (
            "Nimbleworks Sorter",
            "The Sorter is the first product of Nimbleworks Robotics: a wheeled robot "
            "that carries up to 30 kilograms and sorts parcels by their labels.",
        ),
        (
            "Nimbleworks funding",
            "In 2019 Nimbleworks Robotics raised 12 million euros from investors to open a "
            "factory near Tallinn.",
        ),
        (
            "Nimbleworks factory",
            "The Nimbleworks factory near Tallinn opened in 2021 and employs about 200 "
            "people who assemble robot arms.",
        ),
        (
            "Gripper design",
            "The soft grippers of Nimbleworks robots were designed by Marten Saar, who joined the "
            "company in 2016.",
        ),
        (
            "Nimbleworks customers",
            "Nimbleworks Robotics sells its robots to parcel carriers in Finland, Latvia and Poland.",
        ),
        (
            "Robot safety",
            "Every Nimbleworks robot stops when a person comes within one metre, using a laser scanner.",
        ),
    ]
]
CORPUS_QUESTIONS = ["Who wrote Moby-Dick?", "Who founded Nimbleworks Robotics?", "Who designed the grippers?"]
SETTINGS = [
    AnswerSettings(),
    AnswerSettings(beams=2, rescore="fast"),
    AnswerSettings(beams=4),
]  # greedy, beams; both rescorings
# The example questions under greedy and two beams; four beams with the thorough rescoring (the
# costliest search, its check the same) on the corpus questions, where the stored top tokens are
# least able to prove the greedy choice.
EXAMPLE_SETTINGS = SETTINGS[:2]
EXAMPLES = ASSETS / "examples" / "questions.json"
LOG_P = {"rag-token": marginals.rag_token, "rag-sequence": marginals.rag_sequence}


def robotics_upload() -> bytes:
    return "".join(json.dumps(r) + "\n" for r in ROBOTICS).encode("utf-8")


def on_robotics(pipe):
    """`pipe` on the uploaded corpus, parsed as the Corpus page parses an upload and indexed in
    memory (nothing reaches the cache)."""
    up = actions.parse_uploads([("robotics.jsonl", robotics_upload())])
    assert not up.errors and len(up.parsed.passages) == len(ROBOTICS)
    encoder = pipe.models.encoder
    index = PassageIndex.build(encoder.encode_passages(up.parsed.passages), up.parsed.passages, encoder.id)
    return pipe.with_index("robotics", index)


@pytest.fixture(scope="module")
def corpus_pipeline(default_pipeline):
    """The default stack on the uploaded corpus."""
    return on_robotics(default_pipeline)


@pytest.fixture(scope="module")
def traces(tiny_llama_pipeline):
    """(pipeline, settings, trace) for every example question under EXAMPLE_SETTINGS and every
    corpus question under SETTINGS (one retrieval and one prompt pass per question), all read by
    the tiny Llama."""
    examples = [e["question"] for e in json.loads(EXAMPLES.read_text("utf-8"))]
    out = []
    for pipe, questions, settings in (
        (tiny_llama_pipeline, examples, EXAMPLE_SETTINGS),
        (on_robotics(tiny_llama_pipeline), CORPUS_QUESTIONS, SETTINGS),
    ):
        for q in questions:
            out += [(pipe, cfg, run.trace) for cfg, run in zip(settings, pipe.run_settings(q, settings))]
    return out


@pytest.mark.slow  # its fixture decodes every example under every setting: over 10 s
def test_nothing_changed_is_the_trace_for_every_decoding_and_beam_setting(traces):
    undecided = 0
    for _, cfg, trace in traces:
        own_tok = trace.answer("rag-token")
        undecided += cfg.beams == 1 and counterfactual._greedy_check(own_tok, trace.log_prior)[0] != "same"
        # the panel's untouched controls: no passage removed, K as retrieved, the trace's scale
        for cf in (
            counterfactual.counterfactual(trace, [], trace.k, float(trace.scale)),
            counterfactual.counterfactual(trace),
        ):
            assert cf.unchanged and not cf.needs_model_call
            assert sorted(cf.answers) == ["rag-sequence", "rag-token"]
            for d, a in cf.answers.items():
                own = trace.answer(d)
                where = (trace.index, trace.question, cfg.beams, d)
                assert (a.answer, a.token_ids) == (own.answer, tuple(own.token_ids)), (where, a.note)
                assert a.log_p == float(LOG_P[d](trace.log_prior, own.token_logp)), where  # the card's p
                assert a.exact and not a.computed, where
    print(f"{undecided} greedy traces whose own path the stored top tokens cannot certify")


@pytest.mark.slow  # over 5 s on 2 cores
def test_the_model_call_is_the_pipelines_own_run_with_fewer_passages_or_another_scale(corpus_pipeline):
    """`rerun` with the top k kept (or another scale) against the pipeline answering the question
    afresh with K = k (or that scale): the same retrieval, so the same answers and numbers."""
    question, cfg = CORPUS_QUESTIONS[0], AnswerSettings()
    trace = corpus_pipeline.run(question, cfg)
    for change, fresh_cfg in ((dict(k=3), cfg.with_(k=3)), (dict(scale=12.0), cfg.with_(scale=12.0))):
        cf = counterfactual.counterfactual(trace, **change)
        full = counterfactual.rerun(corpus_pipeline, trace, **change)
        fresh = corpus_pipeline.run(question, fresh_cfg)
        assert [h.passage.id for h in full.hits] == [h.passage.id for h in fresh.hits]
        assert full.log_prior.exp().tolist() == pytest.approx(fresh.log_prior.exp().tolist(), abs=1e-9)
        shown = counterfactual.with_computed(cf, full)
        assert not shown.needs_model_call
        for d in LOG_P:
            got, want = full.answer(d), fresh.answer(d)
            assert got.token_ids == want.token_ids, (change, d)
            p = float(LOG_P[d](full.log_prior, got.token_logp))
            want_p = float(LOG_P[d](fresh.log_prior, want.token_logp))
            assert p == pytest.approx(
                want_p, abs=2e-5
            )  # rows batched differently (docs/results.md: within 2e-5)
            a = shown.answers[d]
            assert a.answer == want.answer, (change, d, a.note)  # decided or computed, never another answer
            assert a.computed == cf.answers[d].needs_model_call
