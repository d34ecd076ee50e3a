"""Priors: validation and the benchmark-specific resolution."""

import numpy as np
import pytest

from gittinseval import Benchmark, BenchmarkPrior, GaussianPrior


@pytest.mark.parametrize("var", [0.0, -0.01, float("nan"), float("inf")])
def test_non_positive_or_non_finite_variance_is_rejected(var):
    with pytest.raises(ValueError, match="prior variance must be positive and finite"):
        GaussianPrior(0.5, var)


def test_specific_prior_overrides_and_validates():
    benchmark = Benchmark("b", np.zeros((2, 3)), specific_prior=(0.2, 0.01))
    assert BenchmarkPrior().resolve(benchmark) == GaussianPrior(0.2, 0.01, "specific")
    assert BenchmarkPrior(var=0.03).resolve(benchmark) == GaussianPrior(0.2, 0.03, "specific")
    with pytest.raises(ValueError, match="prior variance must be positive"):
        BenchmarkPrior(var=-1.0).resolve(benchmark)
