"""Why is this answer wrong? Verdicts with their evidence, and counterfactuals from a stored trace.

Five verdicts, each a check on numbers the trace (or one teacher-forced pass) already holds; they
can overlap, and each carries the evidence that decided it:

- `retrieval-miss`: no retrieved passage contains the expected answer. A deeper search (top 100)
  finds the best passage that does: its rank and how far its score s(z) is below the top one.
- `evidence-ignored`: a retrieved passage contains the expected answer, yet under that passage the
  generator prefers the produced answer: log p(produced|x,z) > log p(expected|x,z).
- `parametric`: the produced answer is about as likely under every passage (p(y|x,z) varies by at
  most a factor FLAT_RATIO over the K passages, so its responsibilities stay at the prior: the
  passages did not move it) and closed-book gives it too.
- `frankenstein`: RAG-Token's answer takes tokens from different passages (the top responsibility
  r_i(z) of a step that moves r_i away from the prior, as `stepper.top_sources` reads it), and
  RAG-Sequence answers something else and scores it higher: p_seq(its answer) > p_seq(RAG-Token's).
- `misleading-passage`: the passage with the highest posterior p(z|x,y) does not contain the
  expected answer but does contain the produced one.
- `search-error` (beyond the five of the issue, because real traces need it): the model itself
  scores the expected answer higher than the produced one under the decoding's own marginal
  (p_seq for RAG-Sequence, p_tok for RAG-Token), so the model was right and greedy/beam search
  missed it; more beams may find it.

An answer that matches the expected one (SQuAD exact match) is not diagnosed: nothing fires.

Counterfactuals need no model call: removing passages, a smaller K or another retriever scale only
changes the prior p(z|x); every conditional p(y_i|x,z,y_<i) stays as stored.
- RAG-Sequence is exact: each passage's beam search never looks at the prior or at the other
  passages, so the hypotheses of a rerun are those of the kept passages, rescored under the new prior.
- RAG-Token (greedy) is exact when it can be certified: at each step the answer's token must still
  win the mixture. The trace keeps the top-A tokens per passage and step; a token outside a
  passage's top A has probability at most the A-th value there, which bounds every competitor.
  When another token would win, the note says where the path leaves and a rerun is needed.

>>> import torch
>>> lpz = torch.tensor([0.7, 0.3]).log()
>>> round(total_variation(marginals.citation(lpz, torch.tensor([[0.9], [0.2]]).log()), lpz.exp()), 3)
0.213
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Iterable, Sequence

import torch

from . import marginals, stepper
from .decoding import score_answers
from .evaluation import contains_answer, exact_match, normalize_answer, passage_text
from .generators.base import GenState
from .trace import Candidate, Trace

VERDICTS = {  # code -> title, in the order the UI lists them
    "retrieval-miss": "Retrieval miss",
    "evidence-ignored": "Evidence ignored",
    "parametric": "Parametric answer",
    "frankenstein": "Frankenstein answer",
    "misleading-passage": "Misleading passage",
    "search-error": "Search error",
}
FLAT_RATIO = 5.0  # p(y|x,z) within this factor over all K passages = "flat responsibilities"
DEEP_DEPTH = 100  # how deep the retrieval-miss search looks


def _p(logp: float) -> float:
    return math.exp(logp) if logp > float("-inf") and not math.isnan(logp) else 0.0


def total_variation(p: torch.Tensor, q: torch.Tensor) -> float:
    return float(0.5 * (p.double() - q.double()).abs().sum())


# ------------------------------------------------------------------------------- scored answers
@dataclass
class AnswerScores:
    """One answer's conditionals under the K passages, whichever way they were obtained."""

    label: str  # "rag-token", "rag-sequence" (produced answers) or "expected"
    text: str
    token_ids: list[int]
    token_logp: torch.Tensor  # (K, T) log p(y_i|x,z,y_<i); NaN = never scored (fast rescoring)

    def doc_logp(self) -> torch.Tensor:
        return marginals.doc_sequence_logp(self.token_logp)  # (K,)

    def log_p_seq(self, log_pz: torch.Tensor) -> float:
        return float(marginals.rag_sequence(log_pz, self.token_logp))

    def log_p_tok(self, log_pz: torch.Tensor) -> float:
        return float(marginals.rag_token(log_pz, self.token_logp))

    def posterior(self, log_pz: torch.Tensor) -> torch.Tensor:
        return marginals.citation(log_pz, self.token_logp)  # (K,)

    @property
    def complete(self) -> bool:
        return not bool(torch.isnan(self.token_logp).any())

    @classmethod
    def of(cls, c: Candidate) -> "AnswerScores":
        return cls(c.decoding, c.answer, list(c.token_ids), c.token_logp.double())


@dataclass
class ForcedAnswers:
    """Answers teacher-forced under the K passages of a trace in one batched pass."""

    items: list[AnswerScores]
    calls: int = 0  # generator forward passes it took (prompt pass included when one was needed)

    def by_label(self, label: str) -> list[AnswerScores]:
        return [a for a in self.items if a.label == label]

    @property
    def expected(self) -> list[AnswerScores]:
        return self.by_label("expected")


def score_texts(gen, trace: Trace, expected: Sequence[str], state0: GenState | None = None) -> ForcedAnswers:
    """Teacher-force the expected answer(s) under the trace's K passages, plus any produced answer
    the trace could not score under every passage (fast rescoring), in one batch.

    `state0`: the prepared prompts of this trace when the caller still holds them; otherwise the K
    prompts are prepared again (one prompt pass) before the teacher-forced pass.
    """
    entries: list[tuple[str, str, list[int]]] = []
    seen: set[tuple[int, ...]] = set()
    for text in expected:
        ids = gen.encode_answer(text)
        if text.strip() and tuple(ids) not in seen:
            seen.add(tuple(ids))
            entries.append(("expected", text.strip(), ids))
    for d in ("rag-token", "rag-sequence"):
        c = trace.answer(d)
        if c is not None and c.token_ids and torch.isnan(c.token_logp).any():
            entries.append((d, c.answer, list(c.token_ids)))
    if not entries:
        return ForcedAnswers([], 0)
    calls = 0
    if state0 is None:
        state0 = gen.prepare(trace.query, [h.passage for h in trace.hits])
        calls += 1
    lp, mask, _, _ = score_answers(gen, state0, [ids for _, _, ids in entries], top_alternatives=1)  # (N, K, T)
    items = [AnswerScores(label, text, ids, lp[n, :, : len(ids)].double()) for n, (label, text, ids) in enumerate(entries)]
    return ForcedAnswers(items, calls + 1)


def force_answers(pipe, trace: Trace, expected: Sequence[str]) -> ForcedAnswers:
    """The pipeline-level teacher-forced pass: the trace's K prompts, then the expected answers
    (under the models' lock, like every other use of the shared generator by app sessions)."""
    with pipe.models.lock:
        return score_texts(pipe.models.generator, trace, expected)


@dataclass
class PreparedRun:
    """A trace and the prepared prompt state it was decoded from (reused for teacher forcing)."""

    trace: Trace
    state0: GenState


def run_with_state(pipe, question: str, cfg=None) -> PreparedRun:
    """`Pipeline.run`, keeping the prepared state so gold answers can be scored with no new prompt pass."""
    from .pipeline import QuestionError, analyse, clean_question

    cfg = (cfg or pipe.cfg).validate()
    question, notices = clean_question(question)
    hits = pipe.retrieve(question, cfg.k)
    if not hits:
        raise QuestionError("the index returned no passages")
    scale = pipe.scale_for(cfg)
    log_pz = marginals.log_prior(torch.tensor([h.score for h in hits]), scale)  # (K,)
    gen = pipe.models.generator
    state0 = gen.prepare(question, [h.passage for h in hits])
    trace = analyse(gen, question, hits, log_pz, cfg, pipe.index_name, scale, state0)
    trace.settings["notices"] = notices
    return PreparedRun(trace, state0)


# -------------------------------------------------------------------------------- deeper search
@dataclass
class DeepHit:
    """The best passage in a deeper search that contains the expected answer (rank None: none)."""

    depth: int
    k: int
    top_score: float  # s(z) of the top passage
    kth_score: float  # s(z) of the K-th (last retrieved) passage
    rank: int | None = None
    score: float | None = None
    title: str = ""
    text: str = ""

    @property
    def gap_top(self) -> float | None:
        return None if self.score is None else self.top_score - self.score

    @property
    def gap_kth(self) -> float | None:
        return None if self.score is None else self.kth_score - self.score


def deep_search(retriever, trace: Trace, expected: Sequence[str], depth: int = DEEP_DEPTH) -> DeepHit:
    """Search `depth` deep (anything with `.retrieve(question, k)`: a Pipeline, a Retriever)."""
    hits = retriever.retrieve(trace.query, max(depth, trace.k))
    top = hits[0].score if hits else float("nan")
    kth = trace.hits[-1].score if trace.hits else float("nan")
    out = DeepHit(depth, trace.k, top, kth)
    for h in hits:
        if contains_answer(passage_text(h.passage), expected):
            out.rank, out.score, out.title, out.text = h.rank, h.score, h.passage.title, h.passage.text
            break
    return out


# -------------------------------------------------------------------------------------- verdicts
@dataclass
class Verdict:
    code: str
    fired: bool | None  # None: could not be judged (the note says what is missing)
    summary: str
    evidence: dict = field(default_factory=dict)

    @property
    def title(self) -> str:
        return VERDICTS[self.code]


@dataclass
class Diagnosis:
    question: str
    decoding: str  # the answer diagnosed: "rag-token" or "rag-sequence"
    answer: str
    expected: list[str]
    correct: bool | None  # None when no expected answer was given
    verdicts: list[Verdict]
    scores: list[AnswerScores]  # the produced answers and the teacher-forced expected ones

    @property
    def fired(self) -> list[str]:
        return [v.code for v in self.verdicts if v.fired]

    def verdict(self, code: str) -> Verdict:
        return next(v for v in self.verdicts if v.code == code)


def _rows(trace: Trace) -> list[dict]:
    return [{"rank": h.rank, "title": h.passage.title, "score": h.score, "prior": float(p)}
            for h, p in zip(trace.hits, trace.prior)]


def _contains_words(text: str, answer: str) -> bool:
    """The answer as a phrase, or every one of its words, occurs in the text."""
    if contains_answer(text, [answer]):
        return True
    words = normalize_answer(answer).split()
    hay = f" {normalize_answer(text)} "
    return bool(words) and all(f" {w} " in hay for w in words)


def _best_expected(expected: list[AnswerScores], z: int) -> AnswerScores:
    return max(expected, key=lambda a: float(a.doc_logp()[z]))


def check_retrieval_miss(trace: Trace, expected: list[str], deep: DeepHit | None) -> Verdict:
    ranks = [h.rank for h in trace.hits if contains_answer(passage_text(h.passage), expected)]
    if ranks:
        return Verdict("retrieval-miss", False, f"retrieved passage(s) {', '.join(map(str, ranks))} contain the expected "
                       "answer", {"containing_ranks": ranks})
    ev = {"containing_ranks": [], "k": trace.k}
    if deep is None:
        return Verdict("retrieval-miss", True, f"none of the {trace.k} retrieved passages contains the expected answer "
                       "(no deeper search was run)", ev)
    ev.update({"depth": deep.depth, "rank": deep.rank, "score": deep.score, "title": deep.title, "text": deep.text,
               "top_score": deep.top_score, "kth_score": deep.kth_score, "gap_top": deep.gap_top, "gap_kth": deep.gap_kth})
    if deep.rank is None:
        return Verdict("retrieval-miss", True, f"none of the {trace.k} retrieved passages contains the expected answer, "
                       f"nor any of the top {deep.depth}", ev)
    return Verdict("retrieval-miss", True,
                   f"none of the {trace.k} retrieved passages contains the expected answer; the best passage that does "
                   f"is rank {deep.rank} ({deep.title!r}), score {deep.score:.3f}: {deep.gap_top:.3f} below the top "
                   f"passage and {deep.gap_kth:.3f} below passage {trace.k}", ev)


def check_evidence_ignored(trace: Trace, expected: list[str], produced: AnswerScores,
                           forced: list[AnswerScores] | None) -> Verdict:
    have = [i for i, h in enumerate(trace.hits) if contains_answer(passage_text(h.passage), expected)]
    if not have:
        return Verdict("evidence-ignored", False, "no retrieved passage contains the expected answer to ignore")
    if not forced:
        return Verdict("evidence-ignored", None, "needs the teacher-forced pass of the expected answer")
    post = produced.posterior(trace.log_prior)
    rows, ignored = [], []
    for z in have:
        best = _best_expected(forced, z)
        lp_exp, lp_prod = float(best.doc_logp()[z]), float(produced.doc_logp()[z])
        rows.append({"rank": z + 1, "title": trace.hits[z].passage.title, "prior": float(trace.prior[z]),
                     "posterior": float(post[z]), "expected": best.text, "p_expected": _p(lp_exp),
                     "p_produced": _p(lp_prod), "prefers": "produced" if lp_prod > lp_exp else "expected"})
        if lp_prod > lp_exp:
            ignored.append(z)
    ev = {"passages": rows}
    if not ignored:
        return Verdict("evidence-ignored", False, "under every passage that contains it, the generator prefers the "
                       "expected answer to the produced one (the mixture lost it elsewhere)", ev)
    z = max(ignored, key=lambda i: trace.prior[i])
    r = next(row for row in rows if row["rank"] == z + 1)
    return Verdict("evidence-ignored", True,
                   f"passage {z + 1} ({r['title']!r}) contains {r['expected']!r}, yet under it the generator gives "
                   f"{produced.text!r} p={r['p_produced']:.3g} against p={r['p_expected']:.3g} for {r['expected']!r}", ev)


def check_parametric(trace: Trace, produced: AnswerScores, closed_book: str | None) -> Verdict:
    prior = torch.as_tensor(trace.prior, dtype=torch.float64)
    post = produced.posterior(trace.log_prior)
    doc_lp = produced.doc_logp()  # (K,) log p(y|x,z)
    doc_p = [_p(float(v)) for v in doc_lp]
    spread = float(doc_lp.max() - doc_lp.min())  # log of the max/min ratio over passages
    ratio = math.exp(spread) if math.isfinite(spread) else math.inf
    ev = {"ratio": ratio, "p_answer_given_passage": doc_p, "posterior": post.tolist(), "prior": prior.tolist(),
          "tv_posterior_prior": total_variation(post, prior), "closed_book": closed_book, "threshold": FLAT_RATIO}
    if trace.k < 2:
        return Verdict("parametric", None, "with one passage, flat responsibilities cannot be told apart", ev)
    lo, hi = min(doc_p), max(doc_p)
    if not (produced.complete and ratio <= FLAT_RATIO):
        return Verdict("parametric", False, f"the passages move the answer: p(y|x,z) ranges from {lo:.3g} to {hi:.3g} "
                       "over the passages", ev)
    if closed_book is None:
        return Verdict("parametric", None, f"the answer is about as likely under every passage (p(y|x,z) from {lo:.3g} "
                       f"to {hi:.3g}); closed-book was not run", ev)
    same = exact_match(closed_book, [produced.text]) or contains_answer(closed_book, [produced.text])
    ev["closed_book_agrees"] = same
    if not same:
        return Verdict("parametric", False, f"the answer is about as likely under every passage, but closed-book says "
                       f"{closed_book!r}", ev)
    return Verdict("parametric", True, f"{produced.text!r} is about as likely under every passage (p(y|x,z) from "
                   f"{lo:.3g} to {hi:.3g}, a factor {ratio:.1f}) and closed-book gives it too", ev)


def check_frankenstein(trace: Trace, decoding: str) -> Verdict:
    tok, seq = trace.answer("rag-token"), trace.answer("rag-sequence")
    if decoding != "rag-token":
        return Verdict("frankenstein", False, "a Frankenstein answer is a RAG-Token answer")
    if tok is None or seq is None:
        return Verdict("frankenstein", None, "needs both RAG-Token and RAG-Sequence answers")
    lpz = trace.log_prior
    ev = {"rag_token": tok.answer, "rag_sequence": seq.answer,
          "p_tok_token": _p(tok.log_p_tok(lpz)), "p_seq_token": _p(tok.log_p_seq(lpz)),
          "p_tok_sequence": _p(seq.log_p_tok(lpz)), "p_seq_sequence": _p(seq.log_p_seq(lpz))}
    if normalize_answer(tok.answer) == normalize_answer(seq.answer):
        return Verdict("frankenstein", False, "RAG-Token and RAG-Sequence give the same answer", ev)
    resp = marginals.responsibilities(lpz, tok.token_logp)  # (K, T)
    prior = lpz.double().exp()  # (K,)
    # The same rule as the Token vs Sequence page: a step names its source only when it moves the
    # responsibilities away from the prior (an end token, or a word every passage predicts, does not).
    top = stepper.top_sources(lpz, tok.token_logp)
    steps, sources = [], []
    for i, z in enumerate(top):
        zz = int(resp[:, i].argmax())
        steps.append({"step": i, "token": tok.tokens[i], "rank": zz + 1, "responsibility": float(resp[zz, i]),
                      "prior": float(prior[zz]), "decided": z is not None})
        if z is not None and z not in sources:
            sources.append(z)
    ev["steps"] = steps
    ev["sources"] = [z + 1 for z in sources]
    if tok.log_p_seq(lpz) >= seq.log_p_seq(lpz):
        return Verdict("frankenstein", False, "RAG-Sequence scores the RAG-Token answer at least as high as its own "
                       "(a search difference, not a stitched answer)", ev)
    if len(sources) < 2:
        return Verdict("frankenstein", False, "RAG-Token's answer draws on one passage only", ev)
    parts = "; ".join(f"{s['token'].strip()!r} from passage {s['rank']} (r={s['responsibility']:.2f})"
                      for s in steps if s["decided"])
    return Verdict("frankenstein", True,
                   f"RAG-Token stitched {tok.answer!r} from passages {', '.join(map(str, ev['sources']))}: {parts}. "
                   f"RAG-Sequence says {seq.answer!r} (p_seq {ev['p_seq_sequence']:.3f} against "
                   f"{ev['p_seq_token']:.3f} for the stitched answer, whose p_tok is {ev['p_tok_token']:.3f})", ev)


def check_misleading(trace: Trace, expected: list[str], produced: AnswerScores,
                     forced: list[AnswerScores] | None) -> Verdict:
    post = produced.posterior(trace.log_prior)
    z = int(post.argmax())
    h = trace.hits[z]
    text = passage_text(h.passage)
    has_exp = contains_answer(text, expected)
    has_prod = bool(normalize_answer(produced.text)) and _contains_words(text, produced.text)
    ev = {"rank": z + 1, "title": h.passage.title, "prior": float(trace.prior[z]), "posterior": float(post[z]),
          "contains_expected": has_exp, "contains_produced": has_prod, "text": h.passage.text,
          "p_produced": _p(float(produced.doc_logp()[z]))}
    if forced:
        ev["p_expected"] = _p(float(_best_expected(forced, z).doc_logp()[z]))
    if has_exp:
        return Verdict("misleading-passage", False, f"the top-posterior passage {z + 1} ({h.passage.title!r}) contains "
                       "the expected answer", ev)
    if not has_prod:
        return Verdict("misleading-passage", False, f"the top-posterior passage {z + 1} ({h.passage.title!r}) says "
                       "neither the expected nor the produced answer", ev)
    return Verdict("misleading-passage", True,
                   f"the passage the answer leans on most, {z + 1} ({h.passage.title!r}, posterior {post[z]:.2f}), "
                   f"says {produced.text!r}, not the expected answer", ev)


def check_search_error(trace: Trace, decoding: str, produced: AnswerScores,
                       forced: list[AnswerScores] | None) -> Verdict:
    if not forced:
        return Verdict("search-error", None, "needs the teacher-forced pass of the expected answer")
    lpz = trace.log_prior
    score = (lambda a: a.log_p_seq(lpz)) if decoding == "rag-sequence" else (lambda a: a.log_p_tok(lpz))
    name = "p_seq" if decoding == "rag-sequence" else "p_tok"
    best = max(forced, key=score)
    lp_exp, lp_prod = score(best), score(produced)
    ev = {"marginal": name, "expected": best.text, "p_expected": _p(lp_exp), "p_produced": _p(lp_prod),
          "beams": trace.settings.get("beams", 1)}
    if lp_exp <= lp_prod:
        return Verdict("search-error", False, f"the model itself prefers the produced answer ({name} {_p(lp_prod):.3g} "
                       f"against {_p(lp_exp):.3g} for {best.text!r})", ev)
    return Verdict("search-error", True, f"the model scores {best.text!r} higher ({name} {_p(lp_exp):.3g}) than the "
                   f"produced {produced.text!r} ({_p(lp_prod):.3g}): decoding missed it; more beams may find it", ev)


def diagnose(trace: Trace, expected: str | Sequence[str] | None = None, decoding: str | None = None,
             forced: ForcedAnswers | None = None, deep: DeepHit | None = None, closed_book: str | None = None) -> Diagnosis:
    """Every verdict on one answer of a trace.

    `expected`: the right answer(s) (a string may list aliases separated by "|"). `decoding`: the
    answer to diagnose; by default the first wrong one of RAG-Sequence, RAG-Token. `forced`: the
    teacher-forced expected answers (`score_texts`/`force_answers`); `deep`: `deep_search`'s result;
    `closed_book`: the generator's answer with no passage (default: the trace's, if it has one).
    """
    if isinstance(expected, str):
        expected = [a.strip() for a in expected.split("|")]
    expected = [a for a in (expected or []) if a and normalize_answer(a)]
    closed_book = closed_book if closed_book is not None else trace.closed_book
    decodings = [d for d in ("rag-sequence", "rag-token") if trace.answer(d) is not None]
    if not decodings:
        raise ValueError("the trace has no decoded answer to diagnose")
    if decoding is None:
        wrong = [d for d in decodings if expected and not exact_match(trace.answer(d).answer, expected)]
        decoding = (wrong or decodings)[0]
    cand = trace.answer(decoding)
    if cand is None:
        raise ValueError(f"the trace has no {decoding} answer")
    produced = AnswerScores.of(cand)
    if forced is not None and not produced.complete:
        produced = next((a for a in forced.by_label(decoding)), produced)
    forced_exp = forced.expected if forced is not None else None
    scores = [AnswerScores.of(c) for c in (trace.answer(d) for d in ("rag-token", "rag-sequence")) if c is not None]
    scores += forced_exp or []
    correct = exact_match(cand.answer, expected) if expected else None
    if correct:
        verdicts = [Verdict(code, False, "the answer matches the expected answer") for code in VERDICTS]
    else:
        need = "needs an expected answer"
        verdicts = [
            check_retrieval_miss(trace, expected, deep) if expected else Verdict("retrieval-miss", None, need),
            check_evidence_ignored(trace, expected, produced, forced_exp) if expected else Verdict("evidence-ignored", None, need),
            check_parametric(trace, produced, closed_book),
            check_frankenstein(trace, decoding),
            check_misleading(trace, expected, produced, forced_exp) if expected else Verdict("misleading-passage", None, need),
            check_search_error(trace, decoding, produced, forced_exp) if expected else Verdict("search-error", None, need),
        ]
    return Diagnosis(trace.query, decoding, cand.answer, list(expected), correct, verdicts, scores)


# ------------------------------------------------------------------------------- counterfactuals
@dataclass
class CfAnswer:
    decoding: str
    answer: str | None
    log_p: float  # under this decoding's marginal and the new prior
    exact: bool  # True: a full rerun would give this answer and this probability
    note: str = ""


@dataclass
class Counterfactual:
    keep: list[bool]  # which of the K passages stay
    scale: float
    log_prior: torch.Tensor  # (K,) the new log p(z|x); -inf where removed
    answers: dict[str, CfAnswer]
    table: list[dict]  # every known answer under the old and the new prior

    @property
    def prior(self) -> list[float]:
        return self.log_prior.exp().tolist()


def counterfactual_prior(trace: Trace, drop_ranks: Iterable[int] = (), k: int | None = None,
                         scale: float | None = None) -> tuple[torch.Tensor, list[bool], float]:
    """The prior after removing passages (1-based ranks), keeping the top `k`, or rescaling scores."""
    drop = set(int(r) for r in drop_ranks)
    keep = [h.rank not in drop and (k is None or h.rank <= k) for h in trace.hits]
    if not any(keep):
        raise ValueError("keep at least one passage")
    new_scale = float(scale) if scale is not None else float(trace.scale)
    if scale is None or math.isclose(new_scale, float(trace.scale)):
        base = trace.log_prior.double()  # (K,) exactly the stored prior
    else:
        base = marginals.log_prior(torch.tensor([h.score for h in trace.hits]), new_scale)  # (K,) as the pipeline computes it
    return marginals.drop_passages(base, torch.tensor(keep)), keep, new_scale


def _greedy_check(c: Candidate, lpz: torch.Tensor) -> tuple[str, int, int | None]:
    """Does greedy RAG-Token decoding under prior `lpz` still follow `c`'s path?

    Returns ("same", T, None), ("diverges", step, winning token) or ("uncertain", step, None).
    At step i a token's mixture Σ_z p(z|x) p(v|x,z,y_<i) is known exactly where v is in passage z's
    stored top-A, and bounded by the A-th value of z where it is not.
    """
    pz = lpz.double().exp()  # (K,)
    for i, chosen in enumerate(c.token_ids):
        ids = c.alt_ids[:, i, :]  # (K, A)
        vals = c.alt_logp[:, i, :].double().exp()  # (K, A)
        floor = vals.min(dim=-1).values  # (K,) any token outside z's top-A has p <= this
        tokens = set(int(t) for t in ids.flatten().tolist()) | {int(chosen)}
        lo, hi = {}, {}
        for v in tokens:
            known = torch.full_like(floor, float("nan"))  # (K,)
            hit = ids == v  # (K, A)
            rows = hit.any(dim=-1)  # (K,)
            known[rows] = (vals * hit).sum(dim=-1)[rows]
            if v == chosen:
                known = c.token_logp[:, i].double().exp()  # (K,) exact under every passage
            lo[v] = float((pz * torch.nan_to_num(known, nan=0.0)).sum())
            hi[v] = float((pz * torch.where(torch.isnan(known), floor, known)).sum())
        hi_unseen = float((pz * floor).sum())  # any token in no passage's top-A
        best_other = max([hi[v] for v in tokens if v != chosen] + [hi_unseen])
        if lo[chosen] > best_other:
            continue
        winner = max(tokens, key=lambda v: lo[v])
        rivals = max([hi[v] for v in tokens if v != winner] + [hi_unseen])
        if winner != chosen and lo[winner] > rivals:
            return "diverges", i, winner
        return "uncertain", i, None
    return "same", len(c.token_ids), None


def counterfactual(trace: Trace, drop_ranks: Iterable[int] = (), k: int | None = None, scale: float | None = None,
                   forced: ForcedAnswers | None = None) -> Counterfactual:
    """Both answers after removing passages / keeping the top k / rescaling — no model call."""
    lpz, keep, new_scale = counterfactual_prior(trace, drop_ranks, k, scale)
    kept = {z for z, on in enumerate(keep) if on}
    answers: dict[str, CfAnswer] = {}
    seq = trace.of("rag-sequence")
    if seq:
        # A passage's beams never depend on the prior or on other passages: a rerun's hypotheses
        # are those some kept passage produced (all of them, for scored toys with no sources).
        eligible = [c for c in seq if not c.sources or c.sources & kept] or seq
        best = max(eligible, key=lambda c: c.log_p_seq(lpz))
        answers["rag-sequence"] = CfAnswer("rag-sequence", best.answer, best.log_p_seq(lpz), all(c.sources for c in seq),
                                           "exact: the kept passages' hypotheses rescored under the new prior")
    tok = trace.answer("rag-token")
    if tok is not None:
        beams = int(trace.settings.get("beams", 1))
        known = {c.answer: c for c in trace.candidates}
        fallback = max(known.values(), key=lambda c: c.log_p_tok(lpz))
        if beams != 1:
            answers["rag-token"] = CfAnswer("rag-token", fallback.answer, fallback.log_p_tok(lpz), False,
                                            "beam search: the best of the known answers; a rerun may find another")
        else:
            status, step, winner = _greedy_check(tok, lpz)
            if status == "same":
                answers["rag-token"] = CfAnswer("rag-token", tok.answer, tok.log_p_tok(lpz), True,
                                                "exact: every token of the greedy path still wins its step")
            else:
                what = (f"token {trace_token(tok, winner)!r} now wins step {step}" if status == "diverges"
                        else f"step {step} cannot be decided from the stored top tokens")
                answers["rag-token"] = CfAnswer("rag-token", fallback.answer, fallback.log_p_tok(lpz), False,
                                                f"the greedy path changes: {what}; finishing it needs a model call "
                                                "(shown: the best of the known answers)")
    table = []
    rows = [AnswerScores.of(c) for c in trace.candidates] + (forced.items if forced else [])
    seen = set()
    for a in rows:
        key = (a.label if a.label == "expected" else "answer", a.text)
        if key in seen:
            continue
        seen.add(key)
        post = a.posterior(lpz)
        table.append({"answer": a.text, "kind": "expected" if a.label == "expected" else a.label,
                      "p_seq": _p(a.log_p_seq(lpz)), "p_tok": _p(a.log_p_tok(lpz)),
                      "p_seq_before": _p(a.log_p_seq(trace.log_prior)), "p_tok_before": _p(a.log_p_tok(trace.log_prior)),
                      "top_passage": int(post.argmax()) + 1, "top_posterior": float(post.max())})
    table.sort(key=lambda r: r["p_seq"], reverse=True)
    return Counterfactual(keep, new_scale, lpz, answers, table)


def trace_token(c: Candidate, token_id: int | None) -> str:
    """The text of a token seen among a candidate's stored alternatives."""
    if token_id is None:
        return "?"
    for z, steps in enumerate(c.alt_tokens):
        for i, alts in enumerate(steps):
            ids = c.alt_ids[z, i].tolist()
            if token_id in ids:
                return alts[ids.index(token_id)]
    if token_id in c.token_ids:
        return c.tokens[c.token_ids.index(token_id)]
    return str(token_id)
