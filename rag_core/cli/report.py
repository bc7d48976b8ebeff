"""Plain-text and JSON summaries of a trace, for the command line."""

from __future__ import annotations

from rag_core import marginals
from rag_core.analysis.diagnosis.confidence import Confidence
from rag_core.config import RAG_SEQUENCE, RAG_TOKEN, STUFFED
from rag_core.decoding.stuffed import leans_on, p_without, worth
from rag_core.marginals import prob
from rag_core.trace import Trace, log_p_under


def ask_json(trace: Trace, confidence: dict[str, Confidence] | None = None) -> dict:
    """The --json summary; `confidence`: the rule per decoding's chosen answer (key "confidence")."""
    lpz = trace.log_prior
    answers = {}
    for c in trace.candidates:
        answers.setdefault(c.decoding, []).append(
            {
                "answer": c.answer,
                "p_seq": prob(c.log_p_seq(lpz)),
                "p_tok": prob(c.log_p_tok(lpz)),
                "finished": c.finished,
                "posterior": marginals.citation(lpz, c.token_logp).tolist(),
            }
        )
    out = {
        "query": trace.question,
        "index": trace.index,
        "k": trace.k,
        "scale": trace.scale,
        "settings": trace.settings.to_dict(),
        "closed_book": trace.closed_book,
        "answers": answers,
        "passages": [
            {
                "rank": h.rank,
                "id": h.passage.id,
                "title": h.passage.title,
                "score": h.score,
                "prior": float(p),
                "text": h.passage.text,
            }
            for h, p in zip(trace.hits, trace.prior)
        ],
    }
    if confidence is not None:
        out["confidence"] = {d: c.to_json() for d, c in confidence.items()}
    if trace.stuffed is not None:
        out["stuffed"] = stuffed_json(trace)
    return out


def stuffed_json(trace: Trace) -> dict:
    """The stuffed reading: its answers with p(y | x, every passage), and for the chosen one each
    passage's leave-one-out p(y | x, all but z) and its worth, log p(y|x, all) − log p(y|x, all but z)."""
    cands = trace.of(STUFFED)
    out: dict = {
        "answers": [
            {"answer": c.answer, "p": prob(log_p_under(c, STUFFED, trace.log_prior)), "finished": c.finished}
            for c in cands
        ],
        "leave_one_out": [],
    }
    loo = trace.stuffed.leave_one_out
    if cands and loo is not None:
        w = worth(cands[0].token_logp[0], loo)  # (K,)
        out["leave_one_out"] = [
            {"rank": h.rank, "title": h.passage.title, "p_without": p, "worth": float(v)}
            for h, p, v in zip(trace.hits, p_without(loo), w)
        ]
        out["top_passage"] = trace.hits[leans_on(cands[0].token_logp[0], loo)].rank
    return out


def stuffed_text(trace: Trace) -> list[str]:
    """The stuffed reading's lines of the text report: the answer and what each passage is worth."""
    s = stuffed_json(trace)
    if not s["answers"]:
        return [f"{STUFFED:>13}: (no answer)"]
    best = s["answers"][0]
    lines = [
        f"{STUFFED:>13}: {best['answer']!s:<30} p={best['p']:.3f} (the {trace.k} passages in one prompt)"
        + ("" if best["finished"] else " (cut at max-new-tokens)")
    ]
    for row in s["leave_one_out"]:
        lines.append(
            f"{'':>13}  without #{row['rank']}: p={row['p_without']:.3f}, worth {row['worth']:+.3f} nats"
            f"  {row['title']}"
        )
    return lines


def ask_text(trace: Trace, confidence: dict[str, Confidence] | None = None) -> str:
    lpz = trace.log_prior
    lines = [
        f"Q: {trace.question}",
        f"index {trace.index} · K={trace.k} · scale {trace.scale:g} · "
        f"{trace.settings.rescore or ''} rescoring · beams {trace.settings.beams or 1}",
    ]
    for notice in trace.settings.notices or ():
        lines.append(f"note: {notice}")
    posts = {}
    for decoding in (RAG_TOKEN, RAG_SEQUENCE):
        cands = trace.of(decoding)
        if not cands:
            continue
        best = cands[0]
        posts[decoding] = marginals.citation(lpz, best.token_logp).tolist()
        lines.append(
            f"{decoding:>13}: {best.answer!s:<30} p_seq={prob(best.log_p_seq(lpz)):.3f} "
            f"p_tok={prob(best.log_p_tok(lpz)):.3f}" + ("" if best.finished else " (cut at max-new-tokens)")
        )
        if confidence and decoding in confidence and confidence[decoding].low:
            lines.append(f"{'':>13}  low confidence: {confidence[decoding].summary()}")
        for c in cands[1:4]:
            lines.append(
                f"{'':>13}  also {c.answer!s:<25} p_seq={prob(c.log_p_seq(lpz)):.3f} "
                f"p_tok={prob(c.log_p_tok(lpz)):.3f}"
            )
    if trace.stuffed is not None:
        lines += stuffed_text(trace)
    if trace.closed_book is not None:
        lines.append(f"{'closed-book':>13}: {trace.closed_book}")
    head = (
        f"{'rank':>4} {'score':>7} {'prior':>6}"
        + "".join(f" {'post/' + d[4:7]:>8}" for d in posts)
        + "  passage"
    )
    lines += ["", head]
    for i, (h, p) in enumerate(zip(trace.hits, trace.prior)):
        post = "".join(f" {posts[d][i]:8.3f}" for d in posts)
        text = " ".join(h.passage.text.split()[:12])
        lines.append(f"{h.rank:>4} {h.score:7.3f} {p:6.3f}{post}  {h.passage.title}: {text}…")
    return "\n".join(lines)
