"""Held-out figures before and after training: EM, answer-recall@1/@K, and the collapse monitor.

Retrieval collapse (the paper names it as a failure of joint training): the retriever learns to
return the same few passages whatever the question, and the generator learns to ignore them. It
shows as fewer distinct passages over a question set and a lower entropy of how often each is
retrieved. EM and recall follow `analysis.matching`, as `eval` counts them.

>>> distinct, bits = collapse_monitor([["a", "b"], ["a", "c"]])
>>> distinct, round(bits, 3)   # a twice, b and c once: H = 1.5 bits
(3, 1.5)
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Sequence
from dataclasses import asdict, dataclass

from rag_core.analysis.evaluation.questions import EvalQuestion
from rag_core.analysis.matching import contains_answer, exact_match, passage_text
from rag_core.config import DECODINGS, Progress
from rag_core.pipeline import Pipeline


def collapse_monitor(retrieved: Sequence[Sequence[str]]) -> tuple[int, float]:
    """Distinct passages over all questions' top K, and the entropy (bits) of their frequencies."""
    counts = Counter(pid for ids in retrieved for pid in ids)
    total = sum(counts.values())
    entropy = -sum(c / total * math.log2(c / total) for c in counts.values()) if total else 0.0
    return len(counts), entropy + 0.0  # + 0.0: one passage gives -0.0, shown as 0.0


@dataclass
class HeldOut:
    n: int  # questions
    k: int
    em: dict[str, float]  # decoding ("rag-token", "rag-sequence") -> exact match, a fraction
    recall_at_1: float  # the top passage contains a gold answer
    recall_at_k: float  # one of the K passages does
    distinct: int  # distinct passages over all top K (at most n · k)
    entropy_bits: float  # of their frequencies (at most log2(n · k))

    def to_dict(self) -> dict:
        return asdict(self)


def evaluate(pipe: Pipeline, questions: Sequence[EvalQuestion], progress: Progress | None = None) -> HeldOut:
    """Both decodings on every question through the one pipeline path (`Pipeline.run`), under the
    pipeline's own settings."""
    settings = pipe.settings.with_(decode="both")
    em = {d: 0 for d in DECODINGS}
    at1 = atk = 0
    retrieved = []
    for i, q in enumerate(questions):
        trace = pipe.run(q.question, settings)
        for d in DECODINGS:
            c = trace.answer(d)
            em[d] += bool(c is not None and exact_match(c.answer, q.answers))
        hits = [contains_answer(passage_text(h.passage), q.answers) for h in trace.hits]
        at1 += bool(hits[:1] and hits[0])
        atk += any(hits)
        retrieved.append([h.passage.id for h in trace.hits])
        if progress:
            progress(f"held-out question {i + 1}/{len(questions)}", (i + 1) / len(questions))
    n = max(1, len(questions))
    distinct, bits = collapse_monitor(retrieved)
    return HeldOut(
        len(questions), settings.k, {d: em[d] / n for d in DECODINGS}, at1 / n, atk / n, distinct, bits
    )


def comparison_rows(heldout: dict) -> list[tuple[str, float | int, float | int | None]]:
    """A manifest's held-out figures as (figure, before, after) rows, the same for the command
    line and the Train page; `after` is None for a run stopped before its second measurement."""
    before, after = heldout["before"], heldout.get("after") or {}
    rows = [(f"EM {d}", before["em"][d], (after.get("em") or {}).get(d)) for d in DECODINGS]
    return rows + [
        ("answer-recall@1", before["recall_at_1"], after.get("recall_at_1")),
        (f"answer-recall@{before['k']}", before["recall_at_k"], after.get("recall_at_k")),
        ("distinct passages", before["distinct"], after.get("distinct")),
        ("passage entropy (bits)", before["entropy_bits"], after.get("entropy_bits")),
    ]
