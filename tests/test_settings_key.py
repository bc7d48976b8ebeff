"""One key for "the settings an answer depends on": every cache of answers changes with each of them.

A cache keyed on fewer settings than the answer depends on hands back an answer decoded another way
(the Diagnose panel once left out the length penalty, so with beams > 1 its checks outlived a change
of the penalty)."""

from dataclasses import fields

import pytest
import torch

from app import state
from app.ask import diagnose_panel
from rag_core import flags
from rag_core.analysis.evaluation import eval_checkpoint
from rag_core.config import ANSWER_SETTINGS, AnswerSettings, StackSpec, TraceSettings
from rag_core.index_swap import store
from rag_core.index_swap.store import Experiment
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
    assert all(getattr(AnswerSettings(), name) != value for name, value in CHANGED.items())


def _trace(asked: AnswerSettings) -> Trace:
    settings = TraceSettings(
        **{name: getattr(asked, name) for name in ANSWER_SETTINGS if name not in ("k", "scale")}
    )
    k = asked.k
    return Trace(
        "q?", "toy", [None] * k, torch.zeros(k, dtype=torch.float64), asked.scale or 20.0, [], settings
    )


@pytest.mark.parametrize("name", sorted(CHANGED))
def test_the_diagnose_checks_key_changes_with_each_setting(name, monkeypatch):
    monkeypatch.setattr(state, "stack_key", lambda: "stack")
    base = AnswerSettings(scale=20.0)
    assert diagnose_panel.checks_key(
        _trace(base.with_(**{name: CHANGED[name]}))
    ) != diagnose_panel.checks_key(_trace(base))


@pytest.mark.parametrize("name", sorted(CHANGED))
def test_ask_s_trace_key_changes_with_each_setting(name):
    changed = AnswerSettings().with_(**{name: CHANGED[name]})
    assert changed != AnswerSettings() and changed.key() != AnswerSettings().key()


@pytest.mark.parametrize("name", sorted(CHANGED))
def test_the_index_swap_key_changes_with_each_setting(name):
    sums = {"2016": "a", "2018": "b"}
    changed = Experiment().with_(**{name: CHANGED[name]})
    assert store.experiment_key(changed, sums) != store.experiment_key(Experiment(), sums)


def test_the_index_swap_key_is_the_one_its_shipped_run_was_stored_under():
    # the shipped reference run is found by this key: a new way of writing it must give the same value
    assert store.experiment_settings(AnswerSettings()) == {
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
        index_name, index, stack = "toy", None, StackSpec()
        models = type(
            "M", (), {"encoder": type("E", (), {"id": "e"}), "generator": type("G", (), {"id": "g"})}
        )

    key = lambda asked: eval_checkpoint.run_key(Pipe, [], asked, True)  # noqa: E731
    assert key(AnswerSettings().with_(**{name: CHANGED[name]})) != key(AnswerSettings())


def test_the_stack_and_the_answer_settings_share_no_field_and_their_defaults_live_in_one_place():
    """What is loaded and how one question is answered are apart; the CLI's decoding flags and the
    sidebar's first values are AnswerSettings' own defaults, not copies of them."""
    stack, answer = {f.name for f in fields(StackSpec)}, {f.name for f in fields(AnswerSettings)}
    assert not stack & answer
    assert answer == {"index", *ANSWER_SETTINGS}
    parser = flags.Parser()
    flags.add_decoding_args(parser, stuffed=True)
    assert AnswerSettings(**flags.decoding_fields(parser.parse_args([]))) == AnswerSettings()
    assert state.DEFAULTS == AnswerSettings()
