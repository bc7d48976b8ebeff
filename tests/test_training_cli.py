"""`python -m rag_core train` on tiny random DPR + BART models: an end-to-end run with held-out
figures and a loadable output, resume and replace, the never-destroy rule for --out, and the
one-line error rule for bad input."""

import json
import re

import pytest
import torch

from rag_core.cli import main
from rag_core.corpus import read_corpus_file
from rag_core.generators import load_generator
from rag_core.retrieval.encoders import load_encoder
from rag_core.toys.tiny_models import build_tiny_stack
from rag_core.training.output import file_sha256


@pytest.fixture(scope="module")
def tiny(tmp_path_factory):
    root = tmp_path_factory.mktemp("tiny-cli")
    paths = build_tiny_stack(root / "models")
    rows = []
    for p in read_corpus_file(str(paths["corpus"])).passages[:9]:
        m = re.match(r"The (.+?) was (\w+) by (.+?) in \d+\.", p.text)
        rows.append({"question": f"Who {m.group(2)} the {m.group(1)}?", "answers": [m.group(3)]})
    (root / "train.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows[:6]), encoding="utf-8")
    (root / "held.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows[6:]), encoding="utf-8")
    flags = [
        "--question-encoder",
        str(paths["dpr_q"]),
        "--ctx-encoder",
        str(paths["dpr_ctx"]),
        "--generator",
        str(paths["bart"]),
        "--corpus",
        str(paths["corpus"]),
        "--device",
        "cpu",
        "-k",
        "3",
    ]
    return {
        "root": root,
        "paths": paths,
        "train": str(root / "train.jsonl"),
        "held": str(root / "held.jsonl"),
        "flags": flags,
    }


def train(tiny, out, *extra) -> int:
    return main(["train", tiny["train"], "--out", str(out), *tiny["flags"], *extra])


def test_a_run_writes_loadable_folders_a_manifest_and_held_out_figures(tiny, capsys):
    out = tiny["root"] / "run"
    assert (
        train(
            tiny,
            out,
            "--part",
            "both",
            "--steps",
            "2",
            "--batch",
            "3",
            "--lr",
            "1e-2",
            "--eval",
            tiny["held"],
            "--json",
        )
        == 0
    )
    m = json.loads(capsys.readouterr().out)
    assert m == json.loads((out / "training.json").read_text())
    assert (m["status"], m["steps_done"], m["part"], m["marginal"], m["k"]) == (
        "done",
        2,
        "both",
        "sequence",
        3,
    )
    assert m["data"] == {
        "file": "train.jsonl",
        "sha256": file_sha256(tiny["train"]),
        "questions": 6,
        "skipped": 0,
    }
    assert m["base"]["generator"] == str(tiny["paths"]["bart"]) and m["lr"] == {
        "query": 1e-2,
        "generator": 1e-2,
    }
    assert len(m["losses"]) == 2 and m["loss"]["first"] == m["losses"][0]
    before, after = m["heldout"]["before"], m["heldout"]["after"]
    for figures in (before, after):
        assert figures["n"] == 3 and set(figures["em"]) == {"rag-token", "rag-sequence"}
        assert 0 <= figures["recall_at_1"] <= figures["recall_at_k"] <= 1 and 1 <= figures["distinct"] <= 9
    load_encoder(str(out / "question_encoder"), str(tiny["paths"]["dpr_ctx"]), torch.device("cpu"))
    load_generator(str(out / "generator"), torch.device("cpu"))


def test_resume_continues_and_force_replaces(tiny, capsys):
    out = tiny["root"] / "resumed"
    assert train(tiny, out, "--steps", "1", "--lr", "1e-3") == 0
    first = json.loads((out / "training.json").read_text())["losses"]
    capsys.readouterr()
    assert train(tiny, out, "--steps", "2", "--lr", "1e-3") == 2  # neither --resume nor --force
    assert "--resume" in capsys.readouterr().err
    assert (
        train(tiny, out, "--steps", "2", "--lr", "1e-3", "--marginal", "token", "--resume") == 2
    )  # other settings
    assert "marginal" in capsys.readouterr().err
    assert (
        json.loads((out / "training.json").read_text())["marginal"] == "sequence"
    )  # refused before touching it
    assert (
        main(
            [
                "train",
                tiny["held"],
                "--out",
                str(out),
                *tiny["flags"],
                "--steps",
                "2",
                "--lr",
                "1e-3",
                "--resume",
            ]
        )
        == 2
    )  # other data
    assert "another questions file" in capsys.readouterr().err
    assert json.loads((out / "training.json").read_text())["losses"] == first  # refused before touching it
    assert train(tiny, out, "--steps", "3", "--lr", "1e-3", "--resume") == 0
    m = json.loads((out / "training.json").read_text())
    assert m["steps_done"] == 3 and m["losses"][:1] == first
    assert train(tiny, out, "--steps", "1", "--lr", "1e-3", "--force") == 0
    assert json.loads((out / "training.json").read_text())["steps_done"] == 1


def test_out_on_a_folder_that_is_not_a_training_output_is_refused_and_untouched(tiny, capsys):
    notes = tiny["root"] / "notes"
    notes.mkdir()
    (notes / "todo.txt").write_text("keep me", encoding="utf-8")
    for extra in ([], ["--force"], ["--resume"]):
        assert train(tiny, notes, "--steps", "1", *extra) == 2
        err = capsys.readouterr().err.strip().splitlines()
        assert len(err) == 1 and err[0].startswith("error:") and "not a RAG Loupe training output" in err[0]
    assert sorted(p.name for p in notes.iterdir()) == ["todo.txt"]
    assert (notes / "todo.txt").read_text(encoding="utf-8") == "keep me"


@pytest.mark.parametrize(
    "args,says",
    [
        (["train", "missing.jsonl", "--out", "{new}"], "not found"),
        (["train", "{train}", "--out", "{new}", "--part", "retriever"], "invalid choice"),
        (["train", "{train}", "--out", "{new}", "--marginal", "mixture"], "invalid choice"),
        (["train", "{train}", "--out", "{new}", "--steps", "0"], "at least 1"),
        (["train", "{train}", "--out", "{new}", "--lr", "-1"], "positive"),
        (["train", "{train}", "--out", "{new}", "--lr", "2"], "between 0 and 1"),
        (["train", "{train}", "--out", "{new}", "--resume"], "nothing to resume"),
        (["train", "{train}", "--out", "{new}", "--force", "--resume"], "exclude each other"),
        (["train", "{train}", "--out", "{root}/no/such/dir/out"], "not a folder"),
        (["train", "{train}", "--out", "{train}"], "is a file"),
        (["train", "{train}", "--out", "{new}", "--eval", "missing.jsonl"], "not found"),
        (["train", "{root}", "--out", "{new}"], "is a folder"),
        (["train"], "required"),
    ],
)
def test_bad_input_exits_2_with_one_error_line(tiny, capsys, args, says):
    fill = {"new": str(tiny["root"] / "never-made"), "train": tiny["train"], "root": str(tiny["root"])}
    assert (
        main([a.format(**fill) for a in args] + tiny["flags"]) == 2
    )  # the tiny models, should a check ever slip
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("error:") and says in err[0], err
    assert not (tiny["root"] / "never-made").exists()
