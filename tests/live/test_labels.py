"""Arm labels: short, unique, stable, user names kept, duplicates refused."""

import itertools
import json

import numpy as np
import pytest

from gittinseval import GittinsPolicy
from gittinseval.live import Evaluator, evaluate
from gittinseval.live.labels import arm_labels

SYSTEMS = ["Answer with one word.", "You are a helpful assistant.", "Think step by step."]


def grid():
    """The 12 arms of the local LLM demo: 3 system prompts x 2 temperatures x 2 max_tokens, one model."""
    return [
        {"model": "smollm2", "system": system, "temperature": t, "max_tokens": m}
        for system, t, m in itertools.product(SYSTEMS, (0.0, 0.8), (16, 48))
    ]


def test_labels_show_the_fields_that_differ():
    labels = arm_labels(grid())
    assert labels[:4] == ["t=0 max=16 sys1", "t=0 max=48 sys1", "t=0.8 max=16 sys1", "t=0.8 max=48 sys1"]
    assert labels[-1] == "t=0.8 max=48 sys3"
    arms = [
        {"model": "openai/gpt-4o-mini", "temperature": 0, "system": SYSTEMS[0]},
        {"model": "openai/gpt-4o-mini", "temperature": 0, "system": SYSTEMS[1]},
        {"model": "openai/gpt-4o", "temperature": 1.0, "system": SYSTEMS[1]},
    ]
    assert arm_labels(arms) == ["gpt-4o-mini t=0 sys1", "gpt-4o-mini t=0 sys2", "gpt-4o t=1 sys2"]


def test_labels_are_unique_and_short():
    arms = grid() + [{"model": "openai/gpt-4o", "system": SYSTEMS[0], "temperature": 0.25, "seed": 7}]
    labels = arm_labels(arms)
    assert len(set(labels)) == len(arms)
    assert max(map(len, labels)) <= 40
    # Every arm's label tells its system prompt, which JSON names cut to 40 characters hid.
    assert labels[0] == "smollm2 t=0 max=16 sys1"
    assert labels[-1] == "gpt-4o t=0.25 sys1 seed=7"


def test_model_names_keep_their_provider_when_the_short_names_clash():
    arms = [{"model": "openai/gpt-4o"}, {"model": "azure/gpt-4o"}, {"model": "openai/o3"}]
    assert arm_labels(arms) == ["openai/gpt-4o", "azure/gpt-4o", "openai/o3"]


def test_missing_fields_long_strings_and_nested_values():
    arms = [
        {"model": "m", "stop": ["\n"], "style": "a rather long instruction"},
        {"model": "m", "max_tokens": 8, "stop": ["."], "style": "a rather long instruction"},
        {"model": "m", "stop": ["\n"], "style": "terse", "logprobs": True},
    ]
    assert arm_labels(arms) == [
        "stop1 style1",
        "max=8 stop2 style1",
        "logprobs=true stop1 style=terse",
    ]


def test_labels_are_stable_and_depend_only_on_the_arms():
    first = arm_labels(grid())
    # Rebuilt from scratch, as on a resume, with keys in another order.
    again = arm_labels([dict(reversed(list(arm.items()))) for arm in grid()])
    assert again == first


def test_user_names_are_kept():
    arms = grid()[:3]
    arms[1] = {**arms[1], "name": "my favourite"}
    assert arm_labels(arms) == ["t=0 max=16", "my favourite", "t=0.8 max=16"]
    assert arm_labels(["gpt-4o", "claude"]) == ["gpt-4o", "claude"]
    assert arm_labels([{"model": "openai/gpt-4o", "temperature": 0}]) == ["gpt-4o"]
    # Differing only in a field one arm lacks: the other is labelled by its model.
    assert arm_labels([{"model": "a/m"}, {"model": "a/m", "seed": 7}]) == ["m", "seed=7"]
    assert arm_labels([{"model": "m", "system": "Be brief."}, {"model": "m"}]) == ["sys1", "nosys"]


def test_duplicates_are_refused():
    with pytest.raises(ValueError, match="arms 0 and 2 have the same settings"):
        arm_labels([{"model": "a", "temperature": 0}, {"model": "b"}, {"model": "a", "temperature": 0.0}])
    with pytest.raises(ValueError, match="arms 0 and 1 are both labelled 'x'"):
        arm_labels([{"model": "a", "name": "x"}, {"model": "b", "name": "x"}])
    with pytest.raises(ValueError, match="arms 0 and 1 are both labelled 't=0'"):
        arm_labels([{"temperature": 1, "name": "t=0"}, {"temperature": 0}])
    with pytest.raises(ValueError, match="name must be a non-empty string"):
        arm_labels([{"model": "a", "name": ""}])
    with pytest.raises(ValueError, match="must be a string or a mapping"):
        arm_labels([3])


def test_a_run_shows_labels_and_a_resume_shows_the_same_ones(tmp_path, capsys):
    """Labels in the progress line, status table and summary; the store reopened (from_store, or a second
    session of the same run) gives every arm the same label, and keys the arms by their full settings."""
    arms = [
        {"model": "m", "system": "Be brief.", "temperature": 0.0},
        {"model": "m", "system": "Think.", "temperature": 0.0},
        {"name": "mine", "model": "m", "temperature": 1.0},
    ]
    expected = ("t=0 sys1", "t=0 sys2", "mine")  # the model is shared; the third arm has no system prompt

    def score_fn(arm, batch):
        return np.full(len(batch), 1.0 if arm.get("system") == "Think." else 0.0)

    store = tmp_path / "labels.sqlite"
    run = dict(costs="unit", policy=GittinsPolicy(5), store=store, progress=True)
    first = evaluate(arms, list(range(40)), score_fn, 30, **run)
    assert first.summary()["recommended_label"] == "t=0 sys2"
    assert "best t=0 sys2 M=" in capsys.readouterr().err
    reopened = Evaluator.from_store(store)
    try:
        assert reopened.labels == expected
        assert reopened.names == tuple(json.dumps(arm, sort_keys=True) for arm in arms)
        table = reopened.status().format()
        assert all(f"  {label} " in table for label in expected)
    finally:
        reopened.close()
    second = evaluate(arms, list(range(40)), score_fn, 60, **run)
    assert second.summary()["recommended_label"] == "t=0 sys2" and second.spent > first.spent


def test_arm_attributes_code_the_fields_that_siblings_share():
    from gittinseval.live.labels import arm_attributes

    arms = [
        {"name": "a", "model": "gpt-4o-mini", "temperature": 0.0, "system": "terse"},
        {"name": "b", "model": "gpt-4o-mini", "temperature": 0.0, "system": "steps"},
        {"name": "c", "model": "gpt-4o", "temperature": 0.0, "system": "steps"},
        {"name": "d", "model": "gpt-4o", "temperature": 0.0},
    ]
    codes = arm_attributes(arms)
    # model and system (sorted by key) have shared levels; temperature is the same for all; name never counts.
    np.testing.assert_array_equal(codes, [[0, 0], [0, 1], [1, 1], [1, 2]])
    # A field that tells every arm apart gives no siblings; strings and arms without mappings give nothing.
    assert arm_attributes([{"model": "x"}, {"model": "y"}]) is None
    assert arm_attributes(["a", "b"]) is None and arm_attributes([]) is None
