"""docs/architecture.md's layers and module list are generated, never written by hand: the layers
from the import-linter contracts in pyproject.toml (their one source), a module's line from the
first paragraph of its own docstring. The test fails when the page drifts from either; running
this file writes the page again:

    python tests/test_architecture_doc.py
"""

import ast
import sys
from pathlib import Path

import tomllib

ROOT = Path(__file__).resolve().parent.parent
DOC = ROOT / "docs" / "architecture.md"
START = "<!-- generated from pyproject.toml and the modules' docstrings (tests/test_architecture_doc.py) -->"
END = "<!-- end of the generated part -->"
FOLDERS = ("rag_core", "app", "pages")  # the modules the list covers


def first_paragraph(path: Path) -> str:
    """A module's docstring up to its first blank line, on one line; "" without a docstring.

    >>> import tempfile
    >>> f = Path(tempfile.mkdtemp()) / "m.py"
    >>> _ = f.write_text('\"\"\"One line,\\nwrapped.\\n\\nMore.\"\"\"')
    >>> first_paragraph(f)
    'One line, wrapped.'
    """
    doc = ast.get_docstring(ast.parse(path.read_text(encoding="utf-8"))) or ""
    return " ".join(doc.split("\n\n")[0].split())


def _module_name(path: Path) -> str:
    parts = path.relative_to(ROOT).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def layer_lines() -> list[str]:
    """Each import-linter contract of pyproject.toml as the page shows it."""
    contracts = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["tool"]["importlinter"][
        "contracts"
    ]
    lines = []
    for c in contracts:
        lines.append(f"- **{c['name']}**")
        if c["type"] == "layers":
            where = ", ".join(f"`{x}`" for x in c.get("containers", [])) or "the top-level packages"
            lines.append(f"  (layers of {where}, highest first; `|` joins the independent ones of a layer):")
            lines += [f"  {i}. `{layer}`" for i, layer in enumerate(c["layers"], 1)]
        elif c["type"] == "forbidden":
            lines.append(
                "  ("
                + ", ".join(f"`{m}`" for m in c["source_modules"])
                + " must not import "
                + ", ".join(f"`{m}`" for m in c["forbidden_modules"])
                + (
                    "; allowed: " + ", ".join(f"`{m}`" for m in c["ignore_imports"])
                    if c.get("ignore_imports")
                    else ""
                )
                + ")"
            )
        elif c["type"] == "acyclic_siblings":
            under = ", ".join(f"`{a}`" for a in c["ancestors"])
            lines.append(f"  (no cycle between sibling modules under {under})")
    return lines


def module_lines() -> list[str]:
    """One table row a module or package of FOLDERS, by its dotted name."""
    rows = ["| module | what it holds (the first paragraph of its docstring) |", "|---|---|"]
    paths = sorted(
        (p for folder in FOLDERS for p in (ROOT / folder).rglob("*.py")), key=lambda p: _module_name(p)
    )
    for p in paths:
        text = first_paragraph(p).replace("|", "\\|")
        rows.append(f"| `{_module_name(p)}` | {text} |")
    return rows


def generated() -> str:
    return "\n".join(
        [
            START,
            "",
            "## The layers",
            "",
            "The contracts `lint-imports` checks (`pyproject.toml`, `[tool.importlinter]`); a module may",
            "import any layer below its own, never one above, and imports inside functions count.",
            "",
            *layer_lines(),
            "",
            "## One line a module",
            "",
            *module_lines(),
            "",
            END,
        ]
    )


def page_with_generated(page: str) -> str:
    head, _, rest = page.partition(START)
    _, _, tail = rest.partition(END)
    return head + generated() + tail


def test_the_architecture_page_is_generated_from_its_sources():
    page = DOC.read_text(encoding="utf-8")
    assert START in page and END in page, f"{DOC.name} lacks its generated part's markers"
    assert page == page_with_generated(page), (
        f"{DOC.name} drifted from pyproject.toml or a module's docstring: "
        "run python tests/test_architecture_doc.py"
    )


def test_every_module_says_what_it_holds():
    bare = [_module_name(p) for f in FOLDERS for p in (ROOT / f).rglob("*.py") if not first_paragraph(p)]
    assert not bare, f"modules without a docstring: {bare}"


if __name__ == "__main__":
    DOC.write_text(page_with_generated(DOC.read_text(encoding="utf-8")), encoding="utf-8")
    sys.exit(0)
