"""Time the root tables and the policy's per-batch overhead (a benchmark, not a test).

    python scripts/benchmark_roots.py [--repeats 5]

Prints the median time of one root table (N = 1534, B = 8, P = 1025), refined (the
default) and on the plain grid (``refine=False``, the paper's numerics), of the 15
MMLU model-price tables in one batched call (refined and plain) and as 15 separate
calls, and the time per select/observe/recommend cycle of GittinsPolicy with
K = 1500 arms.  Refined and plain are timed in turn, so that their ratio, the
median of the pair-by-pair ratios, holds while the machine's speed drifts.
"""

from __future__ import annotations

import argparse
import statistics
import time

import numpy as np

from gittinseval import EvaluationProblem, GittinsPolicy, root_schedule
from gittinseval.data import load_mmlu


def seconds(function) -> float:
    start = time.perf_counter()
    function()
    return time.perf_counter() - start


def median_seconds(function, repeats: int) -> float:
    return statistics.median(seconds(function) for _ in range(repeats))


def paired_medians(first, second, repeats: int) -> tuple[float, float, float]:
    """Median times of ``first`` and ``second``, run in turn, and the median of their pair-by-pair ratios."""
    pairs = [(seconds(first), seconds(second)) for _ in range(repeats)]
    a, b = zip(*pairs, strict=True)
    return statistics.median(a), statistics.median(b), statistics.median(x / y for x, y in pairs)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=5,
        help="repetitions of each timing (pairs, for refined against plain); medians are printed (default: %(default)s)"
    )
    args = parser.parse_args()
    benchmark = load_mmlu("professional_law")
    costs = 1e-4 * benchmark.prices[::100]  # the 15 model prices

    one, plain, one_ratio = paired_medians(lambda: root_schedule(1534, 8, 0.04, costs[0]),
                                           lambda: root_schedule(1534, 8, 0.04, costs[0], refine=False), args.repeats)
    batched, batched_plain, batched_ratio = paired_medians(
        lambda: root_schedule(1534, 8, 0.04, costs), lambda: root_schedule(1534, 8, 0.04, costs, refine=False),
        args.repeats)
    separate = median_seconds(lambda: [root_schedule(1534, 8, 0.04, c) for c in costs], args.repeats)
    print(f"root table N=1534 B=8 P=1025 (H=192):    {1e3 * one:8.1f} ms")
    print(f"  on the plain grid (refine=False):        {1e3 * plain:8.1f} ms  (refined / plain {one_ratio:.2f})")
    print(f"{len(costs)} tables in one call:                {1e3 * batched:8.1f} ms")
    print(f"  on the plain grid (refine=False):        {1e3 * batched_plain:8.1f} ms  "
          f"(refined / plain {batched_ratio:.2f})")
    print(f"{len(costs)} tables in separate calls:          {1e3 * separate:8.1f} ms  (ratio {separate / batched:.2f})")

    scores = benchmark.scores
    problem = EvaluationProblem(benchmark.n_examples, benchmark.prices, 1e9, 0.4, 0.02, binary=True)
    policy = GittinsPolicy(batch_size=8)
    policy.reset(problem, np.random.default_rng(0))
    n_steps = 5000
    start = time.perf_counter()
    for _ in range(n_steps):
        request = policy.select()
        policy.observe(request, scores[request.arm, request.examples])
        policy.recommend()
    per_step = (time.perf_counter() - start) / n_steps
    print(f"GittinsPolicy select+observe+recommend, K=1500: {1e6 * per_step:8.1f} us per batch")


if __name__ == "__main__":
    main()
