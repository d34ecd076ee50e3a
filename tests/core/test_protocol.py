"""The protocol's helpers: example orders, busy arms, tie-breaking, live capabilities, score checks.

The contract of each policy (busy arms, cancel, rebuild, live run) is checked for every
configured policy by ``tests/test_policy_checks.py``."""


import numpy as np
import pytest

from gittinseval.baselines.pbgi import PBGIPolicy
from gittinseval.baselines.prompteval import PromptEvalPolicy
from gittinseval.baselines.ucbe import UCBEPolicy
from gittinseval.core.protocol import (
    EvaluationProblem,
    RandomExampleOrder,
    Request,
    argmax_by_priority,
    argmax_in_priority_order,
    check_live_support,
    excluding,
    validate_scores,
)

K, N = 9, 24


def problem(binary=True):
    costs = np.array([1.0, 2.0, 0.5] * (K // 3))
    return EvaluationProblem(N, costs, budget=0.5 * N * costs.sum(), binary=binary)


def test_excluding_sets_busy_arms_to_minus_infinity_and_leaves_the_input_alone():
    values = np.arange(5.0)
    assert excluding(values, frozenset()) is values
    masked = excluding(values, frozenset({1, 4}))
    np.testing.assert_array_equal(masked, [0.0, -np.inf, 2.0, 3.0, -np.inf])
    np.testing.assert_array_equal(values, np.arange(5.0))


def test_give_back_undoes_only_the_latest_take():
    order = RandomExampleOrder(2, 10, np.random.default_rng(0))
    first = order.take(1, 3).copy()
    second = order.take(1, 4).copy()
    with pytest.raises(ValueError, match="not its latest batch"):
        order.give_back(1, first)
    order.give_back(1, second)
    assert order.remaining(1) == 7
    np.testing.assert_array_equal(order.take(1, 4), second)


def test_live_support_is_declared_on_the_class_and_checked_in_one_place():
    check_live_support(UCBEPolicy(), problem(binary=False))
    with pytest.raises(ValueError, match="'pbgi' cannot run a live evaluation: configuration-level BO"):
        check_live_support(PBGIPolicy(), problem())
    check_live_support(PromptEvalPolicy(), problem(binary=True))
    with pytest.raises(ValueError, match="'prompteval' needs binary"):
        check_live_support(PromptEvalPolicy(), problem(binary=False))


@pytest.mark.parametrize("seed", range(20))
def test_argmax_in_priority_order_is_argmax_by_priority(seed):
    """Random values with many exact ties and -inf entries, against the four-pass reference."""
    rng = np.random.default_rng(seed)
    values = rng.integers(0, 4, size=30).astype(float)
    values[rng.uniform(size=30) < 0.3] = -np.inf
    priority = rng.permutation(30)
    assert argmax_in_priority_order(values, np.argsort(priority)) == argmax_by_priority(values, priority)
    everything_done = np.full(30, -np.inf)
    assert argmax_in_priority_order(everything_done, np.argsort(priority)) == -1


@pytest.mark.parametrize(
    "scores, message",
    [
        ([0.5, 1.2], r"arm 3: scores must be finite and in \[0, 1\]; got \[1.2\] for examples \[7\]"),
        ([0.5, np.nan], r"arm 3: scores must be finite and in \[0, 1\]; got \[nan\] for examples \[7\]"),
        ([0.5], r"arm 3: expected 2 scores for the requested examples, got shape \(1,\)"),
    ],
)
def test_validate_scores_names_the_arm_the_examples_and_the_problem(scores, message):
    request = Request(3, np.array([5, 7]))
    with pytest.raises(ValueError, match=message):
        validate_scores(request, scores)
    np.testing.assert_array_equal(validate_scores(request, [0.0, 1]), [0.0, 1.0])
