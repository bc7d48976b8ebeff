"""What Replay reads from another system's trace, whatever format it came in, and what it could not.

>>> t = LoggedTrace("t1", "Who?", [LoggedDocument("d1", "A", "x")], "Ann", source="line 1")
>>> t.documents[0].id, t.has_prompt
('d1', False)
"""

from __future__ import annotations

from dataclasses import dataclass, field


class ReplayFileError(ValueError):
    """A trace file that cannot be read at all; the message names the file and what is wrong."""


@dataclass(frozen=True)
class LoggedDocument:
    """One retrieved document as the trace logged it: its score is the other system's own (any
    scale), kept for display; Replay never turns it into a probability."""

    id: str
    title: str
    text: str
    score: float | None = None


def unique_ids(documents: list[LoggedDocument]) -> list[LoggedDocument]:
    """The documents with every id made unique (a repeat gains "#2", "#3"): findings are keyed by id.

    >>> [d.id for d in unique_ids([LoggedDocument("a", "", "x"), LoggedDocument("a", "", "y")])]
    ['a', 'a#2']
    """
    seen: dict[str, int] = {}
    out = []
    for d in documents:
        seen[d.id] = seen.get(d.id, 0) + 1
        out.append(d if seen[d.id] == 1 else LoggedDocument(f"{d.id}#{seen[d.id]}", d.title, d.text, d.score))
    return out


@dataclass
class LoggedTrace:
    """One answered question of another system: the documents it retrieved (in its order), the
    answer it logged, and, where the trace carries it, the prompt its model read (plain text, or chat
    messages (role, content))."""

    trace_id: str
    question: str
    documents: list[LoggedDocument]
    answer: str
    prompt: str | None = None
    messages: list[tuple[str, str]] | None = None
    model: str | None = None
    expected: list[str] | None = None
    source: str = ""  # where in the file: "line 3", "trace 5b1f…"

    @property
    def has_prompt(self) -> bool:
        return bool(self.prompt) or bool(self.messages)


@dataclass(frozen=True)
class Skipped:
    """A trace (or a line, or a file) that cannot be replayed, and why, in one sentence."""

    trace_id: str
    source: str
    reason: str

    def message(self) -> str:
        return f"{self.source}: {self.reason}"


@dataclass
class Imported:
    """Every trace of a file or folder: those that can be replayed and those that cannot."""

    traces: list[LoggedTrace] = field(default_factory=list)
    skipped: list[Skipped] = field(default_factory=list)

    def extend(self, other: Imported) -> None:
        self.traces += other.traces
        self.skipped += other.skipped
