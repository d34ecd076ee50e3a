"""The Python API of the simulator refuses arguments of the wrong type with a TypeError that names the argument
(a Python caller gets an exception, not an exit code; the command line never passes these)."""

import numpy as np
import pytest

from gittinseval import GaussianPrior, GittinsPolicy, simulate
from tests.conftest import binary_benchmark


@pytest.fixture(scope="module")
def benchmark():
    return binary_benchmark(3, 20, seed=0)


def test_no_benchmark_is_a_type_error_naming_the_benchmark():
    with pytest.raises(TypeError, match=r"^benchmark must be a gittinseval.data.Benchmark, got NoneType$"):
        simulate(None, GittinsPolicy(), np.ones(3), GaussianPrior())


def test_a_policy_given_by_its_config_name_is_a_type_error_naming_the_policy(benchmark):
    expected = r"^policy must be a gittinseval.core.protocol.Policy \(e.g. GittinsPolicy\(\)\), got str$"
    with pytest.raises(TypeError, match=expected):
        simulate(benchmark, "gittins", np.ones(3), GaussianPrior())
