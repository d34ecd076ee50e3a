"""The Benchmark container (gittinseval/data/benchmark.py): validation of its fields, read-only arrays."""

import numpy as np
import pytest

from gittinseval.data import Benchmark
from tests.conftest import cell_benchmark


def test_benchmark_validates_its_fields():
    with pytest.raises(ValueError, match="2 arm names for 3 arms"):
        Benchmark("b", np.zeros((3, 2)), arm_names=("a", "b"))
    with pytest.raises(ValueError, match="features must have shape"):
        Benchmark("b", np.zeros((3, 2)), features=np.zeros((2, 1)))
    with pytest.raises(ValueError, match="default_batch_size must be an integer in \\[1, N\\]"):
        Benchmark("b", np.zeros((3, 2)), default_batch_size=3)


def test_cached_benchmark_arrays_are_read_only():
    from gittinseval.core.costs import PriceCost
    from gittinseval.data import load_mmlu

    benchmark = load_mmlu("college_mathematics")
    for array in (benchmark.scores, benchmark.prices, benchmark.features, benchmark.row_means,
                  PriceCost()(benchmark)):
        with pytest.raises(ValueError, match="read-only"):
            array[0] = 0
    assert load_mmlu("college_mathematics") is benchmark


def test_benchmark_leaves_the_callers_array_writable():
    scores = np.zeros((2, 3))
    Benchmark(name="mine", scores=scores)
    scores[0, 0] = 1.0


@pytest.mark.parametrize(
    ("change", "message"),
    [
        (lambda c: c[:, :5], r"cell costs have shape \(4, 5\), the scores \(4, 30\)"),
        (lambda c: np.where(np.arange(30) == 3, 0.0, c), r"cell costs must be positive and finite; bad cells \[3, 33"),
        (lambda c: np.where(np.arange(30) == 7, np.nan, c), r"cell costs must be positive and finite"),
    ],
)
def test_bad_cell_costs_are_named(change, message):
    bench = cell_benchmark()
    with pytest.raises(ValueError, match=message):
        Benchmark("bad", bench.scores, cell_costs=change(np.array(bench.cell_costs)))


def test_prices_that_are_not_the_cells_row_means_are_refused():
    bench = cell_benchmark()
    with pytest.raises(ValueError, match="prices must be the row means of the cell costs"):
        Benchmark("bad", bench.scores, cell_costs=bench.cell_costs, prices=bench.prices * 1.01)
