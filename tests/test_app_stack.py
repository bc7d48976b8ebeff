"""The app opens on any model stack its command line names (the flags of `python -m rag_core`):
here the tiny random DPR + BART stack saved to folders. Every page renders and names the stack, the
Ask page's numbers are the CLI's for the same stack and question, and a command line that cannot
be used says so in one line while the default stack opens."""

import json
import sys

import pytest
import torch
from streamlit.testing.v1 import AppTest

from app.ui.safe_text import md_text
from rag_core import stacks
from rag_core.config import StackSpec
from rag_core.marginals import p_text
from rag_core.toys.tiny_models import build_tiny_stack

from conftest import ROOT, cache_sharing, run_cli, visit

PAGES = [
    "ask.py",
    "map.py",
    "token_vs_sequence.py",
    "citations.py",
    "index_swap.py",
    "by_hand.py",
    "train.py",
    "corpus.py",
    "eval.py",
    "exercises.py",
]
QUESTION = "Who built the bridge of Paris?"
COMPARED = ["decoding", "answer", "p_tok", "p_seq", "confidence"]  # each side of Ask's "Compare with"
PASSAGES = ["rank", "title", "prior p(z|x)"]  # and the passages each side retrieved


@pytest.fixture(scope="module")
def tiny(tmp_path_factory):
    return build_tiny_stack(tmp_path_factory.mktemp("tiny-app"))


@pytest.fixture(scope="module")
def tiny_flags(tiny):
    return [
        "--question-encoder",
        str(tiny["dpr_q"]),
        "--ctx-encoder",
        str(tiny["dpr_ctx"]),
        "--generator",
        str(tiny["bart"]),
        "--corpus",
        str(tiny["corpus"]),
    ]


@pytest.fixture(autouse=True)
def own_cache(tmp_path, monkeypatch):
    """A cache of this test's own (indexes of the tiny stack), sharing the converted default models
    and the default indexes, so the fallback to the default stack does not convert or build them."""
    monkeypatch.setenv("RAG_LOUPE_CACHE", str(cache_sharing(tmp_path / "cache", ("models", "indexes"))))


def app_with(monkeypatch, flags: list[str]) -> AppTest:
    """The app as `streamlit run app/main.py -- FLAGS` starts it, the question set, short answers."""
    monkeypatch.setattr(sys, "argv", [str(ROOT / "app/main.py"), *flags])
    at = AppTest.from_file(str(ROOT / "app/main.py"), default_timeout=600)
    at.session_state["question"] = QUESTION
    at.session_state["max_new_tokens"] = 6
    at.session_state["k"] = 3
    at.run()
    assert not at.exception, [e.value for e in at.exception]
    return at


DEFAULT_LINE = f"**Model:** {md_text('MiniLM-L6 retriever · SmolLM2-135M + RAG adapter')}"  # in words


def model_line(at) -> str:
    lines = [c.value for c in at.caption if c.value.startswith("**Model:**")]
    assert len(lines) == 1, [c.value for c in at.caption][:5]
    return lines[0]


def test_every_page_renders_on_the_stack_of_the_command_line_and_names_it(monkeypatch, tiny_generator):
    """`--generator FOLDER` (and a scale): the default retriever (whose year indexes are shipped, so
    the Index swap page builds none) with the tiny Llama; every page names that stack, and the
    sidebar starts at the command line's scale."""
    at = app_with(monkeypatch, ["--generator", str(tiny_generator), "--scale", "7"])
    assert not at.error, [e.value for e in at.error]
    assert at.session_state["stack"] == "cli"
    assert at.session_state["scale"] == 7.0
    named = stacks.in_words(StackSpec(generator=str(tiny_generator)))
    assert named.startswith("MiniLM-L6 retriever · ") and tiny_generator.name in named, named
    for page in PAGES:
        visit(at, page)
        assert model_line(at) == f"**Model:** {md_text(named + ' (command line)')}", page
    assert at.selectbox(key="stack").value == "cli"


def test_the_ask_page_shows_the_numbers_of_the_cli_for_the_same_stack(monkeypatch, tiny_flags):
    at = app_with(monkeypatch, tiny_flags)
    cards = {m.label: (m.value, m.delta) for m in at.metric if m.label in ("RAG-Token", "RAG-Sequence")}
    out = run_cli("ask", QUESTION, *tiny_flags, "-k", "3", "--max-new-tokens", "6", "--json")
    assert out.returncode == 0, out.stderr
    cli = json.loads(out.stdout)
    for label, decoding, p in (
        ("RAG-Token", "rag-token", "p_tok"),
        ("RAG-Sequence", "rag-sequence", "p_seq"),
    ):
        best = cli["answers"][decoding][0]
        value, delta = cards[label]
        expected = best["answer"] if best["answer"] else "(empty)"  # the card's word for an empty answer
        assert value.replace("\\", "") == expected, (label, value, best)
        assert delta.split(", ")[0] == f"p = {p_text(best[p])}", (
            label,
            delta,
            best[p],
        )  # AppTest adds ", unchanged"
    (table,) = [d.value for d in at.dataframe if "prior p(z|x)" in getattr(d.value, "columns", [])][:1]
    assert list(table["title"]) == [h["title"] for h in cli["passages"]]
    assert [round(float(x), 6) for x in table["prior p(z|x)"]] == [
        round(h["prior"], 6) for h in cli["passages"]
    ]


@pytest.mark.parametrize(
    "flags, said",
    [
        (["--generator", "/no/such/folder"], "model folder not found: /no/such/folder"),
        (["--preset", "nope"], "argument --preset: invalid choice"),
        (["--run", "/no/such/run"], "not a training output"),
        (["--preset", "paper-token"], "is not in the local model cache; allow downloads (--allow-downloads)"),
        pytest.param(
            ["--device", "cuda"],
            "no CUDA device is available",
            marks=pytest.mark.skipif(torch.cuda.is_available(), reason="this machine has a CUDA device"),
        ),
    ],
)
@pytest.mark.slow  # over 5 s on 2 cores
def test_a_command_line_that_cannot_be_used_says_so_once_and_the_default_stack_opens(
    monkeypatch, caplog, flags, said
):
    at = app_with(monkeypatch, flags)
    errors = [e.value for e in at.error]
    assert len(errors) == 1 and said in errors[0].replace("\\", ""), errors
    logged = [r.getMessage() for r in caplog.records if r.name == "rag_loupe.app" and r.levelname == "ERROR"]
    assert len(logged) == 1 and said in logged[0] and "opening the default stack" in logged[0], (
        logged
    )  # the server log
    assert at.session_state["stack"] == "default"
    assert model_line(at) == DEFAULT_LINE
    assert [m for m in at.metric if m.label == "RAG-Token"]  # the default stack answered


def test_a_stack_is_keyed_by_the_content_of_its_folders(tiny, tmp_path):

    cfg = StackSpec(
        question_encoder=str(tiny["dpr_q"]), ctx_encoder=str(tiny["dpr_ctx"]), generator=str(tiny["bart"])
    )
    before = stacks.fingerprint(cfg)
    assert stacks.fingerprint(cfg) == before
    extra = tiny["bart"] / "note.txt"
    extra.write_text("retrained")
    try:
        assert stacks.fingerprint(cfg) != before  # the same path with other content is another stack
    finally:
        extra.unlink()
    assert stacks.fingerprint(cfg) == before


def answer_cards(at) -> dict:
    return {m.label: (m.value, m.delta) for m in at.metric if m.label in ("RAG-Token", "RAG-Sequence")}


@pytest.mark.slow  # over 5 s on 2 cores
def test_switching_stacks_five_times_frees_the_other_and_shows_only_its_own_numbers(monkeypatch, tiny_flags):
    """The sidebar's Model switches the session between the command line's tiny stack and the
    default: the server holds one stack (the other's models are freed: RSS after the fifth switch
    within 10% of after the first), and Ask shows the numbers of the stack it names."""
    import gc
    import weakref

    import psutil

    from app import stack

    at = app_with(monkeypatch, tiny_flags)
    seen = {"cli": answer_cards(at)}
    rss, freed = [], []
    for i in range(5):
        target = ("default", "cli")[i % 2]
        before = weakref.ref(stack.held_models())
        at.selectbox(key="stack").select(target).run()
        assert not at.exception, [e.value for e in at.exception]
        assert not at.error, [e.value for e in at.error]
        named = model_line(at)  # the stack in words: the trained default, or the tiny one by its folders
        assert (named == DEFAULT_LINE) == (target == "default"), named
        assert named.endswith(md_text("(command line)")) == (target == "cli"), named
        cards = answer_cards(at)
        assert cards == seen.setdefault(target, cards), (
            target,
            cards,
            seen,
        )  # the same stack, the same numbers
        gc.collect()
        freed.append(before() is None)
        rss.append(psutil.Process().memory_info().rss)
    assert seen["default"] != seen["cli"]
    assert all(freed), freed  # each switch let go of the stack before it
    assert rss[4] <= 1.10 * rss[0], [f"{r / 2**20:.0f} MiB" for r in rss]


def train_page_run(tiny):
    """A finished generator run where the Train page keeps the run of its form's settings (part
    generator, 20 steps) on the tiny stack and its corpus: the base BART with its weights nudged."""
    from test_run_stack import make_run, nudged_copy
    from transformers import BartForConditionalGeneration

    from rag_core.storage import caches
    from rag_core.training.loop import TrainSettings
    from rag_core.training.output import file_sha256, read_manifest, write_manifest
    from rag_core.training.session import run_folder

    base = StackSpec(
        question_encoder=str(tiny["dpr_q"]), ctx_encoder=str(tiny["dpr_ctx"]), generator=str(tiny["bart"])
    )
    settings = TrainSettings(part="generator", marginal="sequence", k=3, steps=20)
    questions = file_sha256(ROOT / "assets/train/questions.jsonl")
    out = run_folder(caches.folder("training"), settings, questions, base, str(tiny["corpus"]))
    models = {
        "question_encoder": base.question_encoder,
        "ctx_encoder": base.ctx_encoder,
        "generator": base.generator,
    }
    make_run(out, models, {"generator": lambda d: nudged_copy(tiny["bart"], d, BartForConditionalGeneration)})
    write_manifest(
        out,
        {
            **read_manifest(out),
            "steps": 20,
            "seconds": 1.0,
            "device": "cpu",
            "losses": [2.0, 1.5],
            "data": {"file": "questions.jsonl", "questions": 113},
        },
    )
    return out


@pytest.mark.slow  # over 5 s on 2 cores
def test_a_finished_run_of_the_train_page_opens_in_the_app_and_is_offered_by_its_settings(
    monkeypatch, tiny_flags, tiny, tmp_path
):
    """The Train page's finished run: "Open this model in the app" makes it the session's stack (the
    sidebar's Model names it by its settings), and Ask then shows that model's numbers."""
    out = train_page_run(tiny)
    at = app_with(monkeypatch, tiny_flags)
    before = answer_cards(at)
    run_key = f"run:{out.name}"
    offered = at.selectbox(key="stack").options  # as the sidebar lists them: by settings and date
    assert [
        o
        for o in offered
        if o.startswith("trained generator · sequence · K=3 · 3 steps on questions.jsonl · ")
    ]
    at.session_state["ft_part"] = "generator"
    visit(at, "train.py")
    at.button(key="ft_open").click().run()
    assert not at.exception, [e.value for e in at.exception]
    assert at.session_state["stack"] == run_key
    assert "trained generator · sequence · K=3 · 3 steps on questions.jsonl" in model_line(at).replace(
        "\\", ""
    )
    visit(at, "ask.py")
    assert answer_cards(at) != before  # the tuned generator answers, not the base one


@pytest.mark.slow  # over 5 s on 2 cores
def test_ask_compares_the_answer_with_another_stack_side_by_side(monkeypatch, tiny_flags, tiny):
    """ "Compare with" a fine-tuned run: its answers are the ones the run shows when opened, beside
    the session's own, and the session's stack stays the one it was."""
    out = train_page_run(tiny)
    at = app_with(monkeypatch, tiny_flags)
    at.selectbox(key="compare_with").select(f"run:{out.name}").run()
    assert not at.exception, [e.value for e in at.exception]
    assert at.session_state["stack"] == "cli"
    mine, theirs = [d.value for d in at.dataframe if list(getattr(d.value, "columns", [])) == COMPARED]
    assert list(mine["answer"]) == [v.replace("\\", "") for v, _ in answer_cards(at).values()]
    sides = [d.value for d in at.dataframe if list(getattr(d.value, "columns", [])) == PASSAGES]
    k = at.session_state["k"]
    assert [list(side["rank"]) for side in sides] == [list(range(1, k + 1))] * 2  # all K, each side
    at.selectbox(key="stack").select(f"run:{out.name}").run()
    opened = answer_cards(at)
    assert list(theirs["answer"]) == [v.replace("\\", "") for v, _ in opened.values()]
    assert [f"p = {p}" for p in theirs["p_tok"][:1]] + [f"p = {p}" for p in theirs["p_seq"][1:]] == [
        d.split(", ")[0] for _, d in opened.values()
    ]
    # each side judged by the low-confidence rule with its own generator: the other stack's words are
    # those `ask --run` gives (its own process, its own closed-book rows)
    cli = run_cli(
        "ask",
        QUESTION,
        "--corpus",
        str(tiny["corpus"]),
        "--run",
        str(out),
        "-k",
        "3",
        "--max-new-tokens",
        "6",
        "--json",
    )
    assert cli.returncode == 0, cli.stderr
    judged = json.loads(cli.stdout)["confidence"]
    words = [
        (f"low: {', '.join(judged[d]['codes'])}" if judged[d]["low"] else "ok")
        + ("" if judged[d]["support"] is None else f" · support {judged[d]['support']:+.2f}")
        for d in theirs["decoding"]
    ]
    assert list(theirs["confidence"]) == words  # the support is that stack's own: its closed-book rows
