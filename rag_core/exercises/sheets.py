"""Exercise sheets: TOML files of exercises a teacher can add to (assets/exercises/*.toml), each
checked on load; a bad exercise is left out with one message that says which file, which exercise
and what to change, and the others load.

An exercise names the page that shows its figure, asks for a number, a choice or a reason, and
names the figure the engine computes to reveal it (`figures.FIGURES`) with that figure's parameters.

>>> text = '''
... [[exercise]]
... id = "softmax"
... page = "By hand"
... title = "A softmax over three passages"
... prompt = "What prior does d1 get?"
... ask = "number"
... tolerance = 0.03
... figure = "toy_prior"
... toy = "softmax"
... passage = 1
... explain = "The prior is a softmax of the inner products."
... '''
>>> loaded = parse_sheet(text, "demo.toml")
>>> [e.id for e in loaded.exercises], loaded.problems
(['softmax'], [])
>>> parse_sheet(text.replace('"toy_prior"', '"toy_priors"'), "demo.toml").problems[0][:72]
"demo.toml, exercise 1 ('softmax'): unknown figure 'toy_priors' (known: a"
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path

import tomllib

from rag_core.config import ASSETS
from rag_core.exercises.figures import CHOICE, FIGURES, NUMBER

EXERCISES = ASSETS / "exercises"
OWN_FOLDER = "RAG_LOUPE_EXERCISES"  # a teacher's own sheets, read after the shipped ones
REASON = "reason"
ASKS = (NUMBER, CHOICE, REASON)
# The pages an exercise can send a student to (the app's page titles).
PAGES = ("Ask", "Map", "Token vs Sequence", "Citations", "Index swap", "By hand", "Train", "Eval")
FIELDS = {"id": str, "page": str, "title": str, "prompt": str, "ask": str, "figure": str, "explain": str}
OPTIONAL = {"tolerance": float, "setup": str}


@dataclass(frozen=True)
class Exercise:
    id: str
    page: str
    title: str
    prompt: str  # what the student works out before the reveal
    ask: str  # NUMBER, CHOICE or REASON
    figure: str  # a key of figures.FIGURES
    explain: str  # why the figure comes out as it does, shown with it
    params: dict = field(default_factory=dict, hash=False)  # the figure's parameters
    tolerance: float | None = None  # NUMBER: an answer this close to the figure counts as right
    setup: str = ""  # what the student is told first
    sheet: str = ""  # the file it came from

    @property
    def live(self) -> bool:
        """Whether revealing it needs the model stack (a toy needs none)."""
        return FIGURES[self.figure].live


@dataclass
class Loaded:
    exercises: list[Exercise]
    problems: list[str]  # one line per exercise or file left out


class ExerciseError(ValueError):
    """One exercise that cannot be used; the message says what to change."""


def _typed(raw: dict, name: str, kind: type, required: bool):
    if name not in raw:
        if required:
            raise ExerciseError(f"it needs {name!r}")
        return None
    value = raw[name]
    if kind is float and isinstance(value, int) and not isinstance(value, bool):
        value = float(value)
    if not isinstance(value, kind) or isinstance(value, bool):
        raise ExerciseError(f"{name!r} must be a {kind.__name__}, not {value!r}")
    if isinstance(value, str) and not value.strip():
        raise ExerciseError(f"{name!r} is empty")
    return value


def exercise(raw: dict, sheet: str) -> Exercise:
    """One exercise from its table, checked; raises ExerciseError."""
    if not isinstance(raw, dict):
        raise ExerciseError("each [[exercise]] must be a table of keys")
    main = {n: _typed(raw, n, k, True) for n, k in FIELDS.items()}
    extra = {n: _typed(raw, n, k, False) for n, k in OPTIONAL.items()}
    if main["figure"] not in FIGURES:
        raise ExerciseError(f"unknown figure {main['figure']!r} (known: {', '.join(sorted(FIGURES))})")
    fig = FIGURES[main["figure"]]
    params = {n: _typed(raw, n, k, True) for n, k in fig.params.items()}
    params |= {n: v for n, k in fig.optional.items() if (v := _typed(raw, n, k, False)) is not None}
    unknown = sorted(set(raw) - set(FIELDS) - set(OPTIONAL) - set(params))
    if unknown:
        raise ExerciseError(f"unknown keys {unknown} for the figure {main['figure']!r}")
    if main["ask"] not in ASKS:
        raise ExerciseError(f"'ask' must be one of {', '.join(ASKS)}, not {main['ask']!r}")
    if main["ask"] != REASON and main["ask"] != fig.kind:
        kind = fig.kind
        raise ExerciseError(f"the figure {main['figure']!r} is a {kind}: ask for a {kind} or a reason")
    if main["page"] not in PAGES:
        raise ExerciseError(f"unknown page {main['page']!r} (pages: {', '.join(PAGES)})")
    tolerance = extra["tolerance"]
    if main["ask"] == NUMBER and not (tolerance is not None and 0 < tolerance < 1):
        raise ExerciseError("a number exercise needs a 'tolerance' between 0 and 1 (how close is right)")
    if "passage" in params and params["passage"] < 1:
        raise ExerciseError("'passage' counts from 1 (the first retrieved)")
    return Exercise(**main, params=params, tolerance=tolerance, setup=extra["setup"] or "", sheet=sheet)


def parse_sheet(text: str, name: str) -> Loaded:
    """The exercises of one sheet's text; `name` says where they came from in each problem."""
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as e:
        return Loaded([], [f"{name}: not valid TOML ({e}); none of its exercises were loaded"])
    tables = data.get("exercise")
    if not isinstance(tables, list) or not tables:
        return Loaded([], [f"{name}: no [[exercise]] tables"])
    loaded = Loaded([], [])
    for n, raw in enumerate(tables, 1):
        label = raw.get("id") if isinstance(raw, dict) else None
        try:
            loaded.exercises.append(exercise(raw, name))
        except ExerciseError as e:
            loaded.problems.append(f"{name}, exercise {n}" + (f" ({label!r})" if label else "") + f": {e}")
    return loaded


def sheet_files() -> list[Path]:
    """The shipped sheets, then those of the folder $RAG_LOUPE_EXERCISES names (a teacher's own),
    each folder in file-name order."""
    folders = [EXERCISES] + ([Path(os.environ[OWN_FOLDER])] if os.environ.get(OWN_FOLDER) else [])
    return [path for folder in folders for path in sorted(folder.glob("*.toml"))]


def load_exercises(paths: list[Path] | None = None) -> Loaded:
    """Every sheet of `paths` (by default `sheet_files()`), in order; an id seen before is left out
    with a message."""
    out = Loaded([], [])
    own = os.environ.get(OWN_FOLDER)
    if paths is None and own and not Path(own).is_dir():
        out.problems.append(f"{OWN_FOLDER} names {own!r}, which is not a folder: only the shipped sheets")
    seen: set[str] = set()
    for path in sheet_files() if paths is None else paths:
        try:
            text = path.read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError) as e:
            out.problems.append(f"{path.name}: cannot be read ({e})")
            continue
        sheet = parse_sheet(text, path.name)
        out.problems += sheet.problems
        for ex in sheet.exercises:
            if ex.id in seen:
                out.problems.append(f"{path.name}: the id {ex.id!r} is used twice; the second is left out")
                continue
            seen.add(ex.id)
            out.exercises.append(ex)
    return out
