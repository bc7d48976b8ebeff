"""One query end to end: retrieve -> prepare the K prompts once -> decode both ways -> trace.

The CLI and the app are two thin faces of this module. Models load once (`load_models`); an index
can be swapped under them with no reload (`Pipeline.with_index`).
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Callable
from dataclasses import dataclass, field

import torch

from rag_core.config import ANSWER_SETTINGS, MAX_QUESTION_CHARS, STUFFED, AnswerSettings, StackSpec
from rag_core.corpus import read_corpus_file
from rag_core.decoding.answering import PreparedRun, Query, decode_queries, stuffed_reading
from rag_core.decoding.decode import DecodeJob, SearchSettings, decode_jobs, score_answers
from rag_core.decoding.stuffed import OrderReading, order_sensitivity
from rag_core.generators import Generator, load_generator
from rag_core.generators.base import question_end
from rag_core.models.sources import offline_unless_allowed, pick_device, set_threads
from rag_core.models.turns import TurnLock
from rag_core.retrieval.catalog import build_corpus_index, corpus_cache_folder, resolve_index
from rag_core.retrieval.encoders import Encoder, load_encoder
from rag_core.retrieval.index import IndexLoadError, PassageIndex
from rag_core.retrieval.retriever import Retriever
from rag_core.storage import caches
from rag_core.trace import Hit, Trace

# Questions decoded as one batch by eval and the index swap, by device. On 2 CPU cores a batch
# measured no faster than one question at a time (`bench --only batch`, docs/results.md: 0.99x for
# 2, 0.83x for 4, 0.86x for 8): the prompt pass is compute-bound (57% of a question's time), so a
# batch saves only the weight reads and pays for padding rows to the longest prompt. On a GPU the
# batch keeps the device busy (`bench/gpu_paper_stack.py`).
CPU_BATCH = 1
GPU_BATCH = 32


class QuestionError(ValueError):
    """A question a user typed cannot be answered as given; the message says why."""


def clean_question(question: str) -> tuple[str, list[str]]:
    """Strip control characters and collapse spaces; cut very long questions to their end (a pasted
    paragraph ends with its question). Returns notices.

    >>> clean_question("  Who\\x00 wrote\\n Moby-Dick? ")
    ('Who wrote Moby-Dick?', [])
    """
    if not isinstance(question, str):
        raise QuestionError("the question must be text")
    text = re.sub(
        r"\s+", " ", "".join(ch if ch.isprintable() or ch.isspace() else " " for ch in question)
    ).strip()
    if not text:
        raise QuestionError("the question is empty: type a question")
    notices = []
    if len(text) > MAX_QUESTION_CHARS:
        kept = question_end(text)
        notices.append(cut_notice(text, kept))
        text = kept
    return text, notices


QUOTED = 40  # characters of a cut question quoted on each side of the cut


def cut_notice(text: str, kept: str) -> str:
    """What cutting `text` to its end `kept` kept and what it left out, quoted, so the reader sees
    where the cut fell.

    >>> print(cut_notice("Some context. Who wrote it?", "Who wrote it?").replace("; ", ";\\n"))
    the question was 27 characters long;
    only the last 13 were used, from “Who wrote it?…”;
    the first 14, ending “…Some context.”, were left out
    """
    left = text[: len(text) - len(kept)].rstrip()
    return (
        f"the question was {len(text):,} characters long; only the last {len(kept):,} were used, from "
        f"“{kept[:QUOTED]}…”; the first {len(text) - len(kept):,}, ending “…{left[-QUOTED:]}”, were left out"
    )


def device_batch(device: torch.device) -> int:
    """How many questions a device decodes together by default: `GPU_BATCH` on CUDA, `CPU_BATCH`
    (one: `bench --only batch` measured batching no faster on a CPU) elsewhere."""
    return GPU_BATCH if device.type == "cuda" else CPU_BATCH


@dataclass
class Models:
    encoder: Encoder
    generator: Generator
    device: torch.device
    # One query at a time through the shared models: fast tokenizers are not safe to call from
    # several threads (app sessions) at once, and on a CPU two queries in parallel are no faster.
    # Taken in turns (`TurnLock`), so a background job's batches and the questions alternate.
    lock: TurnLock = field(default_factory=TurnLock)


def load_models(
    stack: StackSpec, progress: Callable[[str], None] | None = None, before_generator=None
) -> Models:
    """Encoder, then generator. `before_generator(encoder)` runs in between, so a bad index fails
    before the slower generator load."""
    offline_unless_allowed(stack.allow_downloads)
    set_threads(stack.threads)
    device = pick_device(stack.device)
    if progress:
        progress("Loading the retriever")
    encoder = load_encoder(stack.question_encoder, stack.ctx_encoder, device, stack.allow_downloads)
    if before_generator is not None:
        before_generator(encoder)
    if progress:
        progress("Loading the generator")
    generator = load_generator(stack.generator, device, stack.allow_downloads, progress)
    return Models(encoder, generator, device)


def open_index(
    index: str | None, encoder: Encoder, progress=None, corpus: str | None = None
) -> tuple[str, PassageIndex]:
    """The index asked for: a `corpus` file (the CLI's `--corpus`, built and cached, named by its
    path), else `index`: a name, a folder, or None for the default."""
    prog = progress or (lambda m, f: None)
    if corpus:
        parsed = read_corpus_file(corpus)
        folder = corpus_cache_folder(parsed.passages, encoder)
        try:
            return corpus, PassageIndex.load(folder, encoder_id=encoder.id, dim=encoder.dim)
        except IndexLoadError:
            built = build_corpus_index(parsed.passages, encoder, folder, progress=prog)
            caches.keep_newest("corpus-indexes", keep=folder)
            return corpus, built
    return resolve_index(index, encoder, prog)


# The trace records its scale apart (the one it used, after the encoder's default), so it is not
# restored here.
DECODE_SETTINGS = tuple(name for name in ANSWER_SETTINGS if name != "scale")


def trace_settings(base: AnswerSettings, trace: Trace) -> AnswerSettings:
    """The settings a trace was decoded with (its recorded settings over `base`), so a follow-up
    search (closed-book, a rerun) searches the same way: `base` itself when it holds them already
    (the door's pipeline of the trace's own settings), so no second one is built."""
    recorded = trace.settings.to_dict()
    changes = {name: recorded[name] for name in DECODE_SETTINGS if name in recorded}
    return base if all(getattr(base, k) == v for k, v in changes.items()) else base.with_(**changes)


@dataclass
class Pipeline:
    """Loaded models on one index, answering under `settings` unless a call gives its own.
    `stack`: what the models were loaded from (its batch size; the model ids an eval's checkpoint
    is keyed by)."""

    models: Models
    index_name: str
    index: PassageIndex
    settings: AnswerSettings = field(default_factory=AnswerSettings)
    stack: StackSpec = field(default_factory=StackSpec)

    @property
    def retriever(self) -> Retriever:
        return Retriever(self.models.encoder, self.index, self.index_name)

    def with_index(self, name: str, index: PassageIndex) -> Pipeline:
        return dataclasses.replace(self, index_name=name, index=index)

    def scale_for(self, settings: AnswerSettings) -> float:
        return float(settings.scale if settings.scale is not None else self.models.encoder.default_scale)

    def query_vector(self, question: str):
        """q(x) as a (1, D) row, through the shared encoder under the models' lock."""
        with self.models.lock:
            return self.retriever.query_vector(question)

    def retrieve(self, question: str, k: int, query_vector=None) -> list[Hit]:
        """The top k for the question, or for `query_vector` (1, D) when one is given (a query the
        user moved on the Map, or one a training step moved)."""
        with self.models.lock:
            return self.retriever.retrieve(question, k, query_vector=query_vector)

    def run(
        self, question: str, settings: AnswerSettings | None = None, keep_state: bool = False
    ) -> Trace | PreparedRun:
        """Retrieve, prepare the K prompts once, decode: the trace (with `keep_state`, the trace and
        the prepared prompts, so gold answers can be teacher-forced with no new prompt pass)."""
        run = self.run_settings(question, [settings or self.settings])[0]
        return run if keep_state else run.trace

    def run_settings(
        self, question: str, settings: list[AnswerSettings], query_vector=None
    ) -> list[PreparedRun]:
        """One question under several settings (K, scale, decoding) from one retrieval and one
        prompt pass for the largest K: a smaller K decodes from the first K rows of that state.
        `query_vector` (1, D): retrieve with it instead of q(question); the generator still reads
        the question.

        The one path every caller takes (Ask, diagnosis, eval, the index swap), under the models'
        lock: the shared generator serves one query at a time."""
        with self.models.lock:
            query = self.query(question, settings, query_vector)
            return decode_queries(self.models.generator, [query], self.scale_for, keep_state=True)[0]

    def query(self, question: str, settings: list[AnswerSettings], query_vector=None) -> Query:
        """The question cleaned and retrieved for the largest K of `settings`: what a batch decodes."""
        settings = [s.validate() for s in settings]
        question, notices = clean_question(question)
        hits = self.retrieve(question, max(s.k for s in settings), query_vector)
        if not hits:
            raise QuestionError("the index returned no passages")
        return Query(question, hits, self.index_name, settings, notices, self.models.encoder.id)

    def run_many(
        self, questions: list[str], settings: list[AnswerSettings], keep_state: bool = False
    ) -> list[list[PreparedRun]]:
        """Several questions, each under `settings`, decoded as one batch (`decode_queries`): the
        same runs as `run_settings` one question at a time, in fewer model calls."""
        with self.models.lock:
            queries = [self.query(q, settings) for q in questions]
            return decode_queries(self.models.generator, queries, self.scale_for, keep_state)

    def decode(self, queries: list[Query], keep_state: bool = False) -> list[list[PreparedRun]]:
        """Questions already cleaned and retrieved (`query`), decoded as one batch: per query, one
        run per setting. For a caller that looks at the passages before it decodes (the door reads
        an answer it has kept for the same passages instead)."""
        with self.models.lock:
            return decode_queries(self.models.generator, queries, self.scale_for, keep_state)

    def with_stuffed(self, trace: Trace, explain: bool = True) -> Trace:
        """The trace with its stuffed reading (`decoding/stuffed.py`) added, read from the same
        passages and searched with the settings the trace recorded: what the same question decoded
        with `decode="all"` gives, for a trace decoded without it (a page that shows the stuffed
        reading asks for it only when it is drawn). A trace that has one is returned as it is.
        `explain=False`: its answers alone, without what each passage is worth (what the
        low-confidence rule compares; the same answers, a third of the model's work)."""
        if trace.stuffed is not None:
            return trace
        settings = trace_settings(self.settings, trace)
        with self.models.lock:
            reading = stuffed_reading(
                self.models.generator,
                trace.question,
                trace.hits,
                settings,
                explain=explain,
                known=trace.candidates,
            )  # a marginal's candidate with the same answer already holds its rows under each passage
        return dataclasses.replace(trace, stuffed=reading)  # its settings stay the keys it is cached by

    def stuffed_orders(self, trace: Trace) -> list[OrderReading]:
        """The stuffed reading of a trace (`with_stuffed`) with its passages in other orders
        (`decoding.stuffed.order_sensitivity`); empty when it has no stuffed answer."""
        best = trace.answer(STUFFED)
        if best is None or not best.token_ids:
            return []
        settings = SearchSettings.of(trace_settings(self.settings, trace))
        passages = [h.passage for h in trace.hits]
        with self.models.lock:
            gen = self.models.generator
            return order_sensitivity(gen, trace.question, passages, best.token_ids, settings)

    def batch_size(self) -> int:
        """How many questions eval and the index swap decode together: the stack's
        `batch_questions`, or by device (`CPU_BATCH`, `GPU_BATCH`)."""
        if self.stack.batch_questions is not None:
            return self.stack.batch_questions
        return device_batch(self.models.device)

    def closed_book(self, question: str, settings: AnswerSettings | None = None) -> str:
        """The generator alone, with no passage: what it "knows" by itself, searched as the RAG
        answers are (same beams, length limit and penalty)."""
        return self.closed_book_many([question], settings)[0]

    def closed_book_many(self, questions: list[str], settings: AnswerSettings | None = None) -> list[str]:
        """`closed_book` of several questions through one prompt pass and one decode loop."""
        search = SearchSettings.of((settings or self.settings).validate(), top_alternatives=1)
        cleaned = [clean_question(q)[0] for q in questions]
        gen = self.models.generator
        with self.models.lock:
            state = gen.prepare_rows([(q, None) for q in cleaned])
            decoded = decode_jobs(
                gen, state, [DecodeJob([i], torch.zeros(1), search, "token") for i in range(len(cleaned))]
            )
        return [gen.decode(token[0].tokens) for token, _ in decoded]

    def closed_book_scores(self, question: str, answers: list[list[int]]) -> torch.Tensor:
        """Teacher-forced closed-book log p(y_i | x, y_<i) of each answer (token ids): the generator
        with no passage, the same prefixes, in one batched pass: (N, T), NaN past each answer's end.
        Set beside a trace's per-passage rows it says which tokens reading the passages raised.
        `question` as a trace records it (cleaned once, when it was answered)."""
        gen = self.models.generator
        with self.models.lock:
            lp, _, _, _ = score_answers(gen, gen.prepare(question, None), answers, 1)  # (N, 1, T)
        return lp[:, 0]  # (N, T)


def load_pipeline(
    stack: StackSpec | None = None,
    settings: AnswerSettings | None = None,
    progress=None,
    corpus: str | None = None,
) -> Pipeline:
    """The stack's models on `settings.index` (or on the `corpus` file, indexed), answering under
    `settings` (the defaults without them)."""
    stack, settings = (stack or StackSpec()).validate(), (settings or AnswerSettings()).validate()
    opened: dict = {}

    def open_first(encoder):
        opened["index"] = open_index(settings.index, encoder, progress, corpus)

    models = load_models(stack, (lambda m: progress(m, 0.0)) if progress else None, open_first)
    name, index = opened["index"]
    return Pipeline(models, name, index, settings, stack)
