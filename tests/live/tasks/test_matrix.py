"""The matrix adapter (gittinseval.live.tasks.matrix): a live task that replays a response matrix."""

import hashlib
import time

import numpy as np
import pytest

from gittinseval import GittinsPolicy
from gittinseval.data import Benchmark
from gittinseval.live import MatrixScorer, evaluate, matrix_task
from gittinseval.live.task import TaskDefinition


def test_matrix_scorer_reads_rows_by_index_or_name_and_sleeps():
    scores = np.arange(12, dtype=float).reshape(3, 4) / 12
    scorer = MatrixScorer(scores, latency=0.02, arm_names=["a", "b", "c"])
    started = time.perf_counter()
    np.testing.assert_array_equal(scorer("b", [3, 0]), scores[1, [3, 0]])
    assert time.perf_counter() - started >= 0.02
    np.testing.assert_array_equal(scorer(2, [1]), scores[2, [1]])
    with pytest.raises(ValueError, match="latency"):
        MatrixScorer(scores, latency=-1)


def test_matrix_task_costs_are_prices_per_million_tokens():
    bench = Benchmark("suite/sub", np.eye(3), prices=[1.0, 2.0, 4.0], arm_names=["x", "y", "z"])
    task = matrix_task(bench, tokens_per_example=500)
    assert task.arms == ["x", "y", "z"] and task.examples == [0, 1, 2] and task.name == "suite_sub"
    np.testing.assert_allclose(task.costs, [5e-4, 1e-3, 2e-3])
    np.testing.assert_array_equal(task.score_fn("z", [2, 0]), [1.0, 0.0])
    assert matrix_task(Benchmark("u", np.eye(2))).costs is None


def test_an_arm_whose_every_score_is_1_is_named():
    scores = (np.random.default_rng(0).uniform(size=(4, 30)) < 0.5).astype(float)
    scores[2] = 1.0
    task = matrix_task(Benchmark("suite/sub", scores))
    result = evaluate(
        task.arms, task.examples, task.score_fn, None, costs="unit", policy=GittinsPolicy(5), progress=False
    )
    assert result.warnings == [
        "1 arm (2) scored 1 on every one of 20 or more examples: check the grading against the replies"
    ]


def test_the_policy_sees_the_prices_bit_for_bit_and_the_identity_is_the_matrix_not_the_latency():
    rng = np.random.default_rng(3)
    prices = rng.uniform(0.05, 30.0, 7)
    bench = Benchmark("suite/x", rng.uniform(size=(7, 11)), prices=prices, arm_names=[f"m{k}" for k in range(7)])
    task = matrix_task(bench, name="mine")
    assert task.name == "mine" and task.tokens_per_example == 1000.0 and task.benchmark is bench
    # The evaluator divides the dollars by tokens_per_example / 1e6: the raw costs are the prices again.
    np.testing.assert_array_equal(TaskDefinition.of(task).raw_costs(), prices)
    slow = MatrixScorer(bench.scores, latency=0.5, arm_names=bench.arm_names)
    identity = task.score_fn.identity()
    assert slow.identity() == identity
    digest = hashlib.sha256(str((7, 11)).encode() + bench.scores.tobytes()).hexdigest()
    assert identity == {"scores_sha256": digest, "arm_names": [f"m{k}" for k in range(7)]}
    changed = bench.scores.copy()
    changed[3, 4] += 1e-9
    assert MatrixScorer(changed, arm_names=bench.arm_names).identity() != identity
    with pytest.raises(ValueError, match="tokens_per_example must be positive"):
        matrix_task(bench, tokens_per_example=0)
