"""A folder that `train --out DIR` wrote opens as one stack (`--run DIR`, and the app's Model
choice): its tuned parts, read against the frozen passage encoder it was trained with, so the index
is the one it trained on, never re-encoded by the tuned query tower.

The runs here are made by hand, as `training.output` lays them out: the base models' folders copied
as the "tuned" parts, with their weights nudged so a tuned part is told apart from its base."""

import json
import shutil
from pathlib import Path

import numpy as np
import pytest
import torch

from rag_core import stacks
from rag_core.config import DEFAULT_ENCODER, AnswerSettings, StackSpec
from rag_core.corpus import Passage
from rag_core.flags import FlagError, parse_stack_args
from rag_core.models.sources import ModelSourceError, package_path
from rag_core.retrieval.encoders import load_encoder
from rag_core.toys.tiny_models import build_tiny_stack
from rag_core.training.output import write_manifest

from conftest import run_cli

QUESTION = "Who built the bridge of Paris?"
PART = {
    frozenset({"question_encoder"}): "query",
    frozenset({"generator"}): "generator",
    frozenset({"question_encoder", "generator"}): "both",
    frozenset(): "query",
}


def nudged_copy(source: Path, target: Path, model_class) -> Path:
    """A copy of a model folder with every weight moved a little: a stand-in for a tuned part."""
    model = model_class.from_pretrained(source)
    torch.manual_seed(0)
    with torch.no_grad():
        for p in model.parameters():
            p.add_(0.05 * torch.randn_like(p))
    model.save_pretrained(target)
    for name in Path(source).iterdir():  # the tokenizer's files
        if name.is_file() and not (target / name.name).exists():
            shutil.copy(name, target / name.name)
    return target


def make_run(folder: Path, base: dict, tuned: dict, status: str = "done") -> Path:
    """A training output at `folder`: `tuned` maps part -> a function writing that part's folder."""
    folder.mkdir(parents=True)
    outputs = {}
    for part, write in tuned.items():
        write(folder / part)
        outputs[part] = part
    write_manifest(
        folder,
        {
            "status": status,
            "base": base,
            "outputs": outputs,
            "steps_done": 3,
            "data": {"file": "q.jsonl"},
            "settings": {"part": PART[frozenset(tuned)], "marginal": "sequence", "k": 3},
        },
    )
    return folder


@pytest.fixture(scope="module")
def tiny(tmp_path_factory):
    return build_tiny_stack(tmp_path_factory.mktemp("tiny-run"))


@pytest.fixture(scope="module")
def tiny_run(tiny, tmp_path_factory):
    from transformers import BartForConditionalGeneration, DPRQuestionEncoder

    base = {
        "question_encoder": str(tiny["dpr_q"]),
        "ctx_encoder": str(tiny["dpr_ctx"]),
        "generator": str(tiny["bart"]),
    }
    return make_run(
        tmp_path_factory.mktemp("runs") / "run-a",
        base,
        {
            "question_encoder": lambda out: nudged_copy(tiny["dpr_q"], out, DPRQuestionEncoder),
            "generator": lambda out: nudged_copy(tiny["bart"], out, BartForConditionalGeneration),
        },
    )


def test_a_run_names_its_tuned_parts_and_the_frozen_passage_encoder(tiny, tiny_run):
    spec, _, _ = parse_stack_args(["--run", str(tiny_run)])
    assert spec.question_encoder == str(tiny_run / "question_encoder")
    assert spec.generator == str(tiny_run / "generator")
    assert spec.ctx_encoder == str(tiny["dpr_ctx"])  # the passage tower it was trained against


def test_a_run_is_the_whole_stack_and_refuses_what_is_not_one(tiny_run, tmp_path):
    with pytest.raises(FlagError, match="drop --generator"):
        parse_stack_args(["--run", str(tiny_run), "--generator", "x/y"])
    with pytest.raises(ModelSourceError, match="not a training output"):
        parse_stack_args(["--run", str(tmp_path)])
    unfinished = make_run(
        tmp_path / "half", {"question_encoder": "a", "generator": "b"}, {}, status="running"
    )
    with pytest.raises(ModelSourceError, match="not finished"):
        parse_stack_args(["--run", str(unfinished)])


def test_ask_with_run_is_ask_with_its_parts_named(tiny, tiny_run):
    common = [QUESTION, "--corpus", str(tiny["corpus"]), "-k", "3", "--max-new-tokens", "5", "--json"]
    by_run = run_cli("ask", *common, "--run", str(tiny_run))
    assert by_run.returncode == 0, by_run.stderr
    named = run_cli(
        "ask",
        *common,
        "--question-encoder",
        str(tiny_run / "question_encoder"),
        "--ctx-encoder",
        str(tiny["dpr_ctx"]),
        "--generator",
        str(tiny_run / "generator"),
    )
    base = run_cli(
        "ask",
        *common,
        "--question-encoder",
        str(tiny["dpr_q"]),
        "--ctx-encoder",
        str(tiny["dpr_ctx"]),
        "--generator",
        str(tiny["bart"]),
    )
    a, b, c = (json.loads(r.stdout) for r in (by_run, named, base))
    assert a["answers"] == b["answers"] and a["passages"] == b["passages"]
    assert [p["score"] for p in a["passages"]] != [
        p["score"] for p in c["passages"]
    ]  # the tuned tower is read


def test_a_tuned_minilm_query_tower_reads_queries_and_the_base_reads_passages(tmp_path):
    """The default stack's single tower: a tuned copy reads queries only; the passages, and so the
    index (keyed by the encoder id), stay the base's: nothing is re-encoded."""
    from transformers import AutoModel

    cpu = torch.device("cpu")
    tuned = nudged_copy(package_path(DEFAULT_ENCODER), tmp_path / "question_encoder", AutoModel)
    base = load_encoder(DEFAULT_ENCODER, None, cpu)
    pair = load_encoder(str(tuned), DEFAULT_ENCODER, cpu)
    alone = load_encoder(str(tuned), None, cpu)
    assert pair.id == base.id == DEFAULT_ENCODER
    passages = [
        Passage("1", "Moby-Dick", "A novel by Herman Melville."),
        Passage("2", "Paris", "The capital of France."),
    ]
    np.testing.assert_allclose(pair.encode_passages(passages), base.encode_passages(passages), atol=1e-6)
    np.testing.assert_allclose(pair.encode_queries([QUESTION]), alone.encode_queries([QUESTION]), atol=1e-6)
    assert not np.allclose(pair.encode_queries([QUESTION]), base.encode_queries([QUESTION]), atol=1e-3)


def test_finished_runs_of_the_training_cache_are_offered_by_their_settings(tiny, tiny_run, tmp_path):
    root = tmp_path / "training"
    shutil.copytree(tiny_run, root / "run-a")
    make_run(
        root / "run-b", {"question_encoder": "a", "generator": "b"}, {}, status="running"
    )  # unfinished: not offered
    (found,) = stacks.training_runs(root)
    assert found.key == "run:run-a" and found.kind == "run"
    assert found.name.startswith("trained query+generator · sequence · K=3 · 3 steps on q.jsonl · ")
    assert found.spec.generator == str(root / "run-a" / "generator")


def test_a_run_retrained_at_the_same_path_is_another_stack(tiny_run):
    spec = StackSpec(**stacks.run_models(tiny_run))
    before = stacks.fingerprint(spec)
    weights = next((tiny_run / "generator").glob("*.safetensors"))
    data = bytearray(weights.read_bytes())
    data[-1] ^= 1  # one bit of the weights, same size
    weights.write_bytes(bytes(data))
    try:
        assert stacks.fingerprint(spec) != before
    finally:
        data[-1] ^= 1
        weights.write_bytes(bytes(data))
    assert stacks.fingerprint(spec) == before


def test_an_eval_checkpoint_of_a_run_is_not_its_base_and_not_an_earlier_run_at_its_path(tiny, tiny_run):
    """An interrupted eval resumes only under the same models: a tuned query tower (whose encoder id
    is its passage tower's) and a run retrained at the same path each get a key of their own."""
    from types import SimpleNamespace

    from rag_core.analysis.evaluation import eval_checkpoint
    from rag_core.analysis.evaluation.questions import EvalQuestion

    def key_of(stack: StackSpec) -> str:
        pipe = SimpleNamespace(
            index=SimpleNamespace(manifest={}),
            index_name="tiny",
            models=SimpleNamespace(encoder=SimpleNamespace(id="same"), generator=SimpleNamespace(id="g")),
            stack=stack,
        )
        return eval_checkpoint.run_key(pipe, questions, AnswerSettings(), True)

    questions = [EvalQuestion(QUESTION, ["Ada Lovelace"])]
    run = StackSpec(**stacks.run_models(tiny_run))
    base = run.with_(question_encoder=str(tiny["dpr_q"]))
    key = key_of(run)
    assert key != key_of(base)
    weights = next((tiny_run / "question_encoder").glob("*.safetensors"))
    data = bytearray(weights.read_bytes())
    data[-1] ^= 1
    weights.write_bytes(bytes(data))
    try:
        assert key_of(run) != key
    finally:
        data[-1] ^= 1
        weights.write_bytes(bytes(data))


def test_the_untrained_base_is_offered_beside_the_default_once_they_differ(monkeypatch):
    from rag_core.models.presets import PRESETS

    same = stacks.models_of(StackSpec(**PRESETS["base"])) == stacks.models_of(StackSpec())
    assert [s.key for s in stacks.preset_stacks()] == (["default"] if same else ["default", "base"])
    monkeypatch.setitem(PRESETS, "base", {"generator": "owner/another-generator"})
    assert [s.key for s in stacks.preset_stacks()] == ["default", "base"]
