"""One question's evaluation result under each mode: what a saved run and a checkpoint hold."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field


@dataclass
class ModeResult:
    answer: str
    em: bool
    contained: bool
    p_seq: float | None = None  # the answer's RAG-Sequence probability (RAG modes)
    p_tok: float | None = None  # its RAG-Token probability
    verdicts: list[str] = field(default_factory=list)  # diagnosis codes when the answer is wrong
    weights_share: float | None = None  # share of its content tokens that came from the model's weights
    # the low-confidence rule's codes (`confidence`): [] a confident answer, None not assessed
    # (closed-book, or a run made before the rule)
    low_confidence: list[str] | None = None
    # the stuffed reading (mode "stuffed"): p(y|x, all passages), the rank of the passage whose
    # removal costs its answer most (exact leave-one-out), and the rank the mixture's posterior
    # p(z|x,y) of the same answer cites
    p_stuffed: float | None = None
    top_passage: int | None = None
    mixture_top: int | None = None


@dataclass
class QuestionResult:
    question: str
    answers: list[str]
    title: str
    modes: dict[str, ModeResult]
    recall: bool  # a retrieved passage contains an answer
    answer_rank: int | None  # rank of the best passage containing an answer (searched deeper on a miss)
    seconds: float = 0.0
    answer_ranks: list[int] | None = (
        None  # ranks of every retrieved passage holding an answer (None: an older run)
    )

    def to_dict(self) -> dict:
        return asdict(self)

    @classmethod
    def from_dict(cls, d: dict) -> QuestionResult:
        modes = {m: ModeResult(**v) for m, v in d["modes"].items()}
        return cls(
            d["question"],
            d["answers"],
            d.get("title", ""),
            modes,
            d["recall"],
            d.get("answer_rank"),
            d.get("seconds", 0.0),
            d.get("answer_ranks"),
        )
