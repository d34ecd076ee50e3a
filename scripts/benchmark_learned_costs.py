"""Cost of GittinsEval's cost refreshes when costs are learned (a benchmark, not a test).

    python scripts/benchmark_learned_costs.py [--repeats 5]

At N = 1319, B = 8, P = 1025 (the real GSM8K matrix): the median time of one root table
computed exactly at a new cost (what a refresh would cost without the grid), of one refresh
by interpolation on the log cost grid with its four grid tables not yet built (cold) and
built (warm), and of ``update_costs`` moving every one of the 41 arms at once (warm).  Then
one seed of GittinsEval-S on the matrix with per-cell costs, from a guess 5x off for half
the arms, learned: its refreshes, the grid tables it built, and its time against the same
run planned at the true costs.
"""

from __future__ import annotations

import argparse
import statistics
import time

import numpy as np

from gittinseval import EvaluationProblem, GaussianPrior, GittinsPolicy, LearnedCellCost, simulate
from gittinseval.core.roots import cost_grid, interpolated_root_schedule, root_schedule
from gittinseval.data import load_gsm8k_zeroeval
from gittinseval.utils.caches import clear_run_shared_caches

N_EXAMPLES, BATCH_SIZE, LAM = 1319, 8, 1e-4


def median_seconds(function, repeats: int) -> float:
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        function()
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--repeats", type=int, default=5)
    args = parser.parse_args()
    bench = load_gsm8k_zeroeval()
    prior = GaussianPrior(*bench.specific_prior, name="specific")
    prior_var = prior.var
    rng = np.random.default_rng(0)

    exact = median_seconds(lambda: root_schedule(N_EXAMPLES, BATCH_SIZE, prior_var, LAM * rng.uniform(0.1, 40)),
                           args.repeats)
    print(f"one table computed exactly at a new cost:            {1e3 * exact:8.1f} ms")

    def cold() -> None:
        cost_grid._grid_table.cache_clear()
        interpolated_root_schedule(N_EXAMPLES, BATCH_SIZE, prior_var, np.array([LAM * 3.7]))

    print(f"one refresh, interpolated, grid tables not built:    {1e3 * median_seconds(cold, args.repeats):8.1f} ms")
    warm = median_seconds(lambda: interpolated_root_schedule(N_EXAMPLES, BATCH_SIZE, prior_var, np.array([LAM * 3.7])),
                          args.repeats)
    print(f"one refresh, interpolated, grid tables built:        {1e6 * warm:8.1f} us")

    policy = GittinsPolicy(BATCH_SIZE, lam=LAM)
    problem = EvaluationProblem(N_EXAMPLES, bench.prices, 0.1 * N_EXAMPLES * bench.prices.sum(), prior.mean, prior_var,
                                binary=True)
    policy.reset(problem, np.random.default_rng(0))
    scales = iter(np.tile([1.05, 1 / 1.05], 10_000))
    policy.update_costs(bench.prices * next(scales))  # builds the grid tables of every arm's neighbourhood

    def every_arm() -> None:
        policy.update_costs(bench.prices * next(scales))

    all_arms = median_seconds(every_arm, args.repeats)
    print(f"update_costs moving all 41 arms, grid tables built:  {1e3 * all_arms:8.2f} ms")

    mode = LearnedCellCost(misguess_factor=5.0)
    for name, plan in (("true costs", None), ("5x off, learned", mode.plan(bench, 0))):
        clear_run_shared_caches()
        start = time.perf_counter()
        result = simulate(bench, GittinsPolicy(BATCH_SIZE, lam=LAM), bench.prices, prior, seed=0,
                          cell_costs=bench.cell_costs, cost_plan=plan)
        seconds = time.perf_counter() - start
        refreshes = result.summary.get("cost_refreshes", 0)
        built = cost_grid._grid_table.cache_info().currsize
        print(f"one GSM8K run, {name:<16} {seconds:6.2f} s, {refreshes} refreshes, {built} grid tables built")


if __name__ == "__main__":
    main()
