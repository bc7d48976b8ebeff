"""The six verdict rules, each a check on numbers a trace (or one teacher-forced pass) already
holds, and the `Verdict` each returns: fired, not fired, or not judged, with the evidence that
decided it. `verdicts.diagnose` runs them all; the module docstring there says what each one means."""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import torch

from rag_core import marginals
from rag_core.analysis import matching
from rag_core.analysis.diagnosis.deep_search import DeepHit
from rag_core.analysis.diagnosis.verdict_evidence import Evidence
from rag_core.analysis.scoring import AnswerScores, total_variation
from rag_core.config import FLAT_RATIO, RAG_SEQUENCE, RAG_TOKEN
from rag_core.decoding import stepper
from rag_core.marginals import p_text, prob
from rag_core.trace import Trace, log_p_under

VERDICTS = {  # code -> title, in the order the UI lists them
    "retrieval-miss": "Retrieval miss",
    "evidence-ignored": "Evidence ignored",
    "parametric": "Parametric answer",
    "frankenstein": "Frankenstein answer",
    "misleading-passage": "Misleading passage",
    "search-error": "Search error",
}


@dataclass
class Verdict:
    code: str
    fired: bool | None  # None: could not be judged (the note says what is missing)
    summary: str
    evidence: Evidence | dict = field(
        default_factory=dict
    )  # verdict_evidence.EVIDENCE[code]; {} when not judged

    @property
    def title(self) -> str:
        return VERDICTS[self.code]


def _best_expected(expected: list[AnswerScores], z: int) -> AnswerScores:
    return max(expected, key=lambda a: float(a.doc_logp()[z]))


def rank_words(ranks: list[int]) -> str:
    """Ranks as words that cannot be read as a count.

    >>> rank_words([2]), rank_words([1, 3])
    ('rank 2', 'ranks 1 and 3')
    """
    if len(ranks) == 1:
        return f"rank {ranks[0]}"
    return f"ranks {', '.join(map(str, ranks[:-1]))} and {ranks[-1]}"


def check_retrieval_miss(trace: Trace, expected: list[str], deep: DeepHit | None) -> Verdict:
    ranks = [
        h.rank for h in trace.hits if matching.contains_answer(matching.passage_text(h.passage), expected)
    ]
    if ranks:
        return Verdict(
            "retrieval-miss",
            False,
            f"the retrieved passage{'s' if len(ranks) > 1 else ''} at "
            f"{rank_words(ranks)} contain{'' if len(ranks) > 1 else 's'} the expected answer",
            {"containing_ranks": ranks},
        )
    ev = {"containing_ranks": [], "k": trace.k}
    if deep is None:
        return Verdict(
            "retrieval-miss",
            True,
            f"none of the {trace.k} retrieved passages contains the expected answer "
            "(no deeper search was run)",
            ev,
        )
    ev.update(
        {
            "depth": deep.depth,
            "rank": deep.rank,
            "score": deep.score,
            "title": deep.title,
            "text": deep.text,
            "top_score": deep.top_score,
            "kth_score": deep.kth_score,
            "gap_top": deep.gap_top,
            "gap_kth": deep.gap_kth,
        }
    )
    if deep.rank is None:
        deeper = (
            f"any of the {deep.depth} passages of the whole index"
            if deep.whole_index
            else f"any of the top {deep.depth}"
        )
        return Verdict(
            "retrieval-miss",
            True,
            f"none of the {trace.k} retrieved passages contains the expected answer, nor {deeper}",
            ev,
        )
    return Verdict(
        "retrieval-miss",
        True,
        f"none of the {trace.k} retrieved passages contains the expected answer; the best passage that does "
        f"is rank {deep.rank} ({deep.title!r}), score {deep.score:.3f}: {deep.gap_top:.3f} below the top "
        f"passage and {deep.gap_kth:.3f} below the passage at rank {trace.k}",
        ev,
    )


def check_evidence_ignored(
    trace: Trace, expected: list[str], produced: AnswerScores, forced: list[AnswerScores] | None
) -> Verdict:
    have = [
        i
        for i, h in enumerate(trace.hits)
        if matching.contains_answer(matching.passage_text(h.passage), expected)
    ]
    if not have:
        return Verdict(
            "evidence-ignored", False, "no retrieved passage contains the expected answer to ignore"
        )
    if not forced:
        return Verdict("evidence-ignored", None, "needs the teacher-forced pass of the expected answer")
    post = produced.posterior(trace.log_prior)
    rows, ignored = [], []
    for z in have:
        best = _best_expected(forced, z)
        lp_exp, lp_prod = float(best.doc_logp()[z]), float(produced.doc_logp()[z])
        rows.append(
            {
                "rank": z + 1,
                "title": trace.hits[z].passage.title,
                "prior": float(trace.prior[z]),
                "posterior": float(post[z]),
                "expected": best.text,
                "p_expected": prob(lp_exp),
                "p_produced": prob(lp_prod),
                "prefers": "produced" if lp_prod > lp_exp else "expected",
            }
        )
        if lp_prod > lp_exp:
            ignored.append(z)
    ev = {"passages": rows}
    if not ignored:
        return Verdict(
            "evidence-ignored",
            False,
            "under every passage that contains it, the generator prefers the "
            "expected answer to the produced one (the mixture lost it elsewhere)",
            ev,
        )
    z = max(ignored, key=lambda i: trace.prior[i])
    r = next(row for row in rows if row["rank"] == z + 1)
    return Verdict(
        "evidence-ignored",
        True,
        f"the passage at rank {z + 1} ({r['title']!r}) contains {r['expected']!r}, "
        "yet under it the generator gives "
        f"{produced.text!r} p={p_text(r['p_produced'])} against p={p_text(r['p_expected'])} for "
        f"{r['expected']!r}",
        ev,
    )


def check_parametric(trace: Trace, produced: AnswerScores, closed_book: str | None) -> Verdict:
    prior = torch.as_tensor(trace.prior, dtype=torch.float64)
    post = produced.posterior(trace.log_prior)
    doc_lp = produced.doc_logp()  # (K,) log p(y|x,z)
    doc_p = [prob(float(v)) for v in doc_lp]
    spread = float(doc_lp.max() - doc_lp.min())  # log of the max/min ratio over passages
    ratio = math.exp(spread) if math.isfinite(spread) else math.inf
    ev = {
        "ratio": ratio,
        "p_answer_given_passage": doc_p,
        "posterior": post.tolist(),
        "prior": prior.tolist(),
        "tv_posterior_prior": total_variation(post, prior),
        "closed_book": closed_book,
        "threshold": FLAT_RATIO,
    }
    if trace.k < 2:
        return Verdict("parametric", None, "with one passage, flat responsibilities cannot be told apart", ev)
    lo, hi = min(doc_p), max(doc_p)
    if not (produced.complete and ratio <= FLAT_RATIO):
        return Verdict(
            "parametric",
            False,
            f"the passages move the answer: p(y|x,z) ranges from {p_text(lo)} to {p_text(hi)} "
            "over the passages",
            ev,
        )
    if closed_book is None:
        return Verdict(
            "parametric",
            None,
            f"the answer is about as likely under every passage (p(y|x,z) from {p_text(lo)} "
            f"to {p_text(hi)}); closed-book was not run",
            ev,
        )
    same = matching.exact_match(closed_book, [produced.text]) or matching.contains_answer(
        closed_book, [produced.text]
    )
    ev["closed_book_agrees"] = same
    if not same:
        return Verdict(
            "parametric",
            False,
            f"the answer is about as likely under every passage, but closed-book says {closed_book!r}",
            ev,
        )
    return Verdict(
        "parametric",
        True,
        f"{produced.text!r} is about as likely under every passage (p(y|x,z) from "
        f"{p_text(lo)} to {p_text(hi)}, a factor {ratio:.1f}) and closed-book gives it too",
        ev,
    )


def check_frankenstein(trace: Trace, decoding: str) -> Verdict:
    tok, seq = trace.answer(RAG_TOKEN), trace.answer(RAG_SEQUENCE)
    if decoding != RAG_TOKEN:
        return Verdict("frankenstein", False, "a Frankenstein answer is a RAG-Token answer")
    if tok is None or seq is None:
        return Verdict("frankenstein", None, "needs both RAG-Token and RAG-Sequence answers")
    lpz = trace.log_prior
    ev = {
        "rag_token": tok.answer,
        "rag_sequence": seq.answer,
        "p_tok_token": prob(tok.log_p_tok(lpz)),
        "p_seq_token": prob(tok.log_p_seq(lpz)),
        "p_tok_sequence": prob(seq.log_p_tok(lpz)),
        "p_seq_sequence": prob(seq.log_p_seq(lpz)),
    }
    if matching.normalize_answer(tok.answer) == matching.normalize_answer(seq.answer):
        return Verdict("frankenstein", False, "RAG-Token and RAG-Sequence give the same answer", ev)
    resp = marginals.responsibilities(lpz, tok.token_logp)  # (K, T)
    prior = lpz.double().exp()  # (K,)
    # The same rule as the Token vs Sequence page: a step names its source only when it moves the
    # responsibilities away from the prior (an end token, or a word every passage predicts, does not).
    top = stepper.top_sources(lpz, tok.token_logp)
    steps, sources = [], []
    for i, z in enumerate(top):
        zz = int(resp[:, i].argmax())
        steps.append(
            {
                "step": i,
                "token": tok.tokens[i],
                "rank": zz + 1,
                "responsibility": float(resp[zz, i]),
                "prior": float(prior[zz]),
                "decided": z is not None,
            }
        )
        if z is not None and z not in sources:
            sources.append(z)
    ev["steps"] = steps
    ev["sources"] = [z + 1 for z in sources]
    if tok.log_p_seq(lpz) >= seq.log_p_seq(lpz):
        return Verdict(
            "frankenstein",
            False,
            "RAG-Sequence scores the RAG-Token answer at least as high as its own "
            "(a search difference, not a stitched answer)",
            ev,
        )
    if len(sources) < 2:
        return Verdict("frankenstein", False, "RAG-Token's answer draws on one passage only", ev)
    parts = "; ".join(
        f"{s['token'].strip()!r} from rank {s['rank']} (r={s['responsibility']:.2f})"
        for s in steps
        if s["decided"]
    )
    return Verdict(
        "frankenstein",
        True,
        f"RAG-Token stitched {tok.answer!r} from the passages at {rank_words(ev['sources'])}: {parts}. "
        f"RAG-Sequence says {seq.answer!r} (p_seq {p_text(ev['p_seq_sequence'])} against "
        f"{p_text(ev['p_seq_token'])} for the stitched answer, whose p_tok is {p_text(ev['p_tok_token'])})",
        ev,
    )


def check_misleading(
    trace: Trace, expected: list[str], produced: AnswerScores, forced: list[AnswerScores] | None
) -> Verdict:
    post = produced.posterior(trace.log_prior)
    z = int(post.argmax())
    h = trace.hits[z]
    text = matching.passage_text(h.passage)
    has_exp = matching.contains_answer(text, expected)
    has_prod = bool(matching.normalize_answer(produced.text)) and matching.contains_words(text, produced.text)
    ev = {
        "rank": z + 1,
        "title": h.passage.title,
        "prior": float(trace.prior[z]),
        "posterior": float(post[z]),
        "contains_expected": has_exp,
        "contains_produced": has_prod,
        "text": h.passage.text,
        "p_produced": prob(float(produced.doc_logp()[z])),
    }
    if forced:
        ev["p_expected"] = prob(float(_best_expected(forced, z).doc_logp()[z]))
    if has_exp:
        return Verdict(
            "misleading-passage",
            False,
            f"the top-posterior passage (rank {z + 1}, {h.passage.title!r}) contains the expected answer",
            ev,
        )
    if not has_prod:
        return Verdict(
            "misleading-passage",
            False,
            f"the top-posterior passage (rank {z + 1}, {h.passage.title!r}) says "
            "neither the expected nor the produced answer",
            ev,
        )
    return Verdict(
        "misleading-passage",
        True,
        f"the passage the answer leans on most (rank {z + 1}, {h.passage.title!r}, posterior {post[z]:.2f}) "
        f"says {produced.text!r}, not the expected answer",
        ev,
    )


def check_search_error(
    trace: Trace, decoding: str, produced: AnswerScores, forced: list[AnswerScores] | None
) -> Verdict:
    if not forced:
        return Verdict("search-error", None, "needs the teacher-forced pass of the expected answer")
    lpz = trace.log_prior
    score = lambda a: log_p_under(a, decoding, lpz)  # noqa: E731
    name = "p_seq" if decoding == RAG_SEQUENCE else "p_tok"
    best = max(forced, key=score)
    lp_exp, lp_prod = score(best), score(produced)
    ev = {
        "marginal": name,
        "expected": best.text,
        "p_expected": prob(lp_exp),
        "p_produced": prob(lp_prod),
        "beams": trace.settings.beams or 1,
    }
    if lp_exp <= lp_prod:
        return Verdict(
            "search-error",
            False,
            f"the model itself prefers the produced answer ({name} {p_text(prob(lp_prod))} "
            f"against {p_text(prob(lp_exp))} for {best.text!r})",
            ev,
        )
    return Verdict(
        "search-error",
        True,
        f"the model scores {best.text!r} higher ({name} {p_text(prob(lp_exp))}) than the "
        f"produced {produced.text!r} ({p_text(prob(lp_prod))}): decoding missed it; more beams may find it",
        ev,
    )
