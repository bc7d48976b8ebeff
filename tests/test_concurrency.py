"""The Eval and Index swap paths share the app's models with every other session: run from several
threads at once, they never use the generator at the same time (`Models.lock`, taken on the one
pipeline path), and each thread gets exactly the answers it gets alone.

Every generator call that runs the model is watched, the heaviest included: the prompt pass
(`prepare_rows`, also the closed-book pass's), the packed teacher forcing of thorough rescoring and
of the gold answers (`teacher_force_packed`), and the decoding steps."""

import threading
import time

from rag_core.analysis.evaluation.questions import EvalQuestion
from rag_core.analysis.evaluation.runs import evaluate_question
from rag_core.config import AnswerSettings
from rag_core.index_swap import run as index_swap_run
from rag_core.index_swap.store import leaders_frame
from rag_core.pipeline import Models, Pipeline


class OneAtATime:
    """A generator proxy that counts calls made while another call is still running. A guarded
    method calls its siblings on the generator itself, not through the proxy, so a call never
    overlaps its own inner calls."""

    GUARDED = ("prepare", "prepare_rows", "select", "advance", "teacher_force", "teacher_force_packed")

    def __init__(self, gen):
        self._gen, self._busy = gen, threading.Lock()
        self.overlaps = 0
        self.calls: dict[str, int] = {}
        self.closed_book_passes = 0  # prompt passes holding a row with no passage

    def __getattr__(self, name):
        attr = getattr(self._gen, name)
        if name not in self.GUARDED:
            return attr

        def guarded(*args, **kwargs):
            if not self._busy.acquire(blocking=False):
                self.overlaps += 1
                self._busy.acquire()
            try:
                self.calls[name] = self.calls.get(name, 0) + 1
                if name == "prepare_rows":
                    rows = args[0] if args else kwargs["rows"]
                    self.closed_book_passes += any(passage is None for _, passage in rows)
                time.sleep(0.002)  # widen the window an unlocked caller would slip into
                return attr(*args, **kwargs)
            finally:
                self._busy.release()

        return guarded


def test_eval_and_index_swap_from_several_threads(tiny_llama_pipeline):
    """The real retriever, indexes and prompts, read by the tiny Llama: which calls the lock guards
    does not depend on the model's weights."""
    on = tiny_llama_pipeline
    guard = OneAtATime(on.models.generator)
    models = Models(on.models.encoder, guard, on.models.device)
    pipe = Pipeline(models, on.index_name, on.index, on.settings, on.stack)
    pipes = index_swap_run.year_pipelines(lambda: pipe)
    cfg = AnswerSettings(k=2, max_new_tokens=4)
    questions = [
        EvalQuestion("Who wrote Moby-Dick?", ["Herman Melville"]),
        EvalQuestion("Who painted the Mona Lisa?", ["Leonardo da Vinci"]),
    ]
    leaders = leaders_frame(2).to_dict("records")

    def eval_answers(q):
        r = evaluate_question(pipe, q, cfg)
        return {m: (v.answer, v.verdicts) for m, v in r.modes.items()}

    def swap_answers(leader):
        rec = index_swap_run.positions_records(pipes, [leader], [cfg])[0][0]
        return [(r["index"], r["decoding"], r["answer"]) for r in rec["rows"]] + [rec["closed"]["answer"]]

    jobs = [(eval_answers, q) for q in questions] + [(swap_answers, leader) for leader in leaders]
    alone = [fn(arg) for fn, arg in jobs]
    assert guard.overlaps == 0
    # the heaviest calls are among those watched: a path that skipped the lock there would show
    assert {"prepare_rows", "teacher_force_packed", "advance"} <= set(guard.calls), guard.calls
    assert guard.closed_book_passes > 0
    together, errors = [None] * len(jobs), []

    def work(i, fn, arg):
        try:
            together[i] = fn(arg)
        except Exception as e:  # noqa: BLE001 - any failure in a thread fails the test below
            errors.append(repr(e))

    threads = [threading.Thread(target=work, args=(i, fn, arg)) for i, (fn, arg) in enumerate(jobs)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=600)
    assert not errors
    assert guard.overlaps == 0, f"{guard.overlaps} generator calls overlapped another"
    assert together == alone
