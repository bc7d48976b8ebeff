"""Replay on files of every kind it reads: RAG Loupe's own OTLP export replays to the numbers of the
trace it came from (the stuffed reading of the same passages, within 1e-5); damaged files, traces
without documents and a prompt the generator cannot read each get one message, and the good traces
beside them are still replayed; the spans' rules (reranker, question JSON, prompt slots)."""

from __future__ import annotations

import json

import pytest

from rag_core.analysis.diagnosis.verdict_evidence import evidence_problems
from rag_core.decoding.stuffed import p_without
from rag_core.otlp import trace_otlp
from rag_core.replay.assemble import traces_of
from rag_core.replay.prompt_slots import locate
from rag_core.replay.records import LoggedDocument
from rag_core.replay.run import OWN_TEMPLATE, replay
from rag_core.replay.sources import read_traces
from rag_core.replay.spans import Span
from rag_core.replay.why import REPLAY_EVIDENCE, REPLAY_VERDICTS, judge

from conftest import run_cli

QUESTIONS = ["Who wrote Moby-Dick?", "Who painted the Mona Lisa?"]


@pytest.mark.parametrize("question", QUESTIONS)
@pytest.mark.slow  # over 5 s on 2 cores
def test_our_own_otlp_export_replays_to_the_trace_numbers(default_pipeline, tmp_path, question):
    trace = default_pipeline.run(question, default_pipeline.settings.with_(decode="all"))
    path = tmp_path / "own.json"
    path.write_text(trace_otlp(trace))
    imported = read_traces(path)
    assert imported.skipped == []
    (logged,) = imported.traces
    assert logged.question == trace.question and not logged.has_prompt
    assert [(d.id, d.title, d.text) for d in logged.documents] == [
        (h.passage.id, h.passage.title, h.passage.text) for h in trace.hits
    ]
    stuffed = trace.answer("stuffed")
    r = replay(default_pipeline.models.generator, logged)
    assert r.template == OWN_TEMPLATE
    assert r.answer_tokens == list(stuffed.token_ids)
    assert r.reproduced and r.replayed == stuffed.answer
    assert r.p_answer == pytest.approx(float(stuffed.token_logp.double().sum().exp()), rel=1e-5)
    expected = p_without(trace.stuffed.leave_one_out)
    assert [d.p_without for d in r.documents] == pytest.approx(expected, rel=1e-5, abs=1e-9)


def otlp_span(trace_id, span_id, parent, kind, attrs):
    values = [{"key": k, "value": {"stringValue": v}} for k, v in attrs.items()]
    values.append({"key": "openinference.span.kind", "value": {"stringValue": kind}})
    return {
        "traceId": trace_id,
        "spanId": span_id,
        "parentSpanId": parent,
        "name": kind,
        "attributes": values,
    }


def otlp_file(spans):
    return json.dumps({"resourceSpans": [{"scopeSpans": [{"spans": spans}]}]})


@pytest.mark.slow  # the default stack loads for the command
def test_bad_files_each_get_one_message_and_the_good_traces_still_replay(tmp_path):
    folder = tmp_path / "traces"
    folder.mkdir()
    good = {
        "question": "Who wrote Moby-Dick?",
        "documents": [{"id": "m", "title": "Moby-Dick", "text": "Moby-Dick is a novel by Herman Melville."}],
        "answer": "Herman Melville",
    }
    long = " ".join(["word"] * 9000)  # a logged prompt is read verbatim: no cut
    huge = dict(good, documents=[{"id": "h", "text": long}], prompt=f"Context: {long}\nQ: Long?\nA:")
    lines = [
        json.dumps(good),
        '{"question": "cut',
        json.dumps({"question": "Q?", "answer": "A"}),
        json.dumps(huge),
    ]
    (folder / "a.jsonl").write_text("\n".join(lines) + "\n")
    whole = otlp_file(
        [otlp_span("ab" * 16, "cd" * 8, "", "CHAIN", {"input.value": "Q?", "output.value": "A"})]
    )
    (folder / "b.json").write_text(whole)  # a trace without documents
    (folder / "c.json").write_text(whole[:40])  # truncated
    out = tmp_path / "out.jsonl"
    got = run_cli("replay", folder, "--json", out, "--threads", "2")
    assert got.returncode == 0, got.stderr
    objs = [json.loads(line) for line in out.read_text().splitlines()]
    reasons = {o["source"]: o["skipped"] for o in objs if o["skipped"]}
    assert reasons.pop("a.jsonl: line 2").startswith("not JSON (Unterminated string")
    assert reasons.pop("a.jsonl: line 3") == "missing documents"
    assert "more than the generator's 8192" in reasons.pop("a.jsonl: line 4")
    assert reasons.pop(f"trace {'ab' * 6}") == "no retrieved documents in its spans"
    assert reasons.pop("c.json").startswith("not valid JSON")
    assert reasons == {}
    (done,) = [o for o in objs if not o["skipped"]]
    assert (done["source"], done["answer"], done["leaned_on"]) == ("a.jsonl: line 1", "Herman Melville", "m")
    named = [line for line in got.stderr.splitlines() if line.startswith("skipped ")]
    assert len(named) == 4  # the unreadable ones are named on stderr before the run
    assert "replayed 1 traces" in got.stderr


def test_a_reranker_keeps_what_reached_the_prompt_and_the_question_comes_from_json():
    docs = {
        f"retrieval.documents.{i}.document.content": t for i, t in enumerate(["A one.", "B two.", "C three."])
    }
    kept = {
        "reranker.output_documents.0.document.content": "C three.",
        "reranker.output_documents.1.document.content": "A one.",
    }
    spans = [
        Span(
            "t", "r", "", "root", {"openinference.span.kind": "CHAIN", "input.value": '{"question": "Why?"}'}
        ),
        Span("t", "s", "r", "ret", {"openinference.span.kind": "RETRIEVER", **docs}, 1),
        Span("t", "k", "r", "rerank", {"openinference.span.kind": "RERANKER", **kept}, 2),
        Span(
            "t",
            "l",
            "r",
            "llm",
            {
                "openinference.span.kind": "LLM",
                "llm.prompts": ["x C three. y A one. Q: Why?"],
                "output.value": "Because.",
            },
            3,
        ),
    ]
    (t,) = traces_of(spans).traces
    assert (t.question, t.answer, t.prompt) == ("Why?", "Because.", "x C three. y A one. Q: Why?")
    assert [d.text for d in t.documents] == ["C three.", "A one."]  # what the reranker passed on
    (without_prompt,) = traces_of([s for s in spans if s.name != "llm"] + [answer_only(spans[-1])]).traces
    assert [d.text for d in without_prompt.documents] == ["C three.", "A one."]  # B never reached the model
    no_reranker = [s for s in spans if s.name != "rerank"]
    (t,) = traces_of(no_reranker).traces
    assert [d.text for d in t.documents] == ["A one.", "B two.", "C three."]  # the retriever's, in its order
    prompted, missing = locate(t.prompt, t.documents)
    assert [p.text for p in prompted.passages] == ["C three.", "A one."]  # prompt order
    assert [d.text for d in missing] == ["B two."]  # not in the prompt: the model never read it
    assert prompted.without(0).text == "x  y A one. Q: Why?"


def answer_only(llm: Span) -> Span:
    """The LLM span with its answer and no prompt."""
    attrs = {k: v for k, v in llm.attributes.items() if k != "llm.prompts"}
    return Span(llm.trace_id, llm.span_id, llm.parent_id, llm.name, attrs, llm.start)


def test_a_short_document_inside_a_longer_one_does_not_take_its_place():
    docs = [LoggedDocument("s", "S", "Paris"), LoggedDocument("l", "L", "Paris is in France.")]
    prompted, missing = locate("Docs: Paris is in France. | Paris\nQ:", docs)
    assert ([p.id for p in prompted.passages], prompted.pieces, missing) == (
        ["l", "s"],
        ("Docs: ", " | ", "\nQ:"),
        [],
    )


def test_a_document_twice_in_the_prompt_takes_its_first_free_place():
    docs = [LoggedDocument("a", "A", "same"), LoggedDocument("b", "B", "same")]
    prompted, missing = locate("same | same", docs)
    assert ([p.id for p in prompted.passages], prompted.pieces, missing) == (["a", "b"], ("", " | ", ""), [])


@pytest.mark.slow  # the default stack loads for each command
def test_a_stopped_run_resumes_from_what_it_wrote(tmp_path):
    doc = {"id": "m", "title": "Moby-Dick", "text": "Moby-Dick is a novel by Herman Melville."}
    rows = [
        {"question": "Who wrote Moby-Dick?", "documents": [doc], "answer": "Herman Melville"},
        {"question": "Who is Ishmael's author?", "documents": [doc], "answer": "Melville"},
    ]
    source, out = tmp_path / "t.jsonl", tmp_path / "out.jsonl"
    source.write_text("".join(json.dumps(r) + "\n" for r in rows))
    assert run_cli("replay", source, "--json", out, "--limit", "1", "--threads", "2").returncode == 0
    (first,) = [json.loads(line) for line in out.read_text().splitlines()]
    out.write_text(json.dumps(first | {"p_answer": 0.123}) + "\n")  # what a stopped run left, marked
    got = run_cli("replay", source, "--json", out, "--threads", "2")
    assert got.returncode == 0, got.stderr
    objs = [json.loads(line) for line in out.read_text().splitlines()]
    assert [o["answer"] for o in objs] == ["Herman Melville", "Melville"]
    assert objs[0]["p_answer"] == 0.123  # read back, not computed again
    assert objs[1]["p_answer"] != 0.123 and objs[1]["key"] != objs[0]["key"]


@pytest.mark.parametrize(
    "args",
    [
        ("Bob", ["Ann"], [False, True], [], 0.6, 0.3, ["Bob", "Ann"], [((1, 0), "Ann")], "Eve"),
        ("Bob", ["Ann"], [False], ["d9"], 0.6, 0.1, ["Bob"], [], "Bob"),
        ("Ann", ["Ann"], [True], [], 0.9, 0.9, None, None, "Ann"),
        ("Bob", None, [True], [], 0.9, None, None, None, "Bob"),
    ],
)
def test_every_replay_verdict_carries_evidence_of_its_type(args):
    verdicts = judge(*args)
    assert [v.code for v in verdicts] == list(REPLAY_VERDICTS)
    for v in verdicts:
        assert evidence_problems(v.code, v.evidence, REPLAY_EVIDENCE) == [], v
        assert v.title == REPLAY_VERDICTS[v.code]
