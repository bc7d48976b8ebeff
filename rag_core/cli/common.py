"""What every command shares: the user errors and their one line, one progress bar, and (from
`rag_core.flags`, where the app's command line reads them too) the parser that turns argparse
errors into the one error rule, the model, index and decoding flags and the settings they make.

>>> positive_int("3"), positive_float("2.5")
(3, 2.5)
"""

from __future__ import annotations

import os
import sys
from collections.abc import Iterator
from contextlib import contextmanager

from tqdm import tqdm

from rag_core.analysis.evaluation.questions import EvalDataError
from rag_core.config import Progress
from rag_core.corpus import CorpusError
from rag_core.errors import first_line
from rag_core.flags import (  # the commands' one import of the shared flags (pyproject: F401 here)
    INDEX_HELP,
    FlagError,
    Parser,
    add_batch_arg,
    add_decoding_args,
    add_index_args,
    add_model_args,
    decoding_fields,
    positive_float,
    positive_int,
    stack_from,
)
from rag_core.models.sources import ModelSourceError
from rag_core.pipeline import QuestionError
from rag_core.retrieval.index import IndexLoadError
from rag_core.toys.examples import ToyError


class CliError(FlagError):
    """A user error found by the command line itself."""


# Errors a user can cause: each exits 2 with one `error:` line (ValueError covers the settings' `validate`).
USER_ERRORS: tuple[type[BaseException], ...] = (
    CliError,
    FlagError,
    CorpusError,
    IndexLoadError,
    QuestionError,
    ModelSourceError,
    ToyError,
    EvalDataError,
    FileNotFoundError,
    IsADirectoryError,
    PermissionError,
    UnicodeDecodeError,
    ValueError,
)


def error_line(e: BaseException) -> str:
    """The one line a user error prints."""
    text = first_line(e)
    return f"error: {text}"


@contextmanager
def progress_bar() -> Iterator[Progress]:
    """A bar on stderr driven by (message, fraction) reports. Shown on a terminal; RAG_LOUPE_PROGRESS=1
    shows it anywhere (a log file), RAG_LOUPE_PROGRESS=0 hides it everywhere."""
    wanted = os.environ.get("RAG_LOUPE_PROGRESS")
    shown = wanted == "1" or (wanted != "0" and sys.stderr.isatty())
    bar = tqdm(
        total=1000,
        file=sys.stderr,
        leave=False,
        mininterval=1.0,
        disable=not shown,
        bar_format="{desc} {percentage:3.0f}%|{bar}| {elapsed}",
    )

    def update(message: str, fraction: float) -> None:
        bar.set_description_str(message[:70])
        bar.n = int(1000 * max(0.0, min(1.0, fraction)))
        bar.refresh()

    try:
        yield update
    finally:
        bar.close()
