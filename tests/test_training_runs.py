"""The app's fine-tuning runs on disk (rag_core/training/session.py): the same inputs name the same
folder, what a start would do in each state of that folder (a killed server's run included), and a
damaged run folder cleared (only that) so the run starts afresh."""

from pathlib import Path

import pytest

from rag_core.config import StackSpec
from rag_core.training import checkpoint
from rag_core.training.loop import TrainSettings
from rag_core.training.output import MANIFEST, TrainingError, start_folder, write_manifest
from rag_core.training.session import discard_damaged, keep_upload, run_folder, run_state

SHA = "ab" * 32


def test_the_same_inputs_name_the_same_folder_and_others_another(tmp_path):
    one = run_folder(tmp_path, TrainSettings(steps=20), SHA, StackSpec(), None)
    assert one == run_folder(tmp_path, TrainSettings(steps=20), SHA, StackSpec(), None)
    others = [
        run_folder(tmp_path, TrainSettings(steps=21), SHA, StackSpec(), None),
        run_folder(tmp_path, TrainSettings(steps=20, marginal="token"), SHA, StackSpec(), None),
        run_folder(tmp_path, TrainSettings(steps=20), "cd" * 32, StackSpec(), None),
        run_folder(tmp_path, TrainSettings(steps=20), SHA, StackSpec(), "2016"),
        run_folder(tmp_path, TrainSettings(steps=20, lr=1e-4), SHA, StackSpec(), None),
        run_folder(tmp_path, TrainSettings(steps=20), SHA, StackSpec(generator="another"), None),
    ]
    assert len({one, *others}) == 7


def test_each_state_of_a_run_folder(tmp_path):
    out = tmp_path / "run"
    assert run_state(out) == "new"
    start_folder(out, "new", {"steps": 2})  # a server killed during model loading: no checkpoint
    assert run_state(out) == "replace"
    (out / checkpoint.FILE).write_bytes(b"stands for a checkpoint")  # killed after a checkpoint
    assert run_state(out) == "resume"
    write_manifest(out, {"steps": 2, "status": "stopped"})  # cancelled: stopped with a checkpoint
    assert run_state(out) == "resume"
    write_manifest(out, {"steps": 2, "status": "done"})
    assert run_state(out) == "done"


def test_a_damaged_run_folder_is_cleared_and_nothing_else(tmp_path):
    out = tmp_path / "run"
    start_folder(out, "new", {"steps": 2})
    (out / MANIFEST).write_text('{"kind": "rag-loupe-tr', encoding="utf-8")  # a torn manifest
    assert run_state(out) == "damaged"
    discard_damaged(out)
    assert not out.exists() and run_state(out) == "new" and list(tmp_path.iterdir()) == []
    good = tmp_path / "good"
    start_folder(good, "new", {"steps": 2})
    with pytest.raises(TrainingError, match="not a damaged training run"):
        discard_damaged(good)
    with pytest.raises(TrainingError):
        discard_damaged(tmp_path / "missing")
    assert (good / MANIFEST).is_file()


def test_an_upload_is_kept_once_by_its_content(tmp_path):
    data = b'{"question": "Who wrote Moby-Dick?", "answers": ["Herman Melville"]}\n'
    a, b = keep_upload(tmp_path, data), keep_upload(tmp_path, data)
    assert a == b and a.read_bytes() == data and Path(a).parent.name == "uploads"
    assert keep_upload(tmp_path, data + b"\n") != a
