"""One key for "the settings an answer depends on": every cache of answers changes with each of them.

A cache keyed on fewer settings than the answer depends on hands back an answer decoded another way
(the Diagnose panel once left out the length penalty, so with beams > 1 its checks outlived a change
of the penalty)."""

from dataclasses import fields

import pytest
import torch

from app import state
from app.ask import diagnose_panel
from rag_core.analysis.evaluation import eval_checkpoint
from rag_core.config import ANSWER_SETTINGS, AnswerSettings, Config, StackSpec, TraceSettings
from rag_core.index_swap import store
from rag_core.trace import Trace

CHANGED = {
    "k": 3,
    "scale": 7.0,
    "beams": 4,
    "length_penalty": 2.0,
    "early_stopping": True,
    "rescore": "fast",
    "max_new_tokens": 9,
    "decode": "token",
}


def test_every_setting_an_answer_depends_on_has_a_changed_value_here():
    assert set(CHANGED) == set(ANSWER_SETTINGS)
    assert all(getattr(Config(), name) != value for name, value in CHANGED.items())


def _trace(cfg: Config) -> Trace:
    settings = TraceSettings(
        **{name: getattr(cfg, name) for name in ANSWER_SETTINGS if name not in ("k", "scale")}
    )
    return Trace(
        "q?", "toy", [None] * cfg.k, torch.zeros(cfg.k, dtype=torch.float64), cfg.scale or 20.0, [], settings
    )


@pytest.mark.parametrize("name", sorted(CHANGED))
def test_the_diagnose_checks_key_changes_with_each_setting(name, monkeypatch):
    monkeypatch.setattr(state, "stack_key", lambda: "stack")
    base = Config(scale=20.0)
    assert diagnose_panel.checks_key(
        _trace(base.with_(**{name: CHANGED[name]}))
    ) != diagnose_panel.checks_key(_trace(base))


@pytest.mark.parametrize("name", sorted(CHANGED))
def test_ask_s_trace_key_changes_with_each_setting(name):
    assert state.settings_key(Config().with_(**{name: CHANGED[name]})) != state.settings_key(Config())


@pytest.mark.parametrize("name", sorted(CHANGED))
def test_the_index_swap_key_changes_with_each_setting(name):
    sums = {"2016": "a", "2018": "b"}
    assert store.experiment_key(Config().with_(**{name: CHANGED[name]}), sums) != store.experiment_key(
        Config(), sums
    )


def test_the_index_swap_key_is_the_one_its_shipped_run_was_stored_under():
    # the shipped reference run is found by this key: a new way of writing it must give the same value
    assert store.experiment_settings(Config()) == {
        "k": 5,
        "scale": None,
        "beams": 1,
        "max_new_tokens": 16,
        "length_penalty": 1.0,
        "early_stopping": False,
        "rescore": "thorough",
        "decode": "both",
        "decoder": store.DECODER_VERSION,
    }


@pytest.mark.parametrize("name", sorted(CHANGED))
def test_an_eval_checkpoint_key_changes_with_each_setting(name, monkeypatch):
    class Pipe:  # what run_key reads of a pipeline
        index_name, index = "toy", None
        models = type(
            "M", (), {"encoder": type("E", (), {"id": "e"}), "generator": type("G", (), {"id": "g"})}
        )

    key = lambda cfg: eval_checkpoint.run_key(Pipe, [], cfg, True)  # noqa: E731
    assert key(Config().with_(**{name: CHANGED[name]})) != key(Config())


def test_a_config_is_a_stack_with_the_answer_settings_of_a_question():
    """Every Config field belongs to the stack (what is loaded) or to the answer settings (how one
    question is answered), save the corpus file (an index to build) and the UI's alternatives."""
    stack, answer = {f.name for f in fields(StackSpec)}, {f.name for f in fields(AnswerSettings)}
    assert not stack & answer
    assert {f.name for f in fields(Config)} - stack - answer == {"corpus", "top_alternatives"}
    cfg = Config(
        k=3, beams=2, scale=7.0, index="2016", generator="g", question_encoder="q", threads=1, device="cpu"
    )
    assert StackSpec.of(cfg).config(AnswerSettings.of(cfg)) == cfg
    assert StackSpec.of(cfg).config() == Config(generator="g", question_encoder="q", threads=1, device="cpu")
