"""The product's trained default: the shipped adapter matches its manifest (files, base model, data,
settings, command), the merged model gives the log-probabilities recorded when it was shipped, it
is the default of every command while `--preset base` stays the untrained stack, and a damaged
merged copy heals."""

import hashlib
import json
import logging
import os
import re
import shutil
import subprocess
from pathlib import Path

import pytest
import torch

from rag_core.config import (
    ADAPTER_DIR,
    BASE_GENERATOR,
    TRAINED_GENERATOR,
    StackSpec,
    cache_dir,
)
from rag_core.generators import fingerprint, trained
from rag_core.generators.causal import FEW_SHOT_STYLE, PLAIN_STYLE
from rag_core.generators.loading import load_generator, smollm_folder
from rag_core.models.presets import PRESETS
from rag_core.models.sources import package_path
from rag_core.storage import caches
from rag_core.training.output import file_sha256
from rag_core.training.session import data_sha256
from rag_core.training.shipped_adapter import PROBES, probe_logps

ROOT = Path(__file__).resolve().parents[1]
REAL_CACHE = cache_dir()  # read at import, before a test points RAG_LOUPE_CACHE at a throw-away folder
TOL = 1e-4  # float32 kernels differ between CPUs by ~2e-5 (docs/results.md quotes this tolerance)


@pytest.fixture(scope="module")
def manifest():
    return json.loads((ADAPTER_DIR / "manifest.json").read_text(encoding="utf-8"))


def test_the_adapter_hash_is_read_once_and_follows_a_changed_file(tmp_path):
    """The hash is kept per version of the files (it is asked for many times a page run), yet an
    adapter saved again at the same path gets its own hash, equal to one computed from the bytes."""
    for name in trained.ADAPTER_FILES:
        shutil.copy(ADAPTER_DIR / name, tmp_path / name)

    def by_hand() -> str:
        h = hashlib.sha256()
        for name in trained.ADAPTER_FILES:
            h.update(name.encode() + b"\x00" + (tmp_path / name).read_bytes())
        return h.hexdigest()[:16]

    first = trained.adapter_hash(tmp_path)
    assert first == by_hand() == trained.adapter_hash(ADAPTER_DIR)
    weights = tmp_path / "adapter_model.safetensors"
    data = bytearray(weights.read_bytes())
    data[-1] ^= 1  # the same size, another byte, another time
    stamp = weights.stat().st_mtime_ns
    weights.write_bytes(bytes(data))
    os.utime(weights, ns=(stamp + 10**9, stamp + 10**9))
    assert trained.adapter_hash(tmp_path) == by_hand() != first


def test_the_manifest_describes_the_shipped_files(manifest):
    assert manifest["adapter_sha256"] == trained.adapter_hash(ADAPTER_DIR)
    gguf = package_path(BASE_GENERATOR)
    assert manifest["base"] == {
        "generator": BASE_GENERATOR,
        "file": gguf.name,
        "sha256": file_sha256(gguf),
        "question_encoder": StackSpec().question_encoder,
    }
    files = [ROOT / "assets" / "train" / f["file"] for f in manifest["data"]["files"]]
    assert [f["sha256"] for f in manifest["data"]["files"]] == [file_sha256(f) for f in files]
    assert manifest["data"]["sha256"] == data_sha256(files)
    assert manifest["settings"]["prompt"] == PLAIN_STYLE and manifest["prompt"] == PLAIN_STYLE
    assert manifest["settings"]["part"] == "generator" and manifest["seed"] == manifest["settings"]["seed"]
    assert manifest["command"] == "make adapter"
    makefile = (ROOT / "Makefile").read_text(encoding="utf-8")
    for flag in (
        "--steps $(ADAPTER_STEPS)",
        f"--batch {manifest['settings']['batch']}",
        f"-k {manifest['settings']['k']}",
        f"--marginal {manifest['settings']['marginal']}",
        "--prompt plain",
        f"--seed {manifest['seed']}",
    ):
        assert flag in makefile, flag
    assert float(re.search(r"--lr (\S+)", makefile).group(1)) == manifest["settings"]["lr"]
    assert f"ADAPTER_STEPS ?= {manifest['settings']['steps']}" in makefile
    config = json.loads((ADAPTER_DIR / "adapter_config.json").read_text(encoding="utf-8"))
    assert config["base_model_name_or_path"] == BASE_GENERATOR  # no folder of the machine that trained it


def test_make_adapter_expands_to_the_manifest_settings(manifest, tmp_path):
    """The command `make adapter` really runs (a dry run prints it with every variable expanded)."""
    dry = subprocess.run(
        ["make", "-n", "adapter", f"ADAPTER_RUN={tmp_path}"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    train_line = next(line for line in dry.splitlines() if " train " in line)
    settings = manifest["settings"]
    for flag in (
        f"--steps {settings['steps']} ",
        f"--batch {settings['batch']} ",
        f"-k {settings['k']} ",
        f"--marginal {settings['marginal']} ",
        f"--out {tmp_path} ",
    ):
        assert flag in train_line + " ", (flag, train_line)
    assert float(re.search(r"--lr (\S+)", train_line).group(1)) == settings["lr"]
    weight = re.search(r"--unlikelihood (\S+)", train_line)  # absent: the marginal likelihood alone
    assert (float(weight.group(1)) if weight else 0.0) == settings.get("unlikelihood", 0.0)


def test_assets_stay_small():
    size = sum(p.stat().st_size for p in (ROOT / "assets").rglob("*") if p.is_file())
    assert size < 40 * 2**20, f"assets/ holds {size / 2**20:.1f} MB"
    assert sum(p.stat().st_size for p in ADAPTER_DIR.iterdir()) < 8 * 2**20


def test_the_merged_model_gives_the_recorded_log_probabilities(default_pipeline, manifest):
    gen = default_pipeline.models.generator
    assert gen.id == TRAINED_GENERATOR and gen.prompt_style == PLAIN_STYLE
    recorded = [p["token_logp"] for p in manifest["probes"]]
    assert [(p["question"], p["text"], p["answer"]) for p in manifest["probes"]] == [
        (q, z.text, a) for q, z, a in PROBES
    ]
    for now, then in zip(probe_logps(gen), recorded):
        assert len(now) == len(then)
        assert max(abs(a - b) for a, b in zip(now, then)) < TOL, (now, then)


def test_the_trained_model_is_the_default_and_base_one_flag_away(base_pipeline):
    assert StackSpec().generator == TRAINED_GENERATOR
    assert StackSpec(**PRESETS["base"]).generator == BASE_GENERATOR
    assert base_pipeline.models.generator.prompt_style == FEW_SHOT_STYLE
    assert fingerprint.prompt_fingerprint(TRAINED_GENERATOR) != fingerprint.prompt_fingerprint(BASE_GENERATOR)


def test_another_adapter_is_another_fingerprint(monkeypatch):
    before = fingerprint.prompt_fingerprint(TRAINED_GENERATOR)
    base = fingerprint.prompt_fingerprint(BASE_GENERATOR)
    monkeypatch.setattr(fingerprint, "adapter_hash", lambda: "0" * 16)
    assert (
        fingerprint.prompt_fingerprint(TRAINED_GENERATOR) != before
    )  # every cached result of the old one is stale
    assert fingerprint.prompt_fingerprint(BASE_GENERATOR) == base


def test_a_damaged_merged_copy_is_merged_again(cache, monkeypatch, caplog):
    """A torn merged copy is noticed on load, merged again from the base, and gives the same weights."""
    monkeypatch.setenv("RAG_LOUPE_CACHE", str(REAL_CACHE))
    real_base = smollm_folder()  # the converted base every other test uses
    monkeypatch.setenv("RAG_LOUPE_CACHE", str(cache))
    shutil.copytree(real_base, caches.folder("models") / real_base.name)  # no conversion in this test
    merged = trained.trained_folder(smollm_folder())
    first = load_generator(TRAINED_GENERATOR, torch.device("cpu"))
    weights = {k: v.clone() for k, v in first.model.state_dict().items() if "q_proj" in k}
    data = (merged / "model.safetensors").read_bytes()
    (merged / "model.safetensors").write_bytes(data[: len(data) // 3])  # a torn write
    with caplog.at_level(logging.WARNING, logger="rag_core.generators.loading"):
        again = load_generator(TRAINED_GENERATOR, torch.device("cpu"))
    notes = [r.getMessage() for r in caplog.records]
    assert len(notes) == 1 and "merging it again" in notes[0]
    assert sorted(p.name for p in caches.folder("models").iterdir()) == sorted([real_base.name, merged.name])
    assert weights and all(torch.equal(again.model.state_dict()[k], v) for k, v in weights.items())
