"""The observed cells of a run: running sums against the cells, and the run's past as it was after each batch."""

import numpy as np
import pytest

from gittinseval.core.observations import ObservedCells


def _random_run(rng, n_arms=4, n_examples=30, n_batches=12):
    """An ObservedCells fed random batches of unseen cells, with the batches kept for checking."""
    observed = ObservedCells(n_arms, n_examples, binary=False)
    orders = [rng.permutation(n_examples) for _ in range(n_arms)]
    taken = np.zeros(n_arms, dtype=int)
    batches = []
    for _ in range(n_batches):
        arm = int(rng.integers(n_arms))
        size = int(min(rng.integers(1, 5), n_examples - taken[arm]))
        if size == 0:
            continue
        examples = orders[arm][taken[arm] : taken[arm] + size]
        taken[arm] += size
        scores = rng.random(size)
        observed.add(arm, examples, scores)
        batches.append((arm, examples, scores))
    return observed, batches


def test_running_sums_are_those_of_the_cells():
    observed, _ = _random_run(np.random.default_rng(0))
    np.testing.assert_allclose(observed.score_sum, (observed.values * observed.seen).sum(axis=1))
    np.testing.assert_allclose(observed.score_sq_sum, (observed.values**2 * observed.seen).sum(axis=1))
    np.testing.assert_array_equal(observed.n_seen, observed.seen.sum(axis=1))


def test_up_to_is_the_run_rebuilt_from_its_first_batches():
    observed, batches = _random_run(np.random.default_rng(1))
    for n in (0, 1, len(batches) // 2, len(batches)):
        rebuilt = ObservedCells(observed.n_arms, observed.n_examples, binary=False)
        for arm, examples, scores in batches[:n]:
            rebuilt.add(arm, examples, scores)
        earlier = observed.up_to(n)
        for name in ("values", "seen", "batch", "score_sum", "score_sq_sum", "n_seen"):
            np.testing.assert_allclose(getattr(earlier, name), getattr(rebuilt, name), err_msg=name)
        assert earlier.n_batches == n


def test_a_cell_is_observed_once_and_bad_shapes_are_named():
    observed = ObservedCells(2, 5, binary=True)
    observed.add(0, [1, 2], [1.0, 0.0])
    with pytest.raises(ValueError, match="seen already"):
        observed.add(0, [2, 3], [1.0, 1.0])
    with pytest.raises(ValueError, match="1 scores for 2 examples"):
        observed.add(1, [0, 1], [1.0])
    with pytest.raises(ValueError, match="features has 3 rows for 2 arms"):
        ObservedCells(2, 5, binary=True, features=np.zeros((3, 1)))
    with pytest.raises(ValueError, match="n_batches"):
        observed.up_to(2)
