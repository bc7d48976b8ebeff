"""Shared fixtures. Converted models, indexes and maps go to the cache folder ($RAG_LOUPE_CACHE or
~/.cache/rag-loupe), so tests never write into the repository."""

import contextlib
import functools
import io
import os
import subprocess
import sys
import tempfile
from pathlib import Path
from types import SimpleNamespace

import pytest

ROOT = Path(__file__).resolve().parent.parent

# `make test` runs the suite on parallel workers (pytest-xdist, one test module per worker at a
# time). Each worker, and every server or command it starts, may use every core, with OpenMP's
# waiting threads asleep instead of spinning (set before torch loads OpenMP): while one worker waits
# on a browser, the other computes on both cores. Spinning threads of two workers would slow both
# many times; sleeping ones were measured no slower than one thread each (the same four questions
# on 2 cores: two 2-thread runs at once 20.5 s each, two 1-thread runs 20.7 s; one alone 15.3 s
# with 2 threads, 18.3 s with 1).
if os.environ.get("PYTEST_XDIST_WORKER_COUNT"):
    os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")

# The modules that took longest (measured with --durations), slowest first, browser modules and
# computing ones interleaved: a browser test leaves part of the cores idle (pages render, servers
# start), which a computing module on the other worker fills. `make test` hands modules to the
# workers in collection order (--no-loadscope-reorder), so these start first and a long one never
# starts last while the other worker has nothing left to do.
SLOWEST_FIRST = [
    "test_browser_journeys.py",
    "test_index_swap.py",
    "test_browser_confidence.py",
    "test_app_stack.py",
    "test_browser_map.py",
    "test_replay.py",
    "test_classroom.py",
    "test_example_questions.py",
    "test_browser_notices.py",
    "test_ray_build.py",
    "test_browser_layout.py",
    "test_cache_faults.py",
    "test_browser.py",
    "test_stuffed.py",
    "test_browser_counterfactual.py",
    "test_train_page.py",
    "test_browser_line.py",
    "test_decoding_reference.py",
    "test_browser_replay.py",
    "test_app_pages_b.py",
    "test_browser_markup.py",
    "test_batching.py",
    "test_browser_stack.py",
    "test_counterfactual_model.py",
    "test_browser_link.py",
    "test_shipped_eval_runs.py",
]


# What the warm-up below fills, in two processes side by side (the conversion is one core's work):
# the packaged generator converted and the trained adapter merged onto it, and the default and the
# two year indexes built.
WARM_UP = [
    "from rag_core.generators.loading import smollm_folder\n"
    "from rag_core.generators.trained import trained_folder\n"
    "trained_folder(smollm_folder())",
    "import torch\n"
    "from rag_core.config import DEFAULT_ENCODER\n"
    "from rag_core.retrieval.encoders import load_encoder\n"
    "from rag_core.pipeline import open_index\n"
    "encoder = load_encoder(DEFAULT_ENCODER, None, torch.device('cpu'))\n"
    "for name in (None, '2016', '2018'):  # None: the default index\n"
    "    open_index(name, encoder)\n",
]


def _scan_components_once() -> None:
    """Each new AppTest scans the metadata of every installed package for Streamlit components
    (about 0.5 s on this environment's ~190 packages, once per AppTest); the packages do not change
    during a run, so a process scans them once."""
    from streamlit.components.v2 import manifest_scanner

    manifest_scanner.scan_component_manifests = functools.cache(manifest_scanner.scan_component_manifests)


_scan_components_once()


def pytest_sessionstart(session):
    """With parallel workers, fill the shared caches once before the workers start. On an empty
    cache the first two test servers would otherwise convert the same model and build the same
    indexes at the same moment on the same cores (measured: ~100 s to their first answers; a cold
    `ask` alone takes ~56 s, a warm one ~16 s)."""
    if os.environ.get("PYTEST_XDIST_WORKER") or not getattr(session.config.option, "numprocesses", None):
        return
    logs = [
        tempfile.TemporaryFile("w+") for _ in WARM_UP
    ]  # files, not pipes: neither process can block on a full one
    procs = [
        subprocess.Popen([sys.executable, "-c", code], cwd=ROOT, stdout=subprocess.DEVNULL, stderr=log)
        for code, log in zip(WARM_UP, logs)
    ]
    for proc, log in zip(procs, logs):
        if proc.wait():
            log.seek(0)
            raise pytest.UsageError(f"filling the caches before the tests failed:\n{log.read()[-3000:]}")


def pytest_collection_modifyitems(items):
    rank = {name: i for i, name in enumerate(SLOWEST_FIRST)}
    items.sort(key=lambda item: rank.get(item.path.name, len(rank)))  # stable: a module's own order stays


def run_cli(*args, env: dict | None = None) -> SimpleNamespace:
    """`python -m rag_core ARGS` in this process: its exit code and what it printed, as
    `subprocess.run` gives them (returncode, stdout, stderr), without an interpreter start per
    call. `env` is set for the call only. Tests of a killed process or of a fresh interpreter's
    behaviour start a real subprocess instead."""
    from rag_core.cli import main

    out, err = io.StringIO(), io.StringIO()
    saved = {k: os.environ.get(k) for k in (env or {})}
    os.environ.update(env or {})
    try:
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            code = main([str(a) for a in args])
    finally:
        for k, v in saved.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v
    return SimpleNamespace(returncode=code, stdout=out.getvalue(), stderr=err.getvalue())


def tiny_pipeline(folder: Path, settings=None):
    """A Pipeline over the tiny random DPR + BART stack built in `folder` (about a second, no
    download), on an index of its own small corpus; returns (pipeline, stack paths)."""
    import torch

    from rag_core.config import AnswerSettings
    from rag_core.corpus import read_corpus_file
    from rag_core.generators import load_generator
    from rag_core.pipeline import Models, Pipeline
    from rag_core.retrieval.encoders import load_encoder
    from rag_core.retrieval.index import PassageIndex
    from rag_core.toys.tiny_models import build_tiny_stack

    cpu = torch.device("cpu")
    stack = build_tiny_stack(folder)
    encoder = load_encoder(str(stack["dpr_q"]), str(stack["dpr_ctx"]), cpu)
    passages = read_corpus_file(str(stack["corpus"])).passages
    index = PassageIndex.build(encoder.encode_passages(passages), passages, encoder.id)
    models = Models(encoder, load_generator(str(stack["bart"]), cpu), cpu)
    return Pipeline(models, "tiny", index, settings or AnswerSettings(k=3)), stack


def tiny_llama(vocab_size: int, bos: int, eos: int, pad: int, width: int = 32):
    """A tiny random Llama (two layers, a fixed seed), its next-token distributions peaked
    (initializer range 0.2), so that passages differ in what they give."""
    import torch
    from transformers import LlamaConfig, LlamaForCausalLM

    torch.manual_seed(0)
    config = LlamaConfig(
        vocab_size=vocab_size,
        hidden_size=width,
        intermediate_size=2 * width,
        num_hidden_layers=2,
        num_attention_heads=2,
        num_key_value_heads=1,
        max_position_embeddings=8192,
        initializer_range=0.2,
        bos_token_id=bos,
        eos_token_id=eos,
        pad_token_id=pad,
    )
    return LlamaForCausalLM(config).eval()


def build_tiny_generator(folder: Path) -> Path:
    """`tiny_llama` saved as a generator folder with the default generator's own tokenizer, for
    `--generator FOLDER`: with the default retriever it reads the real indexes and the real prompts,
    as the default stack does, at a hundredth of its model work. For tests of what a page shows of
    any answer, not of what the trained model answers."""
    from transformers import AutoTokenizer

    from rag_core.generators.loading import smollm_folder

    tok = AutoTokenizer.from_pretrained(smollm_folder())
    tiny_llama(len(tok), tok.bos_token_id, tok.eos_token_id, tok.pad_token_id).save_pretrained(folder)
    tok.save_pretrained(folder)
    return folder


@pytest.fixture(scope="session")
def tiny_generator(tmp_path_factory) -> Path:
    """`build_tiny_generator` in a folder of the run's, built once a worker."""
    return build_tiny_generator(tmp_path_factory.mktemp("tiny-generator"))


@pytest.fixture(scope="module")
def on_tiny_generator(tiny_generator):
    """For a module's AppTests: the app's command line names `tiny_generator` (`streamlit run
    app/main.py -- --generator FOLDER`) while the module runs, its tests included."""
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(sys, "argv", [str(ROOT / "app/main.py"), "--generator", str(tiny_generator)])
        yield tiny_generator


def cache_sharing(folder: Path, kinds=("models",), source: Path | None = None) -> Path:
    """A throw-away cache folder whose `kinds` hold a link to each entry `source` (by default the
    real cache) has of them now: by default the converted models, so a test on an empty cache does
    not convert the generator again. What a test builds afterwards (a tiny stack's index, an
    uploaded corpus's, a map fit) lands in `folder`, never in the user's cache.

    >>> real, mine = Path(tempfile.mkdtemp()), Path(tempfile.mkdtemp())
    >>> (real / "indexes" / "wiki").mkdir(parents=True)
    >>> shared = cache_sharing(mine, ("indexes",), real) / "indexes"
    >>> (shared / "wiki").is_symlink(), (shared / "tiny").mkdir(), (real / "indexes" / "tiny").exists()
    (True, None, False)
    """
    from rag_core.config import cache_dir

    source = cache_dir() if source is None else source
    for kind in kinds:
        (folder / kind).mkdir(parents=True, exist_ok=True)
        shared = source / kind
        for entry in sorted(shared.iterdir()) if shared.is_dir() else []:
            if not entry.name.startswith("."):  # a build in progress is no entry yet
                (folder / kind / entry.name).symlink_to(entry.resolve(), target_is_directory=entry.is_dir())
    return folder


@pytest.fixture
def cache(tmp_path, monkeypatch):
    """An empty cache folder for one test (modules with a cache of their own override it)."""
    monkeypatch.setenv("RAG_LOUPE_CACHE", str(tmp_path))
    return tmp_path


@pytest.fixture(scope="session")
def default_pipeline():
    """The real embedded default stack on the default index, loaded once for the whole run."""
    from rag_core.pipeline import load_pipeline

    return load_pipeline()


def on_generator(pipe, generator: str):
    """`pipe` with another generator, sharing its encoder and index (no second copy of either)."""
    import torch

    from rag_core.generators.loading import load_generator
    from rag_core.pipeline import Models, Pipeline

    models = Models(pipe.models.encoder, load_generator(generator, torch.device("cpu")), pipe.models.device)
    stack = pipe.stack.with_(generator=generator)
    return Pipeline(models, pipe.index_name, pipe.index, pipe.settings, stack)


@pytest.fixture(scope="session")
def base_pipeline(default_pipeline):
    """The untrained packaged stack (`--preset base`: the few-shot prompt) on the default index,
    sharing the default pipeline's encoder and index; for tests of that model's own behaviour."""
    from rag_core.config import BASE_GENERATOR

    return on_generator(default_pipeline, BASE_GENERATOR)


@pytest.fixture(scope="session")
def tiny_llama_pipeline(default_pipeline, tiny_generator):
    """The default retriever and index with `tiny_generator` as the generator: for the engine's
    exactness oracles (a batch against separate calls, a cache against a plain forward), which hold
    for any model of the default's architecture and tokenizer, at a hundredth of the work."""
    return on_generator(default_pipeline, str(tiny_generator))


def check_trace_invariants(frame):
    """docs/design.md §4.3: per (decoding, candidate, step) priors and posteriors sum to 1, and
    p_token_mix = Σ prior · p_token_doc, an unscored pair (fast rescoring: empty) counting 0."""
    import numpy as np

    assert len(frame) > 0
    stuffed = frame[frame["decoding"] == "stuffed"]
    for _, g in stuffed.groupby("candidate"):  # the stuffed reading: no mixture, its own product
        steps = g.groupby("step")["p_token_mix"]
        assert (steps.nunique() == 1).all()
        assert np.isclose(g["p_stuffed"].iloc[0], steps.first().prod(), rtol=1e-5, atol=1e-12)
    for _, g in frame[frame["decoding"] != "stuffed"].groupby(["decoding", "candidate", "step"]):
        assert np.isclose(g["prior"].sum(), 1.0, atol=1e-6)
        assert np.isclose(g["posterior_step"].sum(), 1.0, atol=1e-6)
        assert np.isclose(g["posterior_prefix"].sum(), 1.0, atol=1e-6)
        mix = (g["prior"] * g["p_token_doc"].fillna(0.0)).sum()
        assert np.isclose(g["p_token_mix"].iloc[0], mix, rtol=1e-5, atol=1e-12)
        assert ((g["posterior_prefix"] >= 0) & (g["posterior_prefix"] <= 1)).all()


def visit(at, page: str, errors_allowed: bool = False):
    """Switch an AppTest to `page` (a file in pages/), run it, and check it raised nothing (and,
    unless `errors_allowed`, showed no error box)."""
    at.switch_page(str(ROOT / "pages" / page))
    at.run()
    assert not at.exception, [e.value for e in at.exception]
    if not errors_allowed:
        assert not at.error, [e.value for e in at.error]
    return at


@pytest.fixture(scope="session")
def run_answers(tmp_path_factory) -> Path:
    """One `answers` cache folder for the whole run, shared by every worker's servers: an answer
    one server computed, another reads back (the store addresses answers by everything they depend
    on, so a shared folder changes no number). New for each run, so a test that needs a question
    computed (the line's waiting questions) never finds it answered by an earlier run."""
    base = tmp_path_factory.getbasetemp()
    folder = (base.parent if os.environ.get("PYTEST_XDIST_WORKER") else base) / "answers"
    folder.mkdir(exist_ok=True)
    return folder


@pytest.fixture(scope="session", autouse=True)
def answers_of_this_run(run_answers):
    """The app's answers computed in this process (AppTests) are kept in the run's own folder too,
    never in the user's cache, whose answers an earlier run may have left."""
    from rag_core.loupe import answer_store

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(answer_store, "default_folder", lambda: run_answers)
        yield


@pytest.fixture(autouse=True)
def converts_only_when_marked(request, monkeypatch):
    """Under `make test` the warm-up has converted the packaged generator before any test starts,
    so a test that converts it again (about 25 s of a core) does so because its cache folder is
    empty: it links the converted models instead (`cache_sharing`), or says with
    `@pytest.mark.converts` that the conversion is what it tests. Run alone, without workers, a
    test may be the first to need the model, and converting it is then its due."""
    if not os.environ.get("PYTEST_XDIST_WORKER"):
        yield
        return
    from rag_core.generators import loading

    seen = []
    real = loading._gguf_parsed_once  # entered once a conversion, and only then

    def counted():
        seen.append(True)
        return real()

    monkeypatch.setattr(loading, "_gguf_parsed_once", counted)
    yield
    if seen and request.node.get_closest_marker("converts") is None:
        pytest.fail(
            f"converted the packaged generator {len(seen)} time(s) on an empty cache: link the "
            "converted models with cache_sharing, or mark the test @pytest.mark.converts"
        )


def sharing_answers(cache: Path, answers: Path) -> Path:
    """`cache` with its `answers` folder the run's shared one (`run_answers`)."""
    (cache / "answers").symlink_to(answers, target_is_directory=True)
    return cache


@pytest.fixture(scope="session")
def served_cache(tmp_path_factory, run_answers):
    """The throw-away cache folder of the worker's shared server (`served`)."""
    import browser_kit

    return sharing_answers(browser_kit.throwaway_cache(tmp_path_factory.mktemp("browser-cache")), run_answers)


@pytest.fixture(scope="session")
def served(served_cache):
    """(URL, process) of a Streamlit server of the app on a throw-away cache, one per test worker
    and shared by every browser module it runs: the model loads once a worker, and what one module
    computed is there for the next (each module's browser is a session of its own). A module that
    needs a server of its own (other flags, a cache it fills) starts one with
    `browser_kit.running_server`. Defined here, not in browser_kit, so that it is one fixture for the
    whole run; browser_kit is imported when a browser test asks for it, because importing it skips
    (or, in CI, fails) without Chromium."""
    import browser_kit

    with browser_kit.running_server(served_cache) as found:
        yield found


@pytest.fixture(scope="session")
def server(served):
    return served[0]


@pytest.fixture(scope="session")
def tiny_served(tmp_path_factory, tiny_generator, run_answers):
    """(URL, process) of a Streamlit server of the app on the default retriever with the
    tiny random Llama as its generator (`--generator`, `tiny_generator`), on a throw-away cache, one
    per test worker: for the browser tests of what a page does with any text or link, which need no
    trained model and so not its minutes. The retriever is the default one, so the indexes are the
    real ones and the year indexes' shipped vectors spare Index swap a build."""
    import browser_kit

    cache = sharing_answers(browser_kit.throwaway_cache(tmp_path_factory.mktemp("tiny-cache")), run_answers)
    with browser_kit.running_server(cache, "server-tiny.log", ("--generator", str(tiny_generator))) as found:
        yield found
