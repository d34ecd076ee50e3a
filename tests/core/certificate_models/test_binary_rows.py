"""The 0/1 arms' rows kept between stop checks (gittinseval.core.certificate_models.binary_rows): the same rows as
computed afresh, recomputed only where the data changed, and the eps-best sum over the arm's support equal to the
full lattice sum of win_probabilities."""

from __future__ import annotations

import numpy as np
import pytest

from gittinseval.core.certificate_models import EmpiricalBayesModel
from gittinseval.core.certificate_models.binary_rows import BinaryRows
from gittinseval.core.certificate_models.lattice import (
    Lattice,
    RowData,
    eps_steps,
    log_cdf_at_eps,
    win_probabilities,
)
from gittinseval.core.observations import ObservedCells

BIG_N = 40


def _maker(lattice: Lattice, log_priors: np.ndarray, steps: float, calls: list[int]):
    """Rows of arms under their own log-priors (``[K, X]``), counting the rows asked for."""

    def make(arms, ones, n_seen):
        calls.append(len(arms))
        data = RowData(ones.astype(np.float64), n_seen, np.ones(len(arms)))
        post = lattice.posterior(lattice.log_likelihood(data), log_priors[arms])
        return post, log_cdf_at_eps(post, steps, binary=True)

    return make


def _random_data(rng, n_arms):
    n_seen = rng.integers(0, BIG_N + 1, n_arms)
    return rng.binomial(n_seen, rng.uniform(0.2, 0.9, n_arms)), n_seen


@pytest.mark.parametrize("shared_prior", [True, False])
def test_refreshed_rows_equal_fresh_rows_and_only_stale_rows_are_recomputed(shared_prior):
    rng = np.random.default_rng(0)
    n_arms = 12
    lattice = Lattice(BIG_N, binary=True)
    steps = eps_steps(lattice, 0.05)
    one_prior = -0.5 * (lattice.points - 0.6) ** 2 / 0.04
    log_priors = (
        np.tile(one_prior, (n_arms, 1))
        if shared_prior
        else -0.5 * (lattice.points[None, :] - rng.uniform(0.3, 0.8, (n_arms, 1))) ** 2 / 0.02
    )
    calls: list[int] = []
    make = _maker(lattice, log_priors, steps, calls)
    table = BinaryRows(n_arms, lattice.size, shared_prior=shared_prior)
    ones, n_seen = _random_data(rng, n_arms)
    ones[:4], n_seen[:4] = 3, 7  # four arms with the same data: one row when the prior is shared
    table.refresh(ones, n_seen, make)
    assert sum(calls) == (n_arms - 3 if shared_prior else n_arms)
    for _ in range(5):
        changed = rng.choice(n_arms, 3, replace=False)
        n_seen[changed] = np.minimum(n_seen[changed] + 2, BIG_N)
        ones[changed] = np.minimum(ones[changed] + 1, n_seen[changed])
        calls.clear()
        table.refresh(ones, n_seen, make)
        assert sum(calls) <= 3
        fresh_post, fresh_log_cdf = _maker(lattice, log_priors, steps, [])(np.arange(n_arms), ones, n_seen)
        np.testing.assert_array_equal(table.post, fresh_post)
        np.testing.assert_array_equal(table.log_cdf, fresh_log_cdf)
    calls.clear()
    table.refresh(ones, n_seen, make)
    assert calls == []


@pytest.mark.parametrize("eps", [0.0, 0.05, 0.2])
def test_eps_best_over_the_support_is_the_full_lattice_sum(eps):
    rng = np.random.default_rng(1)
    n_arms = 9
    lattice = Lattice(BIG_N, binary=True)
    steps = eps_steps(lattice, eps)
    log_priors = np.tile(-0.5 * (lattice.points - 0.5) ** 2 / 0.05, (n_arms, 1))
    table = BinaryRows(n_arms, lattice.size, shared_prior=True)
    ones, n_seen = _random_data(rng, n_arms)
    n_seen[0], ones[0] = BIG_N, 30  # a completed arm: one lattice point
    table.refresh(ones, n_seen, _maker(lattice, log_priors, steps, []))
    _, full = win_probabilities(table.post, np.ones(n_arms), steps, binary=True)
    for arm in range(n_arms):
        assert table.eps_best(arm) == pytest.approx(full[arm], abs=1e-12)


@pytest.mark.parametrize("features", [None, "crossed"])
def test_the_models_exact_stop_probability_follows_its_posterior_as_the_run_grows(features):
    # The stop model keeps its rows between checks; its probability must stay that of the full posterior of the same
    # prior fit (win_probabilities over every arm's row), batch after batch.
    rng = np.random.default_rng(2)
    n_arms, big_n = 30, 50
    codes = None if features is None else np.stack([np.arange(n_arms) % 5, np.arange(n_arms) // 5], axis=1)
    matrix = (rng.random((n_arms, big_n)) < rng.uniform(0.3, 0.9, (n_arms, 1))).astype(np.float64)
    orders = [list(rng.permutation(big_n)) for _ in range(n_arms)]
    observed = ObservedCells(n_arms, big_n, binary=True, features=codes)
    model = EmpiricalBayesModel(refit_growth=0.5)
    for step in range(120):
        arm = int(rng.integers(n_arms))
        if len(orders[arm]) < 3:
            continue
        examples = np.array([orders[arm].pop() for _ in range(3)])
        observed.add(arm, examples, matrix[arm, examples])
        if step % 10:
            continue
        target = int(np.argmax(observed.score_sum / np.maximum(observed.n_seen, 1)))
        probability = model.prob_eps_best(observed, target, 0.02)
        posterior = model.posterior(observed)  # no refit: the same prior as the check's
        _, full = win_probabilities(
            posterior.rows, posterior.counts, eps_steps(posterior.lattice, 0.02), True, [posterior.row_of_arm[target]]
        )
        assert probability == pytest.approx(full[0], abs=1e-10)
