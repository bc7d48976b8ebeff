"""The answer path behind the door: one question under one stack and AnswerSettings, computed once
per server, and a Result that computes what the pages read from an answer lazily, once.

Every session of a server shares the Loupe, so the second session to ask a question another has
asked (or is asking) gets the same trace without a model call. With an AnswerStore, answers are also
kept on disk: the same question asked after a restart, or of another server on the same cache, over
the same passages under the same settings, is read back instead of decoded again (the stuffed
reading and the closed-book rows likewise). A Result is cached with its trace:
the stuffed reading, the closed-book rows, the confidence, the token sources, the sentence
attributions, the other passage orders and the exports are each computed the first time a page
reads them, and kept by the Result. Nothing here holds a stack's models: a Result asks the holder
for them when it computes, so swapping the held stack frees the old one's memory.
"""

from __future__ import annotations

import dataclasses
import json
import threading
from collections.abc import Callable

import torch

from rag_core import stacks
from rag_core.analysis.attribution import sentences, token_sources
from rag_core.analysis.diagnosis import confidence as certainty
from rag_core.config import DECODINGS, STUFFED, AnswerSettings
from rag_core.corpus import CorpusError
from rag_core.decoding.answering import Query
from rag_core.exercises.grading import ClassTally
from rag_core.exports import frame_bytes
from rag_core.loupe.answer_queue import AnswerQueue, Ticket, answered
from rag_core.loupe.answer_store import AnswerStore
from rag_core.loupe.memo import Memo
from rag_core.loupe.stack_holder import StackHolder
from rag_core.models.sources import ModelSourceError
from rag_core.otlp import trace_otlp
from rag_core.pipeline import Models, Pipeline, QuestionError, device_batch, open_index, trace_settings
from rag_core.retrieval.catalog import available_indexes, default_index_name, resolve_index
from rag_core.retrieval.index import IndexLoadError, PassageIndex
from rag_core.trace import Candidate, Trace, trace_from_dict, trace_to_dict

# What a user can cause (a question, an index, a model folder, a setting): one message, never a trace.
USER_ERRORS = (QuestionError, IndexLoadError, CorpusError, ModelSourceError, ValueError)
EXPORT_FORMATS = ("csv", "parquet", "jsonl", "otlp")


def trace_key(trace: Trace) -> tuple:
    """What a trace's numbers depend on: its question, index, passages with their scores (a query
    moved on the Map retrieves the same passages with other scores) and recorded settings."""
    hits = tuple((h.passage.id, h.score) for h in trace.hits)
    settings = json.dumps(trace.settings.to_dict(), sort_keys=True, default=str)
    return trace.question, trace.index, hits, trace.scale, settings


def on_index(settings: AnswerSettings) -> AnswerSettings:
    """The settings with the index they search named: the default index when they name none (the
    settings themselves when they do, so a question's settings are built once, by its page)."""
    return settings if settings.index else dataclasses.replace(settings, index=default_index_name())


class Loupe:
    """The engine as the app sees it: the held stack, its indexes, and every answer asked of it.

    `corpus`: the command line's `--corpus FILE`, opened as an index named by its path.
    `batch_size`: how many waiting questions of one stack and settings are answered together; by
    default the held models' device decides (`Pipeline.batch_size`: one at a time on a CPU).
    `store`: where answers are kept on disk beyond this process (none: in memory only)."""

    def __init__(
        self,
        holder: StackHolder | None = None,
        corpus: str | None = None,
        batch_size: int | None = None,
        store: AnswerStore | None = None,
    ) -> None:
        self.holder = holder or StackHolder()
        self.corpus = corpus
        self._batch = batch_size
        self.store = store
        self.line = AnswerQueue(self._answer_together, self.batch_size)  # every session's questions, in order
        self._indexes = Memo(8)  # (passage encoder id, index name) -> PassageIndex
        self._traces = Memo(256, USER_ERRORS)  # (stack, question, AnswerSettings) -> Trace
        self._asked = Memo(256)  # trace_key -> the AnswerSettings the door answered it under
        self._results = Memo(256)  # (stack, trace_key) -> Result
        self._closed = Memo(256, USER_ERRORS)  # (stack, question, answers) -> closed-book rows by answer
        self._compared = Memo(32, USER_ERRORS)  # (other stack, question, AnswerSettings) -> its answers
        self.tally = ClassTally()  # how the server's sessions answered the exercises (counts only)

    # --- stacks and indexes ----------------------------------------------------------------------

    def models(self, stack: stacks.Stack, progress: Callable[[str], None] | None = None) -> Models:
        return self.holder.models(stack, progress)

    def index_is_open(self, encoder, name: str) -> bool:
        return (encoder.id, name) in self._indexes

    def index_for(self, encoder, name: str) -> PassageIndex:
        """The index `name` as `encoder`'s passage tower reads it, built and cached on first use;
        stacks that share passage vectors share it."""
        return self._indexes.get((encoder.id, name), lambda: self._open_index(encoder, name))

    def _open_index(self, encoder, name: str) -> PassageIndex:
        if name == self.corpus and name not in available_indexes():
            return open_index(None, encoder, corpus=name)[1]
        return resolve_index(name, encoder)[1]

    def forget_index(self, name: str) -> None:
        """Drop an index that was replaced or deleted, with every answer read from it."""
        self._indexes.forget(keep=lambda key: key[1] != name)
        self._traces.forget(keep=lambda key: key[2].index != name)
        self._results.forget(keep=lambda key: key[1][1] != name)
        self._asked.forget(keep=lambda key: key[1] != name)

    def pipeline(self, stack: stacks.Stack, settings: AnswerSettings) -> Pipeline:
        """The stack's models on `settings.index` (the default index when it names none), run under
        `settings`."""
        models = self.models(stack)
        settings = on_index(settings)
        index = self.index_for(models.encoder, settings.index)
        return Pipeline(models, settings.index, index, settings, stack.spec)

    # --- answers ---------------------------------------------------------------------------------

    def batch_size(self) -> int:
        """How many waiting questions of one stack and settings are answered together."""
        if self._batch is not None:
            return self._batch
        models = self.holder.held()
        return 1 if models is None else device_batch(models.device)

    def answer(self, stack: stacks.Stack, question: str, settings: AnswerSettings) -> Result:
        """The question answered under `stack` and `settings` (computed once per server), waiting
        for its turn in the line. Raises the user errors (USER_ERRORS) with a message that says
        what to change."""
        trace = self.ask(f"call-{threading.get_ident()}", stack, question, settings).result()
        return self.result(stack, trace)

    def ask(
        self,
        session: str,
        stack: stacks.Stack,
        question: str,
        settings: AnswerSettings,
        alive: Callable[[], bool] = lambda: True,
    ) -> Ticket:
        """The question put in the line for `session` (its ticket: place, estimate, cancel), or a
        ticket already done when the server knows the answer. The ticket's value is the Trace.
        `alive()`: whether the session is still there when its turn comes (else it is skipped)."""
        settings = on_index(settings)
        fp = stacks.fingerprint(stack.spec)
        key = (fp, question, settings)
        work = lambda: self._traces.get(key, lambda: self._run(stack, question, settings))  # noqa: E731
        if key in self._traces:
            return answered(key, work)
        return self.line.submit(session, key, work, group=(fp, settings), item=(stack, question), alive=alive)

    def _run(self, stack: stacks.Stack, question: str, settings: AnswerSettings) -> Trace:
        return self._decode(stack, settings, [question])[0]

    def _answer_together(self, group: tuple, items: list) -> list[Trace]:
        """Several waiting questions of one stack and settings in one batch (one prompt pass, one
        decode loop), each kept as if it had been answered alone."""
        fp, settings = group
        traces = self._decode(items[0][0], settings, [question for _, question in items])
        return [
            self._traces.get((fp, question, settings), lambda t=trace: t)
            for (_, question), trace in zip(items, traces)
        ]

    def _decode(self, stack: stacks.Stack, settings: AnswerSettings, questions: list[str]) -> list[Trace]:
        """The questions cleaned and retrieved, then those the store holds no answer for (over the
        same passages) decoded as one batch (`Pipeline.decode`) and stored."""
        pipe = self.pipeline(stack, settings)
        queries = [pipe.query(question, [pipe.settings]) for question in questions]
        keys = [self._query_key(stack, pipe, query) for query in queries]
        traces = [self._stored(key, trace_from_dict) for key in keys]
        missing = [i for i, trace in enumerate(traces) if trace is None]
        if missing:
            runs = pipe.decode([queries[i] for i in missing])  # [question][setting]
            for i, runs_of_question in zip(missing, runs):
                traces[i] = runs_of_question[0].trace
                self._keep(keys[i], trace_to_dict(traces[i]))
        for trace in traces:
            self._asked.get(trace_key(trace), lambda: pipe.settings)
        return traces

    def settings_for(self, trace: Trace) -> AnswerSettings:
        """The settings a trace was answered under: the very ones for an answer of the door (no
        second copy is built), else its index and the decode settings it recorded (the scale left
        at the stack's own: a follow-up reads the trace's priors, never re-scores)."""
        recorded = lambda: trace_settings(AnswerSettings(index=trace.index), trace)  # noqa: E731
        return self._asked.get(trace_key(trace), recorded)

    # --- answers kept on disk --------------------------------------------------------------------

    def _query_key(self, stack: stacks.Stack, pipe: Pipeline, query: Query) -> str | None:
        """The store's address of a retrieved question's answer (None without a store)."""
        if self.store is None:
            return None
        return self.store.key(
            stacks.fingerprint(stack.spec),
            "trace",
            question=query.question,
            notices=query.notices,
            index=query.index_name,
            encoder=query.encoder,
            hits=[(h.rank, h.passage.to_dict(), h.score) for h in query.hits],
            scale=pipe.scale_for(pipe.settings),
            settings=pipe.settings.key(),
        )

    def _trace_key(self, stack: stacks.Stack, trace: Trace, kind: str) -> str | None:
        """The store's address of what `kind` computes from a trace (its stuffed reading): every
        number of the trace it reads, by the trace's own key (`trace_key`) and passage texts."""
        if self.store is None:
            return None
        texts = [h.passage.to_dict() for h in trace.hits]
        return self.store.key(stacks.fingerprint(stack.spec), kind, trace=trace_key(trace), passages=texts)

    def _stored(self, key: str | None, read: Callable):
        """The entry at `key` read back with `read`, or None (no store, no entry)."""
        data = None if key is None else self.store.get(key)
        return None if data is None else read(data)

    def _keep(self, key: str | None, data) -> None:
        if key is not None:
            self.store.put(key, data)

    def kept(self, key: str | None, compute: Callable, write: Callable, read: Callable):
        """`compute()`'s value, read back from the store when it holds one at `key`, else computed
        and written there (`write(value)` -> JSON data, `read(data)` -> value)."""
        value = self._stored(key, read)
        if value is None:
            value = compute()
            self._keep(key, write(value))
        return value

    def result(self, stack: stacks.Stack, trace: Trace) -> Result:
        """The Result of any trace of `stack` (an answer, a counterfactual's rerun, a moved query):
        one per trace, so what it computes is computed once."""
        key = (stacks.fingerprint(stack.spec), trace_key(trace))
        return self._results.get(key, lambda: Result(self, stack, trace))

    def closed_rows(self, stack: stacks.Stack, question: str, answers: tuple[tuple[int, ...], ...]) -> dict:
        """The closed-book teacher-forced rows (T,) of answers of one question, by their token ids,
        in one batched pass: they depend on the question and the answers only, so every index and
        setting shares them."""

        def compute() -> dict:
            # a closed-book row reads no index
            pipe = Pipeline(self.models(stack), "", None, stack=stack.spec)
            rows = pipe.closed_book_scores(question, [list(a) for a in answers])  # (N, T)
            return dict(zip(answers, rows))

        fp = stacks.fingerprint(stack.spec)
        key = None if self.store is None else self.store.key(fp, "closed", question=question, answers=answers)
        return self._closed.get(
            (fp, question, answers), lambda: self.kept(key, compute, _rows_to_data, _rows_from_data)
        )

    def compare(
        self, other: stacks.Stack, question: str, settings: AnswerSettings
    ) -> tuple[Trace, dict[str, certainty.Confidence]]:
        """The question under another stack than the held one, for a side by side: its trace (with
        the stuffed reading) and the low-confidence rule on its answers, computed once. Its models
        are loaded for this alone, under the load lock (one load at a time), and dropped after: for
        that moment two stacks are in memory. Raises the user errors and a load's errors."""
        settings = on_index(settings)

        def compute():
            with self.holder.borrowed(other) as models:
                index = self.index_for(models.encoder, settings.index)
                pipe = Pipeline(models, settings.index, index, settings, other.spec)
                trace = pipe.with_stuffed(pipe.run(question), explain=False)  # the rule compares all three
                return trace, certainty.answer_confidences(pipe, trace)

        return self._compared.get((stacks.fingerprint(other.spec), question, settings), compute)


class Result:
    """One trace and what the pages read from it, each part computed the first time it is asked
    for and kept. The methods raise the user errors (USER_ERRORS); a failure is kept like a value,
    so asking again says the same without computing again."""

    def __init__(self, loupe: Loupe, stack: stacks.Stack, trace: Trace) -> None:
        self.trace = trace
        self._loupe, self._stack = loupe, stack
        self._parts = Memo(64, USER_ERRORS)

    def _pipeline(self) -> Pipeline:
        """The stack on the trace's index under the settings the trace recorded."""
        return self._loupe.pipeline(self._stack, self._loupe.settings_for(self.trace))

    def with_stuffed(self) -> Trace:
        """The trace with the stuffed reading of its own passages, question and settings."""
        if self.trace.stuffed is not None:
            return self.trace
        return self._parts.get("stuffed", lambda: self._stuffed("stuffed", explain=True))

    def _stuffed(self, kind: str, explain: bool) -> Trace:
        """The stuffed reading computed (`Pipeline.with_stuffed`), or read back from the store."""
        key = self._loupe._trace_key(self._stack, self.trace, kind)
        compute = lambda: self._pipeline().with_stuffed(self.trace, explain=explain)  # noqa: E731
        return self._loupe.kept(key, compute, trace_to_dict, trace_from_dict)

    def stuffed_answers(self) -> Trace:
        """The trace with the stuffed reading's answers alone, without what each passage is worth:
        what the low-confidence rule compares, at a third of the full reading's model work (its
        leave-one-out is K prompts more). The same answers as `with_stuffed`, which is returned
        instead once it has been made."""
        if self.trace.stuffed is not None:
            return self.trace
        if "stuffed" in self._parts:
            return self.with_stuffed()
        return self._parts.get("stuffed answers", lambda: self._stuffed("stuffed answers", explain=False))

    def with_stuffed_if_it_fits(self) -> Trace:
        """`stuffed_answers`, or the trace as it is when the K passages make a prompt longer than
        the generator reads (the confidence rule then compares the two marginals)."""
        try:
            return self.stuffed_answers()
        except USER_ERRORS:
            return self.trace

    def closed_row(self, cand: Candidate) -> torch.Tensor:
        """The closed-book row (T,) of one candidate, computed with those of every answer of every
        reading in the same pass, once: a counterfactual that picks another of them later finds its
        row without a model call."""
        own = tuple(cand.token_ids)
        trace = self.with_stuffed_if_it_fits()  # every reading's answers: each page asks the same batch
        answers = {tuple(c.token_ids) for d in (*DECODINGS, STUFFED) for c in trace.of(d) if c.token_ids}
        batch = tuple(sorted(answers)) if own in answers else (own,)
        return self._loupe.closed_rows(self._stack, trace.question, batch)[own]

    def confidence(self, cand: Candidate, log_prior: torch.Tensor | None = None) -> certainty.Confidence:
        """Whether the model is guessing at `cand` (`analysis.diagnosis.confidence`), from all three
        readings and the answer's closed-book row; without that row (a user error computing it) the
        rule runs without its support check. `log_prior` (K,): a counterfactual's prior."""
        trace = self.with_stuffed_if_it_fits()
        closed = None
        if cand.token_ids:
            try:
                closed = self.closed_row(cand)
            except USER_ERRORS:
                closed = None
        return certainty.candidate_confidence(trace, cand, closed, log_prior)

    def token_sources(self, decoding: str, rank: int = 0) -> list[token_sources.TokenSource] | None:
        """Where each token of a candidate came from (its closed-book row, computed once); None for
        a candidate with no tokens."""
        cand = next((c for c in self.trace.of(decoding) if c.rank == rank), None)
        if cand is None or not cand.token_ids:
            return None
        closed = self.closed_row(cand)
        return token_sources.candidate_sources(
            self.trace.log_prior, cand, closed, token_sources.passage_texts(self.trace)
        )

    def sentence_attribution(self, cand: Candidate, z: int) -> sentences.SentenceAttribution:
        """Leave-one-sentence-out of a candidate's answer over passage `z` (one batched pass): the
        passage read alone for a marginal's answer, inside the K passages' prompt for the stuffed
        reading's."""
        ids = list(cand.token_ids)
        trace = self.trace

        def compute():
            if cand.decoding == STUFFED:
                passages = tuple(h.passage for h in trace.hits)
                return sentences.attribute_stuffed(self._pipeline(), trace.question, passages, z, ids)
            return sentences.attribute(self._pipeline(), trace.question, trace.hits[z].passage, ids)

        return self._parts.get(("sentences", cand.decoding, tuple(ids), z), compute)

    def stuffed_orders(self) -> list:
        """The stuffed reading with its passages in the other orders (`Pipeline.stuffed_orders`)."""
        return self._parts.get("orders", lambda: self._pipeline().stuffed_orders(self.with_stuffed()))

    def export(self, fmt: str, stuffed: bool = False) -> bytes | str:
        """The trace in one export format (EXPORT_FORMATS), with its stuffed reading when `stuffed`."""

        def compute():
            trace = self.with_stuffed() if stuffed else self.trace
            return trace_otlp(trace) if fmt == "otlp" else frame_bytes(trace.to_frame(), fmt, "trace")

        return self._parts.get(("export", fmt, stuffed), compute)


def _rows_to_data(rows: dict) -> dict:
    """Closed-book rows by answer as JSON data: the answers' token ids, their rows (JSON's doubles
    hold float32 and float64 values exactly) and the rows' dtype."""
    dtype = str(next(iter(rows.values())).dtype).removeprefix("torch.") if rows else "float32"
    answers, values = [list(a) for a in rows], [row.tolist() for row in rows.values()]
    return {"answers": answers, "rows": values, "dtype": dtype}


def _rows_from_data(data: dict) -> dict:
    dtype = getattr(torch, data["dtype"])
    return {tuple(a): torch.tensor(row, dtype=dtype) for a, row in zip(data["answers"], data["rows"])}
