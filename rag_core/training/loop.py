"""The training loop: RAG's negative log marginal likelihood over the top K, minimised end to end.

Each question is retrieved afresh with the current query encoder (MIPS over the frozen index),
its prior is `marginals.log_prior` of the scores, its gold answer (the first one listed) is
teacher-forced under the K passages, and the loss is −log p(y|x) under the chosen marginal.
- The query encoder learns through the prior only: its signal is the analytic gradient of
  `gradient.py`, scale · Σ_z bracket(z) d(z), handed to autograd at q(x), so the loop runs the
  very formula the Train page draws. Passage vectors and the index never change.
- The generator learns through LoRA adapters (`lora.py`) by autograd of the same loss.
- With `unlikelihood` > 0, a question that records distractors (other candidates of the kind asked
  that its passage names) adds that weight times −log(1 − p(d|x)) per distractor d, under the same
  marginal and the same K passages: the neighbour-name failure, pushed down where the model makes
  the mistake (`gradient.unlikelihood`).
With only the query encoder training the generator is fixed, so a question's answer is teacher-forced
under its top K once and remembered: only a change of the top K (a passage entering) costs a pass.

This modifies the models it is given (an app must hand it its own copy).
"""

from __future__ import annotations

import random
import time
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field

import numpy as np
import torch

from rag_core import marginals
from rag_core.analysis.evaluation.questions import EvalQuestion
from rag_core.config import Progress
from rag_core.generators.causal import PROMPT_STYLES, CausalGenerator
from rag_core.pipeline import Models
from rag_core.retrieval.index import PassageIndex
from rag_core.training import checkpoint, lora
from rag_core.training.conditionals import answer_token_logp
from rag_core.training.gradient import (
    MARGINALS,
    bracket,
    nll,
    query_gradient,
    unlikelihood,
    unlikelihood_weight,
)
from rag_core.training.query import query_model, query_tensor

PARTS = ("query", "generator", "both")
DEFAULT_LR = {"query": 1e-5, "generator": 3e-4}  # full fine-tuning of a BERT tower; LoRA adapters
CLIP = 1.0  # gradient norm clip per part: one odd question cannot throw the weights far


@dataclass(frozen=True)
class TrainSettings:
    part: str = "query"  # what trains: "query" (the query encoder), "generator" (LoRA) or "both"
    marginal: str = "sequence"  # whose likelihood: "sequence" (RAG-Sequence) or "token" (RAG-Token)
    k: int = 5  # passages retrieved per question, as at inference
    steps: int = 50  # optimiser steps
    batch: int = 4  # questions per step
    lr: float | None = None  # learning rate of every part that trains; None = DEFAULT_LR per part
    lora_rank: int = lora.RANK  # adapter rank
    seed: int = 0  # question order and adapter initialisation
    checkpoint_every: int = 10  # steps between checkpoints (and one at the end)
    scale: float | None = None  # retriever scale; None = the encoder's own
    prompt: str | None = (
        None  # a causal generator's prompt while training ("plain" or "few-shot"); None = its own
    )
    unlikelihood: float = (
        0.0  # weight of −log(1 − p(d|x)) per recorded distractor d; 0 = the likelihood alone
    )

    @property
    def parts(self) -> tuple[str, ...]:
        return ("query", "generator") if self.part == "both" else (self.part,)

    def lr_of(self, part: str) -> float:
        return float(self.lr if self.lr is not None else DEFAULT_LR[part])

    def validate(self) -> TrainSettings:
        if self.part not in PARTS:
            raise ValueError(f"part must be query, generator or both, got {self.part!r}")
        if self.marginal not in MARGINALS:
            raise ValueError(f"marginal must be sequence or token, got {self.marginal!r}")
        for name in ("k", "steps", "batch", "lora_rank", "checkpoint_every"):
            if not isinstance(getattr(self, name), int) or getattr(self, name) < 1:
                raise ValueError(f"{name} must be a whole number of at least 1, got {getattr(self, name)!r}")
        if self.prompt is not None and self.prompt not in PROMPT_STYLES:
            raise ValueError(f"prompt must be one of {', '.join(PROMPT_STYLES)}, got {self.prompt!r}")
        if self.lr is not None and not 0 < self.lr < 1:
            raise ValueError(f"learning rate must be between 0 and 1, got {self.lr!r}")
        if not 0 <= self.unlikelihood < float("inf"):
            raise ValueError(f"the unlikelihood weight must be 0 or more, got {self.unlikelihood!r}")
        return self

    def to_dict(self) -> dict:
        return asdict(self)


def batch_for_step(step: int, n: int, batch: int, seed: int) -> list[int]:
    """The questions of one step: epochs of seeded shuffles, a function of the step number alone,
    so a resumed run takes exactly the batches the uninterrupted run would.

    >>> steps = [batch_for_step(s, 3, 2, seed=0) for s in range(3)]   # 6 draws: two epochs of 3
    >>> steps
    [[0, 2], [1, 1], [2, 0]]
    >>> sorted(steps[0] + steps[1][:1]), sorted(steps[1][1:] + steps[2])   # each epoch is a permutation
    ([0, 1, 2], [0, 1, 2])
    """
    out = []
    for j in range(step * batch, (step + 1) * batch):
        epoch, pos = divmod(j, n)
        order = list(range(n))
        random.Random(seed * 1_000_003 + epoch).shuffle(order)
        out.append(order[pos])
    return out


def doc_vectors(index: PassageIndex, rows: np.ndarray) -> torch.Tensor:
    """d(z) of retrieved rows as the index scores them (float32 from FAISS where it keeps them): (K, D)."""
    try:
        vecs = index.index.reconstruct_batch(np.asarray(rows, dtype=np.int64))  # (K, D)
    except RuntimeError:  # an index that cannot reconstruct: the stored float16 copy
        vecs = index.vectors[rows]
    return torch.from_numpy(np.asarray(vecs, dtype=np.float32)).double()  # (K, D)


@dataclass
class Run:
    """What a training run holds in memory between steps."""

    models: Models
    index: PassageIndex
    questions: list[EvalQuestion]
    answers: list[list[int]]  # gold answer token ids, one list a question
    distractors: list[list[list[int]]]  # each question's distractors' token ids ([] when the term is off)
    settings: TrainSettings
    scale: float
    adapted: lora.Adapted | None = None  # the generator's adapters, when it trains
    optimizers: dict[str, torch.optim.Optimizer] = field(default_factory=dict)
    remembered: dict = field(
        default_factory=dict
    )  # (question, top-K ids) -> (K, T) conditionals of a frozen generator
    losses: list[float] = field(default_factory=list)
    step: int = 0
    seconds: float = 0.0
    indexes: dict[str, PassageIndex] = field(
        default_factory=dict
    )  # other indexes named by questions' `index`

    def index_of(self, qi: int) -> PassageIndex:
        """The index question qi is retrieved from: the one its line names, else the run's own."""
        return self.indexes.get(self.questions[qi].index, self.index)

    def params(self, part: str) -> list[torch.nn.Parameter]:
        if part == "query":
            return list(query_model(self.models.encoder).parameters())
        return self.adapted.parameters()


def distractor_ids(gen, q: EvalQuestion) -> list[list[int]]:
    """The token ids of q's distractors, leaving out any that reads as one of its gold answers."""
    gold = [gen.encode_answer(a) for a in q.answers]
    return [ids for ids in (gen.encode_answer(d) for d in q.distractors) if ids not in gold]


def start_run(
    models: Models,
    index: PassageIndex,
    questions: Sequence[EvalQuestion],
    settings: TrainSettings,
    indexes: dict[str, PassageIndex] | None = None,
) -> Run:
    """Attach adapters where the generator trains and make one Adam optimiser per part.
    `indexes`: the other indexes questions name (a question whose `index` is not there uses `index`)."""
    settings = settings.validate()
    if not questions:
        raise ValueError("no training question")
    gen = models.generator
    if settings.prompt is not None:
        if not isinstance(gen, CausalGenerator):
            raise ValueError("--prompt applies to a causal generator only")
        gen.prompt_style = settings.prompt  # the prompt the trained weights will read
    run = Run(
        models,
        index,
        list(questions),
        [gen.encode_answer(q.answers[0]) for q in questions],
        [distractor_ids(gen, q) if settings.unlikelihood else [] for q in questions],
        settings,
        float(settings.scale if settings.scale is not None else models.encoder.default_scale),
        indexes=dict(indexes or {}),
    )
    if "generator" in settings.parts:
        run.adapted = lora.attach(gen, settings.lora_rank, settings.seed)
    for part in settings.parts:
        run.optimizers[part] = torch.optim.Adam(run.params(part), lr=settings.lr_of(part))
    return run


def conditionals(run: Run, qi: int, passages, answer: list[int] | None = None) -> torch.Tensor:
    """(K, T) log p(y_i|x,z,y_<i) of question qi's answer (or of `answer`, one of its distractors);
    with a graph when the generator trains.

    A frozen generator's numbers are remembered per (question, top-K list): one batched pass when
    the list changes, none while it stays. Keyed by the whole list, not per passage, so the numbers
    never depend on which passages happened to share a batch earlier, and a resumed run repeats an
    uninterrupted one to the last bit."""
    q, ans = run.questions[qi], run.answers[qi] if answer is None else answer
    if run.adapted is not None:
        return answer_token_logp(run.models.generator, q.question, passages, ans)  # (K, T)
    key = (qi, tuple(p.id for p in passages)) + (() if answer is None else (tuple(answer),))
    if key not in run.remembered:
        with torch.no_grad():
            run.remembered[key] = answer_token_logp(run.models.generator, q.question, passages, ans)  # (K, T)
    return run.remembered[key]


@dataclass
class Terms:
    """One question's piece of the loss, and what its gradients are made from."""

    loss: torch.Tensor  # () −log p(y|x), plus the weighted unlikelihood of the distractors
    q: torch.Tensor  # (D,) q(x), with a graph when the query encoder trains
    d: torch.Tensor  # (K, D) d(z) of the retrieved passages (frozen)
    log_pz: torch.Tensor  # (K,) log p(z|x), detached from q
    token_logp: torch.Tensor  # (K, T) log p(y_i|x,z,y_<i), with a graph when the generator trains
    distractor_logp: list[torch.Tensor] = field(default_factory=list)  # (K, T_d) per distractor d


def question_terms(run: Run, qi: int) -> Terms:
    """Retrieve with the current q(x), then the prior, the conditionals and −log p(y|x)."""
    s = run.settings
    with torch.set_grad_enabled(torch.is_grad_enabled() and "query" in s.parts):
        q = query_tensor(run.models.encoder, [run.questions[qi].question])[0]  # (D,)
    index = run.index_of(qi)
    _, rows = index.search(q.detach().float().cpu().numpy()[None], s.k)  # (1, K)
    rows = rows[0][rows[0] >= 0]  # (K,)
    d = doc_vectors(index, rows)  # (K, D)
    log_pz = marginals.log_prior(d @ q.detach().cpu().double(), run.scale)  # (K,)
    passages = [index.passages[int(r)] for r in rows]
    token_logp = conditionals(run, qi, passages)  # (K, T)
    loss = nll(s.marginal, log_pz, token_logp)  # ()
    others = [conditionals(run, qi, passages, ids) for ids in run.distractors[qi]]  # (K, T_d) each
    for other in others:
        loss = loss + s.unlikelihood * unlikelihood(s.marginal, log_pz, other)  # ()
    return Terms(loss, q, d, log_pz, token_logp, others)


def retriever_gradient(run: Run, t: Terms) -> torch.Tensor:
    """−∂ loss / ∂q(x) (the direction the query moves): the likelihood's pull, less each
    distractor's pull weighted by its unlikelihood weight p/(1 − p): (D,)."""
    s = run.settings
    grad = query_gradient(bracket(s.marginal, t.log_pz, t.token_logp.detach()), t.d, run.scale)  # (D,)
    for other in t.distractor_logp:
        other = other.detach()  # (K, T_d)
        pull = query_gradient(bracket(s.marginal, t.log_pz, other), t.d, run.scale)  # (D,)
        grad = grad - s.unlikelihood * unlikelihood_weight(s.marginal, t.log_pz, other) * pull  # (D,)
    return grad


def question_loss(run: Run, qi: int, weight: float) -> float:
    """One question's loss; its gradients (times `weight`) are added to every training part."""
    t = question_terms(run, qi)
    if run.adapted is not None:
        (weight * t.loss).backward()
    if "query" in run.settings.parts:
        grad = retriever_gradient(run, t)  # (D,)
        t.q.backward((-weight * grad).to(t.q.device, t.q.dtype))  # descend: the loss falls along grad
    return float(t.loss.detach())


def take_step(run: Run) -> float:
    """One optimiser step over the step's batch; returns the batch's mean loss."""
    s = run.settings
    for opt in run.optimizers.values():
        opt.zero_grad(set_to_none=True)
    batch = batch_for_step(run.step, len(run.questions), s.batch, s.seed)
    loss = sum(question_loss(run, qi, 1.0 / len(batch)) for qi in batch) / len(batch)
    for part, opt in run.optimizers.items():
        torch.nn.utils.clip_grad_norm_(run.params(part), CLIP)
        opt.step()
    run.step += 1
    run.losses.append(loss)
    return loss


# ------------------------------------------------------------------------------ checkpoint, drive
RESUMABLE = ("steps", "checkpoint_every")  # settings a resumed run may change; the rest must match


def snapshot(run: Run) -> checkpoint.Checkpoint:
    weights = {}
    if "query" in run.settings.parts:
        weights["query"] = checkpoint.trainable_tensors(query_model(run.models.encoder))
    if run.adapted is not None:
        weights["generator"] = run.adapted.state()
    return checkpoint.Checkpoint(
        run.step,
        list(run.losses),
        weights,
        {part: opt.state_dict() for part, opt in run.optimizers.items()},
        run.settings.to_dict(),
        run.seconds,
    )


def settings_mismatch(saved: dict, settings: TrainSettings) -> str | None:
    """Why a run made with `saved` settings cannot be continued under `settings` (None: it can)."""
    ours, defaults = settings.to_dict(), TrainSettings().to_dict()
    # a setting the saved run predates was at its default then
    differ = [k for k in ours if k not in RESUMABLE and saved.get(k, defaults[k]) != ours[k]]
    if not differ:
        return None
    k = differ[0]
    return (
        f"the run was made with {k} = {saved.get(k)!r}, not {ours[k]!r}: resume with the same settings, "
        "or start afresh with --force"
    )


def restore(run: Run, ckpt: checkpoint.Checkpoint) -> None:
    """Continue from a checkpoint made under the same settings (more steps allowed)."""
    why = settings_mismatch(ckpt.settings, run.settings)
    if why:
        raise ValueError(why)
    if "query" in ckpt.weights:
        checkpoint.restore_tensors(query_model(run.models.encoder), ckpt.weights["query"])
    if run.adapted is not None:
        run.adapted.load_state(ckpt.weights["generator"])
    for part, opt in run.optimizers.items():
        opt.load_state_dict(ckpt.optimizers[part])
    run.step, run.losses, run.seconds = ckpt.step, list(ckpt.losses), ckpt.seconds


def train(
    run: Run,
    folder,
    progress: Progress | None = None,
    should_stop: Callable[[], bool] | None = None,
    on_step: Callable[[int, float], None] | None = None,
) -> bool:
    """Take steps until `settings.steps`, checkpointing into `folder`; True when stopped early.
    `on_step(step, loss)` hears every step's loss as it is taken (the Train page's live curve).

    `should_stop` is asked before each step (a stop button, a first Ctrl-C): the run then saves its
    checkpoint at that step boundary, so nothing done is lost and `--resume` continues from it."""
    s = run.settings
    t0, before = time.perf_counter(), run.seconds
    while run.step < s.steps:
        if should_stop is not None and should_stop():
            break
        loss = take_step(run)
        run.seconds = before + time.perf_counter() - t0
        if on_step:
            on_step(run.step, loss)
        if progress:
            progress(f"step {run.step}/{s.steps} · loss {loss:.3f}", run.step / s.steps)
        if run.step % s.checkpoint_every == 0 or run.step == s.steps:
            checkpoint.save(folder, snapshot(run))
    stopped = run.step < s.steps
    if stopped:
        checkpoint.save(folder, snapshot(run))
    return stopped
