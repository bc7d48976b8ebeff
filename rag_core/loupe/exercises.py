"""Exercises behind the door: the sheets, the figures each reveals, grading and the class's counts,
and the engine a live figure reads (the Loupe's shared answers on the stack in use)."""

from __future__ import annotations

import dataclasses

from rag_core import stacks
from rag_core.config import AnswerSettings
from rag_core.exercises.figures import CHOICE, FIGURES, NUMBER, Reveal, passage_options
from rag_core.exercises.grading import OUTCOMES, ClassTally, grade
from rag_core.exercises.sheets import REASON, Exercise, load_exercises
from rag_core.loupe.answers import Loupe
from rag_core.pipeline import Pipeline
from rag_core.trace import Trace

__all__ = [
    "CHOICE",
    "FIGURES",
    "NUMBER",
    "OUTCOMES",
    "REASON",
    "ClassTally",
    "Exercise",
    "LoupeEngine",
    "Reveal",
    "grade",
    "load_exercises",
    "options",
    "passage_options",
    "reveal",
]


class LoupeEngine:
    """A live figure's engine: questions answered by the Loupe under `settings` (the session's),
    on the index an exercise names or the settings' own (with the stuffed reading's answers, or its
    whole reading, when asked); every session asking the same shares one computation."""

    def __init__(self, loupe: Loupe, stack: stacks.Stack, settings: AnswerSettings) -> None:
        self.loupe, self.stack, self.settings = loupe, stack, settings

    def _settings(self, index: str | None) -> AnswerSettings:
        return dataclasses.replace(self.settings, index=index or self.settings.index)

    def trace(
        self, question: str, index: str | None = None, stuffed: bool = False, worth: bool = False
    ) -> Trace:
        result = self.loupe.answer(self.stack, question, self._settings(index))
        if worth:
            return result.with_stuffed()  # the stuffed reading with its leave-one-out
        return result.stuffed_answers() if stuffed else result.trace

    def pipeline(self, index: str | None = None) -> Pipeline:
        return self.loupe.pipeline(self.stack, self._settings(index))


def options(ex: Exercise, engine: LoupeEngine | None) -> tuple[str, ...]:
    """A choice exercise's options, shown before the reveal."""
    fig = FIGURES[ex.figure]
    return fig.options(engine, ex.params) if fig.options else ()


def reveal(ex: Exercise, engine: LoupeEngine | None) -> Reveal:
    """The engine's figure for `ex` (raises the door's user errors, e.g. a question too long)."""
    return FIGURES[ex.figure].compute(engine, ex.params)
