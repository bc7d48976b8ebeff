"""Typed results of one query, and their export: dataclasses -> pandas -> the trace CSV.

The CSV is long: one row per (decoding, candidate, step, passage), with the columns docs/design.md §4.3
fixes. The same frame feeds the app's tables and downloads, so both faces export the same thing.
"""

from __future__ import annotations

import csv
import io
from dataclasses import dataclass, field

import numpy as np
import pandas as pd
import torch

from rag_core import marginals
from rag_core.config import ANSWER_SETTINGS, RAG_TOKEN, STUFFED, TraceSettings
from rag_core.corpus import Passage

COLUMNS = [
    "query",
    "index",
    "decoding",
    "candidate",
    "answer",
    "step",
    "token",
    "token_id",
    "doc_rank",
    "doc_id",
    "doc_title",
    "doc_score",
    "prior",
    "p_token_doc",
    "p_token_mix",
    "posterior_step",
    "posterior_prefix",
    "logp_prefix_doc",
    "finished",
    "forced",
]
# Schema 3 appends what makes an export stand alone: the whole answer's probability under both
# marginals, the passage text, the settings and models it was decoded with, and the schema version.
SETTING_COLUMNS = [
    "k",
    "scale",
    "decode",
    "beams",
    "length_penalty",
    "max_new_tokens",
    "early_stopping",
    "rescore",
    "encoder",
    "generator",
    "prompt_fingerprint",
]
SCHEMA_VERSION = 4  # docs/trace-schema.md: bumped whenever columns are appended
COLUMNS += ["p_seq", "p_tok", "doc_text", *SETTING_COLUMNS, "schema_version"]
COLUMNS += ["p_stuffed"]  # schema 4: the stuffed reading's rows carry their whole answer's probability
TEXT_COLUMNS = [
    "query",
    "index",
    "decoding",
    "answer",
    "token",
    "doc_id",
    "doc_title",
    "doc_text",
    "decode",
    "rescore",
    "encoder",
    "generator",
    "prompt_fingerprint",
]
FORMULA_STARTS = ("=", "+", "-", "@", "\t", "\r")


@dataclass
class Hit:
    """A retrieved passage: rank 1 is the highest score."""

    rank: int
    passage: Passage
    score: float  # raw retriever score s(z) = d(z)·q(x)


@dataclass
class Candidate:
    decoding: str  # "rag-token" or "rag-sequence"
    rank: int  # 0 = the chosen answer
    answer: str
    token_ids: list[int]
    tokens: list[str]
    token_logp: torch.Tensor  # (K, T) log p(y_i|x,z,y_<i); NaN = not scored (fast rescoring)
    alt_ids: torch.Tensor  # (K, T, A)
    alt_tokens: list[list[list[str]]]  # [K][T][A]
    alt_logp: torch.Tensor  # (K, T, A)
    finished: bool = True  # False: the length limit cut it (or forced its end token)
    sources: set[int] = field(default_factory=set)  # RAG-Sequence: passages (0-based) whose beam made it
    forced: list[bool] = field(default_factory=list)  # (T,) steps whose token the generation config forced
    search_score: float = float("nan")  # the search's own ranking score (Σ processed log p / T ** penalty)

    def __post_init__(self):
        if not self.forced:
            self.forced = [False] * len(self.token_ids)

    def log_p_seq(self, log_pz: torch.Tensor) -> float:
        return float(marginals.rag_sequence(log_pz, self.token_logp))

    def log_p_tok(self, log_pz: torch.Tensor) -> float:
        return float(marginals.rag_token(log_pz, self.token_logp))


def log_p_under(answer, decoding: str, log_pz: torch.Tensor) -> float:
    """log p(y|x) of `answer` (a Candidate, or any scores with log_p_tok and log_p_seq) under the
    marginal of `decoding`, for the prior `log_pz` (K,): the one place a decoding picks its marginal.
    The stuffed reading has none: its one row reads every passage, log p(y|x, z_1..z_K)."""
    if decoding == STUFFED:
        return float(answer.token_logp[0].double().sum())
    return answer.log_p_tok(log_pz) if decoding == RAG_TOKEN else answer.log_p_seq(log_pz)


@dataclass
class StuffedReading:
    """The K passages read together in one prompt, in rank order (`decoding/stuffed.py`): its
    answers, best first (Candidates of decoding "stuffed" whose tables have one row, (1, T)), and
    what each passage is worth to the chosen one: log p(y_i | x, every passage but z, y_<i); and
    the chosen answer read under each passage alone, log p(y_i | x, z, y_<i), from which the
    mixture's posterior p(z|x,y) of the same answer follows (`marginals.citation`)."""

    candidates: list[Candidate]
    leave_one_out: torch.Tensor | None = None  # (K, T) for the chosen answer; None: not computed
    alone: torch.Tensor | None = None  # (K, T) the chosen answer under each passage alone


@dataclass
class Trace:
    question: str  # as answered: cut and cleaned (the CSV's `query` column)
    index: str
    hits: list[Hit]
    log_prior: torch.Tensor  # (K,) log p(z|x)
    scale: float
    candidates: list[Candidate]
    settings: TraceSettings = field(default_factory=TraceSettings)
    closed_book: str | None = None
    model_calls: int = 0  # generator forward passes spent on this trace
    stuffed: StuffedReading | None = None  # the third reading, when it was asked for

    @property
    def k(self) -> int:
        return len(self.hits)

    @property
    def prior(self) -> np.ndarray:
        return self.log_prior.exp().numpy()

    def answer(self, decoding: str) -> Candidate | None:
        return next((c for c in self.of(decoding) if c.rank == 0), None)

    def of(self, decoding: str) -> list[Candidate]:
        """The candidates of one decoding, best first (the stuffed reading's live apart from the
        two marginals', whose tables have one row per passage)."""
        if decoding == STUFFED:
            return list(self.stuffed.candidates) if self.stuffed is not None else []
        return [c for c in self.candidates if c.decoding == decoding]

    def to_frame(self) -> pd.DataFrame:
        return trace_frame(self)

    def to_csv(self, path_or_buf=None) -> str | None:
        return write_csv(self.to_frame(), path_or_buf)


def answer_settings_of(trace: Trace) -> dict:
    """The settings the trace's answers depend on (config.ANSWER_SETTINGS), as recorded with it:
    K is its number of passages, the scale the one it used (rounded: a cache key, not a number shown)."""
    recorded = {name: getattr(trace.settings, name, None) for name in ANSWER_SETTINGS}
    return recorded | {"k": trace.k, "scale": round(float(trace.scale), 6)}


def settings_row(trace: Trace) -> dict:
    """The settings and models a trace was decoded with, as its export's SETTING_COLUMNS write them
    (None where the trace did not record one, e.g. a toy's beams)."""
    recorded = {name: getattr(trace.settings, name, None) for name in SETTING_COLUMNS}
    return recorded | {
        "k": trace.k,
        "scale": float(trace.scale),
        "prompt_fingerprint": trace.settings.prompt,
    }


def _numbers(trace: Trace, c: Candidate) -> dict:
    """A candidate's per-passage tables for its rows. The two marginals: its (K, T) log-probs and
    what the prior makes of them. The stuffed reading: its one row's p(y_i|x, all passages) as the
    step's `p_token_mix`, and its leave-one-out, log p(y_i|x, all passages but z), where a marginal
    has log p(y_i|x,z) (the chosen answer only; NaN for the others); no posterior."""
    lpz = trace.log_prior.double()  # (K,)
    none = torch.full((trace.k, len(c.token_ids)), float("nan"), dtype=torch.float64)  # (K, T)
    if c.decoding == STUFFED:
        loo = trace.stuffed.leave_one_out
        lp = loo.double() if c.rank == 0 and loo is not None else none  # (K, T)
        own = c.token_logp[0].double()  # (T,)
        return dict(
            lp=lp, mix=own.exp(), resp=none, post=none, p_seq=None, p_tok=None, p_stuffed=own.sum().exp()
        )
    lp = c.token_logp.double()  # (K, T)
    return dict(
        lp=lp,
        mix=marginals.token_mixture(lpz, lp).exp(),  # (T,)
        resp=marginals.responsibilities(lpz, lp),  # (K, T)
        post=marginals.prefix_posteriors(lpz, lp),  # (K, T)
        p_seq=marginals.rag_sequence(lpz, lp).exp(),
        p_tok=marginals.rag_token(lpz, lp).exp(),
        p_stuffed=None,
    )


def trace_frame(trace: Trace) -> pd.DataFrame:
    """The long table, vectorised per candidate: (K, T) arrays flattened step-major; the two
    marginals' candidates, then the stuffed reading's."""
    settings = settings_row(trace)
    prior = trace.log_prior.double().exp().numpy()  # (K,)
    k = trace.k
    frames = []
    for c in [*trace.candidates, *trace.of(STUFFED)]:
        t = len(c.token_ids)
        if t == 0:
            continue
        n = _numbers(trace, c)
        steps = np.repeat(np.arange(t), k)  # (T*K,)
        docs = np.tile(np.arange(k), t)  # (T*K,)
        frames.append(
            pd.DataFrame(
                {
                    "query": trace.question,
                    "index": trace.index,
                    "decoding": c.decoding,
                    "candidate": c.rank,
                    "answer": c.answer,
                    "step": steps,
                    "token": [c.tokens[s] for s in steps],
                    "token_id": [c.token_ids[s] for s in steps],
                    "doc_rank": docs + 1,
                    "doc_id": [trace.hits[d].passage.id for d in docs],
                    "doc_title": [trace.hits[d].passage.title for d in docs],
                    "doc_score": [trace.hits[d].score for d in docs],
                    "prior": prior[docs],
                    "p_token_doc": n["lp"].exp().numpy().T.reshape(-1),  # NaN stays NaN
                    "p_token_mix": n["mix"].numpy()[steps],
                    "posterior_step": n["resp"].numpy().T.reshape(-1),
                    "posterior_prefix": n["post"].numpy().T.reshape(-1),
                    "logp_prefix_doc": torch.cumsum(n["lp"], dim=-1).numpy().T.reshape(-1),
                    "finished": c.finished,
                    "forced": [bool(c.forced[s]) for s in steps],
                    **{p: np.nan if n[p] is None else float(n[p]) for p in ("p_seq", "p_tok", "p_stuffed")},
                    "doc_text": [trace.hits[d].passage.text for d in docs],
                    **settings,
                    "schema_version": SCHEMA_VERSION,
                }
            )
        )
    if not frames:
        return pd.DataFrame(columns=COLUMNS)
    return pd.concat(frames, ignore_index=True)[COLUMNS]


def neutralise(value):
    """Prefix a text cell that a spreadsheet would run as a formula with a quote.

    >>> neutralise("=HYPERLINK(1)"), neutralise("Paris")
    ("'=HYPERLINK(1)", 'Paris')
    """
    if isinstance(value, str) and value.startswith(FORMULA_STARTS):
        return "'" + value
    return value


def spreadsheet_safe(frame: pd.DataFrame) -> pd.DataFrame:
    out = frame.copy()
    for col in TEXT_COLUMNS:
        if col in out:
            out[col] = out[col].map(neutralise)
    return out


def write_csv(frame: pd.DataFrame, path_or_buf=None) -> str | None:
    """Spreadsheet-safe CSV. Every text cell is quoted: tokens can be a lone carriage return, which
    minimal quoting would leave bare and which readers take as a line break."""
    safe = spreadsheet_safe(frame)
    if path_or_buf is None:
        buf = io.StringIO()
        safe.to_csv(buf, index=False, quoting=csv.QUOTE_NONNUMERIC)
        return buf.getvalue()
    safe.to_csv(path_or_buf, index=False, quoting=csv.QUOTE_NONNUMERIC)
    return None


# ------------------------------------------------------------------ a trace as plain JSON data
def trace_to_dict(trace: Trace) -> dict:
    """Everything in a trace as JSON-able data (NaN and -inf kept as JSON's NaN / -Infinity), so a
    stored trace is read back with `json`, never unpickled.

    >>> t = Trace("q", "toy", [Hit(1, Passage("z1", "T", "text"), 0.5)],
    ...           torch.zeros(1, dtype=torch.float64), 1.0, [])
    >>> trace_from_dict(trace_to_dict(t)).hits[0].passage.title
    'T'
    """

    def cand(c: Candidate) -> dict:
        return {
            "decoding": c.decoding,
            "rank": c.rank,
            "answer": c.answer,
            "token_ids": list(c.token_ids),
            "tokens": list(c.tokens),
            "token_logp": c.token_logp.tolist(),
            "alt_ids": c.alt_ids.tolist(),
            "alt_tokens": c.alt_tokens,
            "alt_logp": c.alt_logp.tolist(),
            "finished": c.finished,
            "sources": sorted(c.sources),
            "forced": list(c.forced),
            "search_score": c.search_score,
            "shape": list(c.alt_ids.shape),
            "dtype": str(c.token_logp.dtype).removeprefix("torch."),
        }

    return {
        "query": trace.question,
        "index": trace.index,
        "scale": trace.scale,
        "settings": trace.settings.to_dict(),
        "closed_book": trace.closed_book,
        "model_calls": trace.model_calls,
        "hits": [{"rank": h.rank, "score": h.score, "passage": h.passage.to_dict()} for h in trace.hits],
        "log_prior": trace.log_prior.tolist(),
        "candidates": [cand(c) for c in trace.candidates],
        "stuffed": None
        if trace.stuffed is None
        else {
            "candidates": [cand(c) for c in trace.stuffed.candidates],
            **{
                name: None if getattr(trace.stuffed, name) is None else getattr(trace.stuffed, name).tolist()
                for name in ("leave_one_out", "alone")
            },
        },
    }


def trace_from_dict(d: dict) -> Trace:
    def cand(c: dict) -> Candidate:
        shape = c["shape"]  # (K, T, A): kept so an empty answer (T = 0) reads back with its shape
        dtype = {"float64": torch.float64}.get(c.get("dtype"), torch.float32)  # toys keep exact float64
        return Candidate(
            c["decoding"],
            c["rank"],
            c["answer"],
            c["token_ids"],
            c["tokens"],
            torch.tensor(c["token_logp"], dtype=dtype).reshape(shape[:2]),
            torch.tensor(c["alt_ids"], dtype=torch.long).reshape(shape),
            c["alt_tokens"],
            torch.tensor(c["alt_logp"], dtype=dtype).reshape(shape),
            c["finished"],
            set(c["sources"]),
            list(c.get("forced") or []),
            float(c.get("search_score", float("nan"))),
        )

    hits = [Hit(h["rank"], Passage(**h["passage"]), h["score"]) for h in d["hits"]]
    stuffed = d.get("stuffed")  # absent from traces stored before the stuffed reading
    if stuffed is not None:
        answers = [cand(c) for c in stuffed["candidates"]]
        dtype = answers[0].token_logp.dtype if answers else torch.float32  # as its answer's table
        tables = {  # "alone" is absent from traces stored before it was kept
            name: None if stuffed.get(name) is None else torch.tensor(stuffed[name], dtype=dtype)
            for name in ("leave_one_out", "alone")
        }
        stuffed = StuffedReading(answers, **tables)
    return Trace(
        d["query"],
        d["index"],
        hits,
        torch.tensor(d["log_prior"], dtype=torch.float64),
        d["scale"],
        [cand(c) for c in d["candidates"]],
        TraceSettings.from_dict(d["settings"]),
        d["closed_book"],
        d["model_calls"],
        stuffed,
    )
