"""Damaged cache entries heal: each kind is truncated or garbled in a throw-away cache folder, and
the next use detects it and rebuilds it (or falls back to what is intact), never a traceback."""

import json
import logging
import shutil
import subprocess
import sys

import numpy as np
import pytest
import torch
from safetensors import safe_open
from test_eval import QUESTIONS, toy_pipe
from test_kill import kill_when

from rag_core.analysis.evaluation import runs as ev
from rag_core.config import BASE_GENERATOR, DEFAULT_ENCODER, AnswerSettings, cache_dir
from rag_core.generators import load_generator
from rag_core.generators.loading import smollm_folder
from rag_core.index_swap import store as index_swap_store
from rag_core.index_swap.run import experiment_of
from rag_core.maps import projection
from rag_core.retrieval import catalog
from rag_core.retrieval.encoders import load_encoder
from rag_core.storage import caches

from conftest import ROOT

REAL_CACHE = cache_dir()  # read at import, before a test points RAG_LOUPE_CACHE at a throw-away folder


@pytest.fixture(scope="module")
def encoder():
    return load_encoder(DEFAULT_ENCODER, None, torch.device("cpu"))


def garble(path, keep: int = 0):
    """Keep the first `keep` bytes and replace the rest with junk of the same length."""
    data = path.read_bytes()
    path.write_bytes(data[:keep] + b"\x00junk" * max(1, (len(data) - keep) // 5))


@pytest.mark.parametrize("damaged", ["index.faiss", "manifest.json", "passages.jsonl"])
def test_a_damaged_named_index_is_rebuilt(cache, encoder, damaged):
    first = catalog.load_named("wiki", encoder)
    folder = catalog.named_folder("wiki", encoder)
    garble(folder / damaged, keep=10)
    again = catalog.load_named("wiki", encoder)
    assert len(again) == len(first) and [p.id for p in again.passages[:50]] == [
        p.id for p in first.passages[:50]
    ]
    assert json.loads((folder / "manifest.json").read_text())["count"] == len(first)


def test_a_damaged_map_layout_is_refitted(cache, encoder):
    index = catalog.load_named("wiki", encoder)
    first = projection.fit_map(index, "pca", 2)
    (path,) = caches.folder("maps").glob("*.npz")
    garble(path, keep=30)
    again = projection.fit_map(index, "pca", 2)
    assert again.loaded_from is None  # refitted, not read from the damaged file
    assert np.allclose(again.coords, first.coords, atol=1e-4)
    assert projection.fit_map(index, "pca", 2).loaded_from == path  # and the rewritten file is whole


def test_damaged_index_swap_results_fall_back_to_the_intact_rows(cache):
    cfg = experiment_of()
    shipped = index_swap_store.shipped_result(cfg)
    assert shipped is not None, "the shipped run no longer matches the code and data"
    folder = index_swap_store.cache_folder(shipped.key)
    folder.mkdir(parents=True)
    by_position = {}
    for r in shipped.rows:
        by_position.setdefault(r["position"], []).append(r)
    lines = [
        json.dumps(
            {"position": c["position"], "rows": by_position[c["position"]], "closed": c, "seconds": 1.0}
        )
        for c in shipped.closed
    ]
    (folder / "rows.jsonl").write_text("\n".join(lines) + '\n{"position": "torn li', encoding="utf-8")
    (folder / "result.json").write_text('{"rows": [', encoding="utf-8")  # a half-written result
    result = index_swap_store.cached_result(cfg)
    assert result is not None and result.complete
    for decoding in shipped.decodings():
        assert result.table(decoding, "test").equals(shipped.table(decoding, "test"))


def test_a_damaged_saved_eval_run_reads_as_none(cache):
    run = ev.run_eval(toy_pipe(), QUESTIONS, AnswerSettings(k=2, max_new_tokens=6))
    path = ev.save_run(run)
    assert ev.load_run().summary() == run.summary()
    garble(caches.folder("eval") / "latest.json", keep=20)
    assert ev.load_run() is None  # the Eval page then shows "no run yet", not a traceback
    assert ev.load_run(path).summary() == run.summary()  # the timestamped copy is intact


@pytest.mark.slow
@pytest.mark.converts
def test_a_killed_or_damaged_generator_conversion_heals(cache, caplog, monkeypatch):
    """The packaged GGUF is converted to safetensors once (about 20 s). A conversion killed with
    SIGKILL while it writes leaves no converted model. A garbled safetensors file (here a copy of
    the real cache's converted model, garbled) gives one warning line, then a fresh conversion that
    also tidies the killed one's temporary folder, and the model answers with the same weights."""
    convert = [
        sys.executable,
        "-c",
        "from rag_core.generators.loading import smollm_folder; print(smollm_folder())",
    ]
    proc = subprocess.Popen(convert, cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    models = caches.folder("models")
    kill_when(proc, lambda: any(p.name.startswith(".") for p in models.iterdir()))
    assert not [
        p for p in models.iterdir() if not p.name.startswith(".")
    ]  # no half-made model: the old state
    assert [p for p in models.iterdir() if p.name.startswith(".")]  # the killed run's temporary folder

    monkeypatch.setenv("RAG_LOUPE_CACHE", str(REAL_CACHE))  # the converted model every other test uses
    real = smollm_folder()
    monkeypatch.setenv("RAG_LOUPE_CACHE", str(cache))
    folder = models / real.name
    shutil.copytree(real, folder)
    with safe_open(str(real / "model.safetensors"), framework="pt") as f:
        name = next(iter(f.keys()))
        before = f.get_tensor(name)
    ids = load_generator(BASE_GENERATOR, torch.device("cpu")).encode_answer("Paris")
    garble(folder / "model.safetensors", keep=8)
    with caplog.at_level(logging.WARNING, logger="rag_core.generators.loading"):
        again = load_generator(BASE_GENERATOR, torch.device("cpu"))
    notes = [r.getMessage() for r in caplog.records]
    assert len(notes) == 1 and "could not be read" in notes[0] and "converting it again" in notes[0]
    assert [p.name for p in models.iterdir()] == [
        folder.name
    ]  # converted afresh; the killed run's folder is gone
    assert again.encode_answer("Paris") == ids
    assert torch.equal(dict(again.model.named_parameters())[name].detach(), before)
