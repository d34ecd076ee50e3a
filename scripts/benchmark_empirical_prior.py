"""Cost of GittinsEval-EB's prior refits and table refreshes (a benchmark, not a test).

    python scripts/benchmark_empirical_prior.py [--repeats 5]

Prints the median time of one table refresh at N = 1534, B = 8, P = 1025 (one
price, and the 14 distinct MMLU model prices of cost-aware runs), of one prior fit with
K = 1500 arms, and, for one seed of professional_law (1500 x 1534, 10 % budget),
the number of fits, refreshes and tables built with their share of the run time.
"""

from __future__ import annotations

import argparse
import statistics
import time

import numpy as np

from gittinseval import (
    EmpiricalPriorEstimator,
    GaussianPrior,
    GittinsPolicy,
    PriceCost,
    UnitCost,
    root_schedule,
    simulate,
)
from gittinseval.data import load_mmlu


def median_seconds(function, repeats: int) -> float:
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        function()
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=5, help="timed repetitions of each measurement")
    args = parser.parse_args()
    benchmark = load_mmlu("professional_law")
    estimator = EmpiricalPriorEstimator()
    rng = np.random.default_rng(0)
    counts = rng.integers(0, 40, benchmark.n_arms)
    sums = rng.binomial(counts, 0.45)
    fit = median_seconds(lambda: estimator.estimate(sums, counts, 0.5, 0.04), args.repeats)
    print(f"one prior fit, K = {benchmark.n_arms}:                 {1e3 * fit:8.2f} ms")

    for cost in (UnitCost(), PriceCost()):
        costs = cost(benchmark)
        distinct = 1e-4 * np.unique(costs)
        one_refresh = median_seconds(lambda c=distinct: root_schedule(benchmark.n_examples, 8, 0.01, c), args.repeats)
        policy = GittinsPolicy(batch_size=8, prior_estimator=estimator)
        result = simulate(benchmark, policy, costs, GaussianPrior(), seed=0, cost_mode=cost.name)
        tables = len(distinct)
        diagnostics = result.summary["diagnostics"]
        wall = result.summary["wall_time_s"]
        build = diagnostics["tables_computed"] * one_refresh
        print(
            f"{cost.name:>5} cost: one refresh ({tables:2d} tables) {1e3 * one_refresh:8.1f} ms; run: "
            f"{diagnostics['prior_fits']} fits, {diagnostics['table_refreshes']} refreshes, "
            f"{diagnostics['tables_computed']} built = {build:.2f} s of {wall:.2f} s"
        )


if __name__ == "__main__":
    main()
