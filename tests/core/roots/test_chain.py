"""The empirical-target chain (gittinseval.core.roots.chain): stages, batch sizes, latent variances and step sds
against hand counts and closed forms."""

import numpy as np
import pytest

from gittinseval.core.roots import EmpiricalTargetChain


def test_chain_schedule_has_partial_last_batch():
    chain = EmpiricalTargetChain(n_examples=43, batch_size=8, prior_var=0.04)
    assert chain.horizon == 6
    np.testing.assert_array_equal(chain.batch_sizes, [8, 8, 8, 8, 8, 3])
    # v_n by direct summation of precisions.
    seen = np.array([0, 8, 16, 24, 32, 40])
    np.testing.assert_allclose(chain.latent_vars, 1 / (1 / 0.04 + seen / 0.25))


def test_step_sds_of_a_tiny_chain_worked_by_hand():
    # N = 4, B = 2, v0 = 0.04, tau^2 = 1/4: a = 1 + 0.25 / 0.16 = 2.5625,
    # v_0 = 0.04, v_1 = 1 / (25 + 8) = 1/33,
    # sigma_0 = 2.5625 * 0.04 / sqrt(0.04 + 0.125)   = 0.252338...,
    # sigma_1 = 2.5625 / 33 / sqrt(1/33 + 0.125)     = 0.197042...
    chain = EmpiricalTargetChain(4, 2, 0.04)
    np.testing.assert_array_equal(chain.batch_sizes, [2.0, 2.0])
    np.testing.assert_allclose(chain.latent_vars, [0.04, 1 / 33], rtol=1e-14)
    assert chain.target_scale == pytest.approx(2.5625, rel=1e-14)
    np.testing.assert_allclose(chain.step_sds, [0.252338, 0.197042], atol=1e-6)
    # The steps of M add up to the prior variance of the full-row mean, v0 + tau^2 / N.
    assert np.sum(chain.step_sds**2) == pytest.approx(0.04 + 0.25 / 4, rel=1e-12)


@pytest.mark.parametrize("n_examples", [1, 7, 100])
def test_a_one_stage_chain_steps_by_the_prior_sd_of_the_full_row_mean(n_examples):
    # B = N: sigma_0 = a v_0 / sqrt(v_0 + tau^2 / N) with a = 1 + tau^2 / (N v_0) is sqrt(v_0 + tau^2 / N).
    chain = EmpiricalTargetChain(n_examples, n_examples, 0.02, cell_var=0.1)
    assert chain.horizon == 1
    np.testing.assert_allclose(chain.step_sds, [np.sqrt(0.02 + 0.1 / n_examples)], rtol=1e-14)


@pytest.mark.parametrize(("n_examples", "batch_size", "prior_var", "cell_var"),
                         [(43, 8, 0.04, 0.25), (1534, 8, 0.01, 0.25), (10, 3, 0.5, 0.05), (97, 97, 0.04, 1.0)])
def test_the_steps_of_any_chain_add_up_to_the_prior_variance_of_the_full_row_mean(
    n_examples, batch_size, prior_var, cell_var
):
    # M moves from the prior mean (a constant) to the full row's mean, whose variance is v0 + tau^2 / N.
    chain = EmpiricalTargetChain(n_examples, batch_size, prior_var, cell_var)
    assert chain.batch_sizes.sum() == n_examples and chain.horizon == -(-n_examples // batch_size)
    assert np.sum(chain.step_sds**2) == pytest.approx(prior_var + cell_var / n_examples, rel=1e-12)
    assert np.all(np.diff(chain.latent_vars) < 0)  # every batch shrinks the latent variance


@pytest.mark.parametrize(
    ("arguments", "message"),
    [
        ((8, 9, 0.04), r"batch_size \(9\) is larger than the number of examples N = 8"),
        ((0, 1, 0.04), "n_examples must be a positive integer"),
        ((8, 2, -0.1), "prior_var must be positive and finite"),
        ((8, 2, 0.04, float("inf")), "cell_var must be positive and finite"),
    ],
)
def test_a_chain_that_cannot_be_is_refused_by_name(arguments, message):
    with pytest.raises(ValueError, match=message):
        EmpiricalTargetChain(*arguments)
