"""One logged trace replayed exactly on one of our causal generators.

The prompt the model read is rebuilt with each document's span in it (`prompt_slots`); where the
trace logged no prompt, the stuffed reading's own template reads the documents in their logged
order, and `template` says so. On that one prompt row, with the stuffed reading's own code
(`decoding.stuffed`):

- the replay's greedy answer, and the logged answer teacher-forced: p(y | prompt);
- exact leave-one-out: each document's span cut out of the prompt, the logged answer teacher-forced
  on what is left (the packed computation, equal to separate calls);
- closed-book: the prompt with every document cut out (the model alone, in the user's template);
- the mixture's view: each document alone in the generator's own reading, p(y | x, z), and the
  posterior p(z | x, y) under a uniform prior (the other system's scores are not probabilities);
- order sensitivity where asked; for a wrong answer with an expected one, the other orders and the
  greedy answer without each document; then the verdicts (`why`) and the low-confidence rule.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import torch

from rag_core import marginals
from rag_core.analysis.diagnosis.confidence import Confidence, assess
from rag_core.analysis.matching import contains_answer, exact_match, normalize_answer
from rag_core.corpus import Passage, Prompted, Reading, Stuffed
from rag_core.decoding.decode import DecodeJob, SearchSettings, decode_jobs, score_answers
from rag_core.decoding.stuffed import (
    OrderReading,
    leave_one_out,
    order_sensitivity,
    stuffed_decode,
    stuffed_state,
)
from rag_core.generators.causal import CausalGenerator
from rag_core.generators.logged_prompt import render_chat, reply_endings
from rag_core.replay.prompt_slots import locate
from rag_core.replay.records import LoggedDocument, LoggedTrace
from rag_core.replay.why import ReplayVerdict, judge

OWN_TEMPLATE = "the stuffed reading's own template (no logged prompt holds the documents)"
LOGGED_PROMPT = "the logged prompt"
LOGGED_CHAT = "the logged chat messages, in the generator's chat template"
# The replay's own answers (greedy, closed-book, other orders) are read up to this many tokens past the
# logged answer's length, and 64 at most: a longer answer cannot reproduce the logged one. (The
# logged answer itself is teacher-forced whole, whatever its length.)
PAST_LOGGED, MAX_NEW_TOKENS = 8, 64


@dataclass
class DocumentFinding:
    """One document the model read, in prompt order."""

    position: int  # 1-based, in the prompt
    id: str
    title: str
    text: str  # as it stands in the prompt
    score: float | None  # the other system's retrieval score, as logged
    p_without: float  # p(logged answer | the prompt without this document)
    worth: float  # log p(y | prompt) − log p(y | prompt without it), nats
    p_alone: float  # p(y | x, z) in the generator's own reading of this document alone
    posterior: float  # p(z | x, y) under a uniform prior over the documents read
    holds_answer: bool
    holds_expected: bool | None  # None: no expected answer


@dataclass
class Replay:
    trace: LoggedTrace
    generator: str
    template: str  # which prompt was replayed (LOGGED_PROMPT, LOGGED_CHAT or OWN_TEMPLATE)
    prompt: str  # the prompt text replayed
    answer_tokens: list[int]
    replayed: str  # the replay's own greedy answer
    p_replayed: float
    p_answer: float  # p(logged answer | prompt), teacher-forced
    closed_book: str  # greedy answer of the prompt with no document
    p_closed: float  # p(logged answer | prompt with no document)
    documents: list[DocumentFinding]
    not_in_prompt: list[LoggedDocument]  # retrieved, but their text did not reach the prompt
    verdicts: list[ReplayVerdict]
    confidence: Confidence
    orders: list[OrderReading] = field(default_factory=list)

    @property
    def reproduced(self) -> bool:
        """The replay's greedy answer is the logged one (SQuAD normalisation)."""
        return normalize_answer(self.replayed) == normalize_answer(self.trace.answer)

    @property
    def leaned_on(self) -> DocumentFinding | None:
        """The document whose removal costs the logged answer most; None when no removal costs it
        anything (the answer leans on no document)."""
        best = max(self.documents, key=lambda d: d.worth, default=None)
        return best if best is not None and best.worth > 0 else None

    @property
    def correct(self) -> bool | None:
        return None if not self.trace.expected else exact_match(self.trace.answer, self.trace.expected)

    @property
    def fired(self) -> list[str]:
        return [v.code for v in self.verdicts if v.fired]

    @property
    def supported(self) -> bool:
        """Some document the model read holds the logged answer."""
        return any(d.holds_answer for d in self.documents)


def reading_for(gen: CausalGenerator, trace: LoggedTrace) -> tuple[Reading, list[LoggedDocument], str]:
    """The prompt row to replay, the documents not in it, and which template it is."""
    if trace.has_prompt:
        chat = bool(trace.messages)
        text = render_chat(gen, trace.messages) if chat else trace.prompt
        prompted, missing = locate(text, trace.documents)
        if prompted.passages:
            return prompted, missing, LOGGED_CHAT if chat else LOGGED_PROMPT
    passages = tuple(Passage(d.id, d.title, d.text) for d in trace.documents)
    return Stuffed(passages), [], OWN_TEMPLATE


def _p(logp: torch.Tensor) -> float:
    return float(logp.double().nansum().exp())


def replay(gen: CausalGenerator, trace: LoggedTrace, orders: bool = False) -> Replay:
    """The trace replayed (module docstring). ValueError: the prompt is longer than the generator reads."""
    if not isinstance(gen, CausalGenerator):
        raise ValueError("Replay reads logged prompts with a causal language model generator")
    reading, missing, template = reading_for(gen, trace)
    question, passages, k = trace.question, reading.passages, len(reading.passages)
    if isinstance(reading, Prompted):  # read verbatim: the prompt, its answer and the replay's must fit
        need = len(gen.tokenizer.encode(reading.text + " " + trace.answer)) + PAST_LOGGED
        if need > gen.max_positions:
            limit = gen.max_positions
            raise ValueError(
                f"the logged prompt and its answer make {need} tokens, more than the generator's {limit}"
            )
    state = stuffed_state(gen, question, reading)  # the one prompt row
    tokens = _ended(gen, state, reading, trace.answer)
    expected = [_ended(gen, state, reading, a) for a in trace.expected or []]
    length = min(len(tokens) + PAST_LOGGED, MAX_NEW_TOKENS)
    settings = SearchSettings(beams=1, max_new_tokens=length, top_alternatives=1)
    best = stuffed_decode(gen, question, reading, settings, state)[0]
    forced = score_answers(gen, state, [tokens, *expected], 1)[0][:, 0]  # (1 + E, T)
    loo = leave_one_out(gen, question, reading, tokens, state)  # (K, T)
    closed_row = (question, reading.closed() if isinstance(reading, Prompted) else None)
    closed_state = gen.prepare_rows([closed_row])  # one row: the prompt with no document
    closed = stuffed_decode(gen, question, reading, settings, closed_state)[0]
    closed_logp = score_answers(gen, closed_state, [tokens], 1)[0][0, 0].double().nansum()  # ()
    alone_state = gen.prepare_rows([(question, p) for p in passages])  # K rows, our own reading
    alone = score_answers(gen, alone_state, [gen.encode_answer(trace.answer)], 1)[0][0]  # (K, T')
    uniform = torch.full((k,), -math.log(k))  # (K,) the prior: no probability was logged
    posterior = marginals.citation(uniform, alone).tolist()  # (K,) p(z|x,y)
    whole = forced[0].double().nansum()  # () log p(y | prompt)
    by_id = {d.id: d for d in trace.documents}
    docs = [
        DocumentFinding(
            z + 1,
            p.id,
            p.title,
            p.text,
            by_id[p.id].score if p.id in by_id else None,
            _p(loo[z]),
            float(whole - loo[z].double().sum()),
            _p(alone[z]),
            float(posterior[z]),
            contains_answer(p.text, [trace.answer]),
            contains_answer(p.text, trace.expected) if trace.expected else None,
        )
        for z, p in enumerate(passages)
    ]
    wrong = bool(trace.expected) and not exact_match(trace.answer, trace.expected)
    readings = order_sensitivity(gen, question, reading, tokens, settings) if (orders or wrong) else []
    p_answer = _p(forced[0])
    support = float(whole - closed_logp)  # nats the documents add to the logged answer
    return Replay(
        trace,
        gen.id,
        template,
        reading.text if isinstance(reading, Prompted) else "",
        tokens,
        gen.decode(best.tokens),
        _p(best.token_logp[0]),
        p_answer,
        gen.decode(closed.tokens),
        float(closed_logp.exp()),
        docs,
        missing,
        judge(
            trace.answer,
            trace.expected,
            [bool(d.holds_expected) for d in docs],
            [d.id for d in missing if trace.expected and contains_answer(d.text, trace.expected)],
            p_answer,
            max((_p(row) for row in forced[1:]), default=None),
            _answers_without(gen, question, reading, settings) if wrong else None,
            [(r.order, r.answer) for r in readings] if wrong else None,
            gen.decode(closed.tokens),
        ),
        assess(p_answer, support=support),
        readings,
    )


def _ended(gen: CausalGenerator, state, reading: Reading, answer: str) -> list[int]:
    """The answer's tokens with the end the model prefers after this prompt: the stuffed reading's
    own template ends every answer with a line break; after a logged prompt, a line break or the
    model's end-of-text token, whichever it gives the higher probability (one packed pass)."""
    if not isinstance(reading, Prompted):
        return gen.encode_answer(answer)
    endings = reply_endings(gen, reading, answer)
    if len(endings) == 1:
        return endings[0]
    logp = score_answers(gen, state, endings, 1)[0][:, 0].double().nansum(-1)  # (E,) log p of each ending
    return endings[int(logp.argmax())]


def _answers_without(gen, question: str, reading: Reading, settings: SearchSettings) -> list[str]:
    """The greedy answer of the prompt without each document: one prompt pass, one decode loop."""
    rows = [(question, reading.without(z)) for z in range(len(reading.passages))]
    state = gen.prepare_rows(rows)  # K rows
    jobs = [DecodeJob([z], torch.zeros(1), settings, "token") for z in range(len(rows))]
    return [gen.decode(best[0].tokens) for best, _ in decode_jobs(gen, state, jobs)]
