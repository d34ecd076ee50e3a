"""What a live run evaluates (gittinseval.live.task): arm names and labels, the digest of the examples, what
identifies a scorer, and the task's definition with its costs in the policy's raw unit."""

import functools
import hashlib
import json

import numpy as np
import pytest

from gittinseval.live.labels import arm_labels
from gittinseval.live.task import (
    LiveTask,
    TaskDefinition,
    arm_labels_of_names,
    arm_list,
    arm_name,
    dataset_digest,
    scorer_identity,
)
from gittinseval.live.tasks.graders import LastNumber

ARMS = [{"model": "m-small", "temperature": 0.0}, {"temperature": 1.0, "model": "m-large"}]


def score_by_hand(arm, batch):
    return np.zeros(len(batch))


class Scorer:
    """A scorer with constructor parameters and no identity of its own."""

    def __init__(self, threshold: float = 0.5) -> None:
        self.threshold = threshold

    def __call__(self, arm, batch):
        return np.ones(len(batch))


class Opaque:
    """A scorer whose parameters cannot be read (``**kwargs``)."""

    def __init__(self, **options) -> None:
        self.options = options

    def __call__(self, arm, batch):
        return np.ones(len(batch))


def test_an_arm_is_named_as_itself_or_as_sorted_json():
    assert arm_name("gpt-4o") == "gpt-4o"
    assert arm_name(ARMS[1]) == '{"model": "m-large", "temperature": 1.0}' == json.dumps(ARMS[1], sort_keys=True)
    assert arm_name(3) == "3" and arm_name([1, "a"]) == '[1, "a"]'
    assert arm_list(("a", "b")) == ["a", "b"]
    with pytest.raises(ValueError, match=r"task.arms is a mapping \(small, large\), and the arms are a list: "
                                         r"write each as a list item with its key as its name, - \{name: small, "):
        arm_list({"small": {"model": "x"}, "large": {"model": "y"}})


def test_labels_read_back_from_the_names_a_store_keeps_are_the_arms_own():
    names = [arm_name(arm) for arm in ARMS]
    # The settings that differ, as the arms themselves are labelled: a resumed run shows the same labels.
    assert arm_labels_of_names(names) == tuple(arm_labels(ARMS)) == ("m-small t=0", "m-large t=1")
    assert arm_labels_of_names(["a", "b"]) == ("a", "b")
    assert arm_labels_of_names(["{not json", "b"]) == ("{not json", "b")  # a name that only looks like JSON


def test_the_dataset_digest_is_the_sha256_of_the_examples_as_sorted_json():
    examples = [{"q": "1 + 1", "a": 2}, {"a": 3, "q": "1 + 2"}]
    expected = hashlib.sha256(json.dumps(examples, sort_keys=True).encode()).hexdigest()
    assert dataset_digest(examples) == expected == dataset_digest([dict(reversed(e.items())) for e in examples])
    assert dataset_digest(examples[::-1]) != expected  # the order of the examples counts
    assert dataset_digest(range(3)) == hashlib.sha256(b"[0, 1, 2]").hexdigest()


def test_a_scorer_is_identified_by_its_own_identity_its_parameters_or_its_name():
    assert scorer_identity(None) is None
    assert scorer_identity(score_by_hand) == {"_target_": "tests.live.test_task.score_by_hand"}
    assert scorer_identity(Scorer(0.8)) == {"_target_": "tests.live.test_task.Scorer", "threshold": 0.8}
    assert scorer_identity(Opaque(a=1)) == {"_target_": "tests.live.test_task.Opaque"}
    grader = LastNumber(tolerance=0.5)
    assert scorer_identity(grader) == {
        "_target_": "gittinseval.live.tasks.graders.LastNumber", "field": "answer", "tolerance": 0.5, "relative": 0.0,
    }
    assert scorer_identity(functools.partial(score_by_hand)) == {"_target_": "functools.partial"}


def test_a_task_in_dollars_is_planned_in_the_raw_unit_of_its_tokens():
    task = LiveTask(ARMS, ["q1", "q2", "q3"], Scorer(), costs=[2e-4, 1e-3], tokens_per_example=500, binary=True)
    definition = TaskDefinition.of(task)
    assert definition.names == tuple(arm_name(arm) for arm in ARMS)
    assert definition.labels == ("m-small t=0", "m-large t=1")
    assert (definition.n_arms, definition.n_examples, definition.cost_unit, definition.binary) == (
        2, 3, "dollars", True)
    assert definition.dataset == dataset_digest(["q1", "q2", "q3"])
    assert definition.scorer == {"_target_": "tests.live.test_task.Scorer", "threshold": 0.5}
    # 500 tokens an example: a raw unit is 5e-4 dollars, so the raw costs are USD per 1M tokens.
    assert definition.dollars_per_raw_unit == 5e-4
    np.testing.assert_allclose(definition.raw_costs(), [0.4, 2.0], rtol=1e-15)


def test_unit_and_reported_costs():
    unit = TaskDefinition.of(LiveTask(["a", "b"], [1, 2], costs="unit", tokens_per_example=500))
    assert unit.cost_unit == "unit" and unit.costs.tolist() == [1.0, 1.0] and unit.dollars_per_raw_unit == 1.0
    assert unit.raw_costs().tolist() == [1.0, 1.0]
    reported = TaskDefinition.of(LiveTask(["a", "b", "c"], [1], costs=None))
    assert reported.cost_unit == "reported" and reported.costs is None and reported.raw_costs().tolist() == [1.0] * 3


@pytest.mark.parametrize(
    ("task", "message"),
    [
        (LiveTask([], [1]), "at least one arm is needed"),
        (LiveTask(["a", "b", "a", "b"], [1]), r"arm names must be distinct; repeated: \['a', 'b'\]"),
        (LiveTask(["a", "b"], [1], tokens_per_example=0.0), "tokens_per_example must be positive and finite"),
        (LiveTask(["a", "b"], [1], costs="free"), "costs must be dollars per example, 'unit' or None, got 'free'"),
        (LiveTask(["a", "b"], [1], costs=[1.0]), "costs"),
        (LiveTask(["a", "b"], []), "the task has no examples: there is nothing to evaluate"),
        (LiveTask(["a"], [1]), r"the task has one arm \(a\): there is nothing to compare; give two arms or more"),
    ],
)
def test_a_task_that_cannot_be_run_is_refused_by_what_is_wrong(task, message):
    with pytest.raises(ValueError, match=message):
        TaskDefinition.of(task)
