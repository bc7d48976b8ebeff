"""The structure is a checked contract: import-linter's layers (pyproject.toml) hold, an upward or
circular import breaks them (imports inside functions included), the app's one door into the
engine stands before every engine module, and the size limits hold."""

import ast
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import tomllib

from conftest import ROOT

LINT = Path(sys.executable).with_name("lint-imports")
# Counted on ruff-formatted code, which lays a long call out one argument a line: the same code is
# about a third longer than hand-wrapped, and these limits are the earlier 300 / 60 / 150 scaled to match.
FILE_LINES, FUNCTION_LINES, PAGE_LINES = 400, 80, 210
# rag_core's root holds the core (config, marginals, trace, pipeline, ...); the rest sits in packages
ROOT_MODULES = 12


def lint(cwd: Path) -> subprocess.CompletedProcess:
    return subprocess.run(
        [str(LINT), "--no-cache"],
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=300,
        env={"PATH": "/usr/bin:/bin", "PYTHONPATH": str(cwd)},
    )


def test_the_layers_hold():
    out = lint(ROOT)
    assert out.returncode == 0, out.stdout[-3000:] + out.stderr[-2000:]
    assert "0 broken" in out.stdout


@pytest.mark.parametrize(
    "module,line",
    [
        ("rag_core/marginals.py", "from rag_core.cli import main\n"),  # the bottom layer importing the top
        (
            "rag_core/pipeline.py",
            "from rag_core.analysis.diagnosis import verdicts\n",
        ),  # the pipeline importing analysis
        (
            "rag_core/analysis/attribution/token_sources.py",
            "from rag_core.analysis.evaluation import runs\n",
        ),  # attribution importing evaluation, the part of analysis above it
        ("app/state.py", "import pages.ask\n"),  # app importing a page
        ("app/ui/palette.py", "from app.ask import compare\n"),  # a shared part importing one page's
        ("app/ui/palette.py", "from rag_core.analysis import matching\n"),  # a shared part past the door
        ("app/eval/eval_job.py", "import rag_core.pipeline\n"),  # a page's module reaching past the door
        ("rag_core/trace.py", "import streamlit\n"),  # the engine importing Streamlit
        (
            "rag_core/retrieval/index.py",
            "import ray\n",
        ),  # Ray anywhere but the Ray build: the engine would need it installed
        # a cycle hidden in a function: verdicts <- diagnosis_report already, so this closes a circle
        (
            "rag_core/analysis/diagnosis/verdicts.py",
            "def _f():\n    from rag_core.analysis.diagnosis import diagnosis_report as r\n    return r\n",
        ),
    ],
)
def test_an_upward_or_circular_import_breaks_them(tmp_path, module, line):
    for part in ("rag_core", "app", "pages"):
        shutil.copytree(ROOT / part, tmp_path / part, ignore=shutil.ignore_patterns("__pycache__"))
    shutil.copy(ROOT / "pyproject.toml", tmp_path / "pyproject.toml")
    with open(tmp_path / module, "a", encoding="utf-8") as f:
        f.write("\n" + line)
    out = lint(tmp_path)
    assert out.returncode != 0 and "BROKEN" in out.stdout, out.stdout[-3000:]


def test_the_door_is_the_only_way_into_the_engine():
    """The app's door contract forbids every top-level module and package of rag_core but the door
    itself, so an engine module added later is behind it from the start."""
    contracts = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["tool"]["importlinter"][
        "contracts"
    ]
    door = next(c for c in contracts if c["type"] == "forbidden" and c["source_modules"] == ["app", "pages"])
    engine = {p.stem for p in (ROOT / "rag_core").glob("*.py") if p.stem != "__init__"}
    engine |= {p.parent.name for p in (ROOT / "rag_core").glob("*/__init__.py")}
    assert sorted(door["forbidden_modules"]) == sorted(f"rag_core.{m}" for m in engine - {"loupe"})


def _lines(path: Path) -> int:
    return len(path.read_text(encoding="utf-8").splitlines())


def test_no_file_or_function_and_no_page_is_over_the_size_limits():
    """The engine, the app's modules and the benches: a file at most FILE_LINES lines and a function
    at most FUNCTION_LINES; a page at most PAGE_LINES."""
    limited = [p for folder in ("rag_core", "app", "bench") for p in sorted((ROOT / folder).rglob("*.py"))]
    too_long = [f"{p.relative_to(ROOT)}: {_lines(p)} lines" for p in limited if _lines(p) > FILE_LINES]
    too_long += [
        f"{p.relative_to(ROOT)}: {_lines(p)} lines"
        for p in sorted((ROOT / "pages").glob("*.py"))
        if _lines(p) > PAGE_LINES
    ]
    for p in limited + sorted((ROOT / "pages").glob("*.py")):
        for node in ast.walk(ast.parse(p.read_text(encoding="utf-8"))):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                n = node.end_lineno - node.lineno + 1
                if n > FUNCTION_LINES:
                    too_long.append(f"{p.relative_to(ROOT)}:{node.lineno} {node.name}(): {n} lines")
    assert not too_long, too_long


def test_the_engine_root_holds_the_core_and_the_rest_sits_in_packages():
    root = sorted(p.name for p in (ROOT / "rag_core").glob("*.py"))
    assert len(root) <= ROOT_MODULES, root
