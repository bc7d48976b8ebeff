"""The Eval and Index swap paths share the app's models with every other session: run from several
threads at once, they never use the generator at the same time (`Models.lock`, taken on the one
pipeline path), and each thread gets exactly the answers it gets alone."""
import threading
import time

from rag_core.analysis.evaluation import evaluate_question
from rag_core.analysis.questions import EvalQuestion
from rag_core.config import Config
from rag_core.hotswap import run as hotswap
from rag_core.hotswap.cache import leaders_frame
from rag_core.pipeline import Models, Pipeline


class OneAtATime:
    """A generator proxy that counts calls made while another call is still running."""

    GUARDED = ("prepare", "select", "advance", "teacher_force")

    def __init__(self, gen):
        self._gen, self._busy = gen, threading.Lock()
        self.overlaps = self.calls = 0

    def __getattr__(self, name):
        attr = getattr(self._gen, name)
        if name not in self.GUARDED:
            return attr

        def guarded(*args, **kwargs):
            if not self._busy.acquire(blocking=False):
                self.overlaps += 1
                self._busy.acquire()
            try:
                self.calls += 1
                time.sleep(0.002)  # widen the window an unlocked caller would slip into
                return attr(*args, **kwargs)
            finally:
                self._busy.release()

        return guarded


def test_eval_and_index_swap_from_several_threads(default_pipeline):
    guard = OneAtATime(default_pipeline.models.generator)
    models = Models(default_pipeline.models.encoder, guard, default_pipeline.models.device)
    pipe = Pipeline(models, default_pipeline.index_name, default_pipeline.index, default_pipeline.cfg)
    pipes = hotswap.year_pipelines(lambda: pipe)
    cfg = Config(k=2, max_new_tokens=4)
    questions = [EvalQuestion("Who wrote Moby-Dick?", ["Herman Melville"]),
                 EvalQuestion("Who painted the Mona Lisa?", ["Leonardo da Vinci"])]
    leaders = leaders_frame(2).to_dict("records")

    def eval_answers(q):
        r = evaluate_question(pipe, q, cfg)
        return {m: (v.answer, v.verdicts) for m, v in r.modes.items()}

    def swap_answers(leader):
        rec = hotswap.positions_records(pipes, [leader], [cfg])[0][0]
        return [(r["index"], r["decoding"], r["answer"]) for r in rec["rows"]] + [rec["closed"]["answer"]]

    jobs = [(eval_answers, q) for q in questions] + [(swap_answers, leader) for leader in leaders]
    alone = [fn(arg) for fn, arg in jobs]
    assert guard.overlaps == 0 and guard.calls > 0
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
