"""Evaluation: SQuAD normalisation, the questions file, a run on a toy pipeline (exact, no model),
and the `eval` command on the real default stack (one small run) and on user errors."""

import math
from types import SimpleNamespace

import pandas as pd
import pytest
import torch

from rag_core import marginals, stacks
from rag_core.analysis import matching
from rag_core.analysis.diagnosis.confidence import answer_confidences
from rag_core.analysis.evaluation import eval_summary
from rag_core.analysis.evaluation import questions as question_file
from rag_core.analysis.evaluation import runs as ev
from rag_core.config import AnswerSettings, StackSpec
from rag_core.corpus import Passage
from rag_core.decoding.decode import SearchSettings, closed_book_decode, score_answers
from rag_core.decoding.stuffed import leave_one_out, stuffed_decode, worth
from rag_core.generators.toy import ToyGenerator
from rag_core.pipeline import Models, Pipeline
from rag_core.trace import Hit

from conftest import ROOT, cache_sharing, run_cli


@pytest.mark.parametrize(
    "text,norm",
    [
        ("The Hobbit", "hobbit"),
        ("  Herman   Melville. ", "herman melville"),
        ("AT&T", "att"),
        ("Secker & Warburg", "secker warburg"),
        ("An apple a day", "apple day"),
        ("Theatre of the Absurd", "theatre of absurd"),  # "the" only as a whole word
        ("“Guernica”", "guernica"),  # typographic quotes are punctuation too
        ("8,848.86 m", "884886 m"),
        ("Beuve-Méry", "beuveméry"),
        ("", ""),
    ],
)
def test_squad_normalisation(text, norm):
    assert matching.normalize_answer(text) == norm


def test_exact_match_and_contained_against_any_answer():
    assert matching.exact_match("the Magic Flute.", ["The Magic Flute", "Magic Flute"])
    assert matching.exact_match("melville", ["Herman Melville", "Melville"])
    assert not matching.exact_match("Herman Melville, novelist", ["Herman Melville"])
    assert matching.contains_answer("Herman Melville, novelist", ["Herman Melville"])
    assert not matching.contains_answer("Austenite", ["Austen"])  # whole words only
    assert not matching.exact_match(None, ["x"]) and not matching.contains_answer("", ["x"])


def test_read_questions_skips_and_counts_malformed_lines(tmp_path):
    path = tmp_path / "q.jsonl"
    path.write_bytes(
        b'{"question": "Who?", "answers": ["Ann", "a"]}\n\nnot json\n{"question": "Q?", "answers": []}\n'
        b'[1, 2]\n{"question": "Where?", "answers": "B", "title": "T"}\n\xff\xfe\n'
    )
    rows, skipped = question_file.read_questions(path)
    assert [(r.question, r.answers, r.line) for r in rows] == [
        ("Who?", ["Ann", "a"], 1),
        ("Where?", ["B"], 6),
    ]
    assert skipped == 4


@pytest.mark.parametrize(
    "content,message", [(None, "not found"), (b"\n  \n", "empty"), (b"x\n{}\n", "no usable question")]
)
def test_read_questions_errors(tmp_path, content, message):
    path = tmp_path / "q.jsonl"
    if content is not None:
        path.write_bytes(content)
    with pytest.raises(question_file.EvalDataError, match=message):
        question_file.read_questions(path)


# ------------------------------------------------------------------------------ toy pipeline
class ToyPipe:
    """A Pipeline over a toy generator and a fixed retrieval: per question a list of (passage,
    prior) and per passage a next-word table. `run` is the real `Pipeline.run`."""

    index_name = "toy"
    run, run_settings, closed_book_scores = Pipeline.run, Pipeline.run_settings, Pipeline.closed_book_scores
    with_stuffed = Pipeline.with_stuffed
    query, run_many, batch_size, closed_book_many = (
        Pipeline.query,
        Pipeline.run_many,
        Pipeline.batch_size,
        Pipeline.closed_book_many,
    )

    def __init__(self, retrieval, tables, closed):
        self.retrieval = retrieval
        self.models = Models(
            SimpleNamespace(id="toy-retriever"), ToyGenerator(tables, closed), torch.device("cpu")
        )
        self.settings, self.stack = AnswerSettings(beams=1, max_new_tokens=6), StackSpec()

    def retrieve(self, question, k, query_vector=None):
        assert query_vector is None  # the toy retrieves by question only
        return [Hit(i + 1, p, math.log(prior)) for i, (p, prior) in enumerate(self.retrieval[question][:k])]

    def scale_for(self, cfg):
        return 1.0

    def closed_book(self, question, cfg):
        gen = self.models.generator
        best = closed_book_decode(gen, gen.prepare(question, None), SearchSettings.of(cfg))
        return gen.decode(best.tokens)


def toy_pipe():
    P = lambda i, text: Passage(f"p{i}", f"T{i}", text, "toy")  # noqa: E731
    retrieval = {
        "Where is Interpol?": [
            (P(1, "Interpol is headquartered in Lyon."), 0.7),
            (P(2, "Paris is in France."), 0.3),
        ],
        "Where is the Shroud?": [
            (P(3, "Rome is old."), 0.6),
            (P(4, "Milan is big."), 0.4),
            (P(5, "The Shroud is kept in Turin."), 0.01),
        ],
    }
    tables = {
        "p1": {"": {"Lyon": 0.9}},
        "p2": {"": {"Paris": 0.9}},
        "p3": {"": {"Rome": 0.8}},
        "p4": {"": {"Rome": 0.8}},
        "p5": {"": {"Turin": 0.9}},
    }
    return ToyPipe(retrieval, tables, closed={"": {"Rome": 0.9}})


QUESTIONS = [
    question_file.EvalQuestion("Where is Interpol?", ["Lyon"], "Interpol"),
    question_file.EvalQuestion("Where is the Shroud?", ["Turin", "Torino"], "Shroud"),
]


def test_a_run_on_a_toy_pipeline_scores_modes_recall_and_verdicts(tmp_path):
    pipe = toy_pipe()
    seen = []
    run = ev.run_eval(
        pipe, QUESTIONS, AnswerSettings(k=2, max_new_tokens=6), lambda d, t, r: seen.append((d, t))
    )
    assert seen == [(1, 2), (2, 2)]
    s = run.summary()
    assert s["modes"]["closed-book"]["em"] == 0.0
    assert s["modes"]["rag-token"]["em"] == s["modes"]["rag-sequence"]["em"] == 0.5
    assert s["modes"]["rag-sequence"]["recall"] == 0.5
    v = s["verdicts"]["rag-sequence"]
    assert v["wrong"] == 1 and v["retrieval-miss"] == 1 and v["parametric"] == 1 and v["no verdict"] == 0
    shroud = run.results[1]
    assert shroud.answer_rank == 3 and not shroud.recall  # found by the deeper search
    # Lyon is read from passage 1 (the closed-book table never says it); Rome is the closed-book
    # model's own answer (0.9 without passages, 0.8 with them): from the weights
    assert [r.modes["rag-sequence"].weights_share for r in run.results] == [0.0, 1.0]
    assert s["weights_share"]["rag-token"] == {"right": 0.0, "wrong": 1.0}
    assert s["retrieval"] == {"hit@1": 0.5, "recall@2": 0.5, "MRR@2": 0.5, "nDCG@2": 0.5}
    assert s["split"]["rag-sequence"] == {
        "right, passage read": 1,
        "read but wrong": 0,
        "retrieval miss": 1,
        "right from the weights": 0,
    }
    assert [r.answer_ranks for r in run.results] == [[1], []]
    frame = run.frame()
    assert list(frame.columns[:5]) == ["question", "mode", "answer", "em", "contained"]
    assert len(frame) == 6
    assert set(frame["mode"]) == {"closed-book", "rag-token", "rag-sequence"}  # no --stuffed: three modes
    table = run.table_text()
    assert "rag-sequence" in table and "50.0% (1/2)" in table and "Retrieval miss" in table
    path = ev.save_run(run, "unit", folder=tmp_path)
    again = ev.load_run(path)
    assert again.summary() == s and ev.load_run(tmp_path / "latest.json").summary() == s
    assert list(pd.read_csv(tmp_path / "latest.csv")["mode"][:3]) == list(ev.MODES[:3])
    assert ev.saved_runs(tmp_path) == [path]
    assert ev.load_run(tmp_path / "missing.json") is None


def test_the_run_flags_the_answers_the_ask_page_flags():
    """Each answer's low-confidence codes in a run with the stuffed reading (`eval --stuffed`) are
    those the answer card (`answer_confidences`, a separate run and closed-book pass) gives the same
    question; the split counts them."""
    P = lambda i, text: Passage(f"p{i}", f"T{i}", text, "toy")  # noqa: E731
    base = toy_pipe()
    pipe = ToyPipe(
        {
            **base.retrieval,
            "Who painted it?": [(P(6, "Ann painted it."), 0.55), (P(7, "Bob was there."), 0.45)],
        },
        {**base.models.generator.tables, "p6": {"": {"Ann": 0.6}}, "p7": {"": {"Bob": 0.6}}},
        base.models.generator.closed_book,
    )
    painted = question_file.EvalQuestion("Who painted it?", ["Ann"], "Painting")
    cfg = AnswerSettings(k=2, max_new_tokens=6, decode="all")
    run = ev.run_eval(pipe, [*QUESTIONS, painted], cfg)
    for r in run.results:
        full = answer_confidences(pipe, pipe.run(r.question, cfg))
        both = answer_confidences(pipe, pipe.run(r.question, AnswerSettings(k=2, max_new_tokens=6)))
        assert set(both) == set(ev.RAG_MODES)  # the stuffed reading is added for the rule, not shown
        for mode in ev.READINGS:
            assert r.modes[mode].low_confidence == list(full[mode].codes), (r.question, mode)
        for mode in ev.RAG_MODES:  # a trace without its stuffed reading is judged the same
            assert both[mode].codes == full[mode].codes, (r.question, mode)
    ann = run.results[2].modes["rag-sequence"]
    assert ann.p_seq == pytest.approx(0.33, abs=1e-6)  # 0.55 · 0.6, float32 tables
    # RAG-Token answers the catch-all "<other>" (0.4): the readings disagree on Ann, who is right
    assert (run.results[2].modes["rag-token"].answer, ann.low_confidence) == (
        "<other>",
        ["readings-disagree"],
    )
    assert [r.modes["rag-token"].low_confidence for r in run.results[:2]] == [[], []]
    assert run.summary()["confidence"]["rag-sequence"] == {
        "assessed": 3,
        "low": 1,
        "em_low": 1.0,
        "em_sure": 0.5,
        "wrong_flagged": 0.0,
        "right_flagged": 0.5,
        "guessing": 0,
        "readings-disagree": 1,
        "unsupported": 0,
    }
    frame = run.frame()
    rag = frame[frame["mode"] == "rag-sequence"]
    assert list(rag["low_confidence"]) == [0, 0, 1]
    assert list(rag["confidence_reasons"]) == ["", "", "readings-disagree"]
    assert set(frame[frame["mode"] == "closed-book"]["low_confidence"]) == {""}
    assert "flagged low confidence" in run.table_text()


def test_the_card_rule_reads_the_stuffed_answer_even_when_the_trace_lacks_it():
    """Both marginals say Cy; the two passages read together say Di. A trace decoded without the
    stuffed reading still gets its marginals flagged: the rule computes the third reading."""
    P = lambda i, text: Passage(f"p{i}", f"T{i}", text, "toy")  # noqa: E731
    base = toy_pipe()
    pipe = ToyPipe(
        {"Who sang it?": [(P(8, "Cy sang it."), 0.5), (P(9, "Di sang it."), 0.5)]},
        {"p8": {"": {"Cy": 0.6}}, "p9": {"": {"Cy": 0.6}}, "p8+p9": {"": {"Di": 0.9}}},
        base.models.generator.closed_book,
    )
    trace = pipe.run("Who sang it?", AnswerSettings(k=2, max_new_tokens=6))
    assert trace.stuffed is None and trace.answer("rag-sequence").answer == "Cy"
    got = answer_confidences(pipe, trace)
    assert {m: c.disagree for m, c in got.items()} == {m: (("stuffed", "Di"),) for m in ev.RAG_MODES}


def test_a_stuffed_run_adds_the_stuffed_reading_and_where_it_leans():
    """`eval --stuffed` (decode all): a fourth mode whose answer, EM and p are the stuffed reading's,
    the passage it leans on the argmax of a separate leave-one-out, the one the mixture cites the
    argmax of the same answer's posterior teacher-forced afresh; the marginals are unchanged."""
    pipe = toy_pipe()
    both = ev.run_eval(pipe, QUESTIONS, AnswerSettings(k=2, max_new_tokens=6))
    run = ev.run_eval(pipe, QUESTIONS, AnswerSettings(k=2, max_new_tokens=6, decode="all"))
    gen = pipe.models.generator
    for r, plain in zip(run.results, both.results):
        assert {m: (x.answer, x.em) for m, x in r.modes.items() if m != "stuffed"} == {
            m: (x.answer, x.em) for m, x in plain.modes.items()
        }
        hits = pipe.retrieve(r.question, 2)
        passages = [h.passage for h in hits]
        best = stuffed_decode(gen, r.question, passages, SearchSettings(max_new_tokens=6))[0]
        m = r.modes["stuffed"]
        assert m.answer == gen.decode(best.tokens)
        assert m.em == matching.exact_match(m.answer, r.answers)
        assert m.p_stuffed == pytest.approx(float(best.token_logp.sum().exp()), abs=1e-12)
        loo = leave_one_out(gen, r.question, passages, best.tokens)  # (K, T)
        assert m.top_passage == hits[int(worth(best.token_logp[0], loo).argmax())].rank
        lpz = torch.log(torch.tensor([p for _, p in pipe.retrieval[r.question][:2]], dtype=torch.float64))
        lpz = lpz - torch.logsumexp(lpz, 0)  # (K,) the prior of the two kept passages
        per_doc = score_answers(gen, gen.prepare(r.question, passages), [best.tokens])[0][0]  # (K, T)
        assert m.mixture_top == hits[int(marginals.citation(lpz, per_doc).argmax())].rank
    s = run.summary()
    assert s["modes"]["stuffed"]["n"] == 2
    assert s["stuffed"]["n"] == 2
    frame = run.frame()
    rows = frame[frame["mode"] == "stuffed"]
    assert list(rows["top_passage"]) == [r.modes["stuffed"].top_passage for r in run.results]
    assert "stuffed reading: the passage it leans on most" in run.table_text()
    assert run.settings["decode"] == "all"


def test_sweep_over_stored_traces_reproduces_the_run(tmp_path):
    from rag_core.analysis.evaluation.sweep import load_traces, sweep

    run = ev.run_eval(toy_pipe(), QUESTIONS, AnswerSettings(k=2, max_new_tokens=6), trace_dir=tmp_path / "tr")
    frame = sweep(load_traces(tmp_path / "tr"), [1, 2], [1.0])
    same = frame[(frame["k"] == 2)].iloc[0]  # the run's own K and scale: must give the run's EM exactly
    s = run.summary()["modes"]
    assert same["rag-sequence EM"] == s["rag-sequence"]["em"] and same["rag-token EM"] == s["rag-token"]["em"]
    assert list(frame["questions"]) == [2, 2]
    with pytest.raises(FileNotFoundError):
        load_traces(tmp_path)


def test_csv_cells_are_spreadsheet_safe(tmp_path):
    run = ev.EvalRun(
        [
            ev.QuestionResult(
                "=cmd()", ["+1"], "", {"closed-book": ev.ModeResult("@x", False, False)}, False, None
            )
        ],
        {"k": 5},
    )
    run.to_csv(tmp_path / "r.csv")
    row = pd.read_csv(tmp_path / "r.csv").iloc[0]
    assert row["question"] == "'=cmd()" and row["answer"] == "'@x" and row["answers"] == "'+1"


# ------------------------------------------------------------------------------ the command
def cli(*args):
    return run_cli("eval", *args)


@pytest.mark.slow
def test_eval_command_on_three_questions(tmp_path):
    qs = tmp_path / "three.jsonl"
    qs.write_text(
        '{"question": "Who wrote Moby-Dick?", "answers": ["Herman Melville", "Melville"]}\n'
        '{"question": "In which city is the Taj Mahal?", "answers": ["Agra"]}\n'
        "this line is broken\n"
        '{"question": "How many keys does a modern piano have?", "answers": ["88"]}\n',
        encoding="utf-8",
    )
    out = cli(
        str(qs),
        "-k",
        "3",
        "--scale",
        "20",
        "--csv",
        str(tmp_path / "r.csv"),
        "--no-save",
        "--traces",
        str(tmp_path / "tr"),
        "--stuffed",
    )
    assert out.returncode == 0, out.stderr[-2000:]
    assert "3 questions" in out.stdout and "1 malformed lines skipped" in out.stdout
    for mode in ev.MODES:
        assert mode in out.stdout
    assert "recall@3" in out.stdout and "wrong answers" in out.stdout
    assert "skipped 1 malformed line" in out.stderr
    frame = pd.read_csv(tmp_path / "r.csv")
    assert {"question", "mode", "answer", "em", "contained"} <= set(frame.columns)
    assert len(frame) == 12  # 3 questions x 4 modes, the stuffed reading's included
    assert sorted(set(frame["mode"])) == sorted(ev.MODES)
    assert "stuffed reading: the passage it leans on most" in out.stdout
    assert frame["em"].isin([0, 1]).all() and frame["contained"].isin([0, 1]).all()
    rag = frame[frame["mode"] == "rag-sequence"]
    assert rag["em"].sum() >= 2  # Melville, Agra, 88: RAG should get most of these right
    # the sweep over the stored traces at the run's own K and scale reproduces the run, no model call
    out = cli(
        str(qs),
        "--sweep",
        "--traces",
        str(tmp_path / "tr"),
        "--sweep-k",
        "1",
        "3",
        "--sweep-scale",
        "20",
        "--csv",
        str(tmp_path / "sweep.csv"),
    )
    assert out.returncode == 0, out.stderr[-2000:]
    sw = pd.read_csv(tmp_path / "sweep.csv").set_index("k")
    assert sw.loc[3, "rag-sequence EM"] == pytest.approx(rag["em"].mean())
    assert sw.loc[3, "rag-token EM"] == pytest.approx(frame[frame["mode"] == "rag-token"]["em"].mean())


@pytest.mark.parametrize(
    "args,message",
    [
        (["/no/such/file.jsonl"], "not found"),
        (["EMPTY"], "empty"),
        (["BAD"], "no usable question"),
        (["BAD", "-k", "0"], "at least 1"),
        (["GOOD", "--index", "1999"], "unknown index"),
        ([], "required"),
    ],
)
def test_eval_user_errors_exit_2_with_one_line(tmp_path, args, message):
    files = {"EMPTY": "\n", "BAD": "nope\n[1]\n", "GOOD": '{"question": "Q?", "answers": ["Lyon"]}\n'}
    real = []
    for a in args:
        if a in files:
            (tmp_path / a).write_text(files[a], encoding="utf-8")
            a = str(tmp_path / a)
        real.append(a)
    out = cli(*real)
    assert out.returncode == 2, out.stderr[-1000:]
    lines = out.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error:") and message in lines[0], out.stderr


def test_the_eval_page_names_each_runs_decoding(tmp_path, monkeypatch):
    """Greedy and beam runs of the same file differ by several points: the run picker says which."""
    from streamlit.testing.v1 import AppTest

    from conftest import visit

    monkeypatch.setenv("RAG_LOUPE_CACHE", str(cache_sharing(tmp_path, ("models", "indexes"))))
    run = ev.run_eval(toy_pipe(), QUESTIONS, AnswerSettings(k=2, max_new_tokens=6))
    run.settings["beams"] = 4
    run.settings["stack"] = stacks.fingerprint(StackSpec())  # listed as a run of the stack the page shows
    ev.save_run(run, "beams")
    at = AppTest.from_file(str(ROOT / "app/main.py"), default_timeout=300)
    at.session_state["index_name"] = "wiki"
    visit(at, "eval.py")
    options = [o for box in at.selectbox for o in box.options]
    assert any("2 questions" in o and "4 beams" in o for o in options), options


def test_the_eval_page_shows_how_far_p_can_be_trusted(tmp_path, monkeypatch):
    """Each reading's reliability diagram, and the share of wrong and of right answers the rule
    flags: the run's own summary, per reading."""
    from streamlit.testing.v1 import AppTest

    from conftest import visit

    monkeypatch.setenv("RAG_LOUPE_CACHE", str(cache_sharing(tmp_path, ("models", "indexes"))))
    run = ev.run_eval(toy_pipe(), QUESTIONS, AnswerSettings(k=2, max_new_tokens=6))
    run.settings["stack"] = stacks.fingerprint(StackSpec())
    ev.save_run(run, "toy")
    at = AppTest.from_file(str(ROOT / "app/main.py"), default_timeout=300)
    at.session_state["index_name"] = "wiki"
    visit(at, "eval.py")
    assert not at.exception, [e.value for e in at.exception]
    assert "Can p be trusted?" in [h.value for h in at.subheader]
    assert len(at.get("plotly_chart")) >= 1
    shown = [m.value for m in at.metric if m.label == "Wrong answers flagged"]
    split = run.summary()["confidence"]
    want = [
        eval_summary.percent(split[m]["wrong_flagged"]) for m in eval_summary.confidence_modes(run.summary())
    ]
    assert shown == want
