"""Time one UCB-E-LRF step against BanditEval's step function (a benchmark, not a test).

    python scripts/benchmark_lrf.py [--subject high_school_psychology] [--observed 0.06] [--repeats 3] [--threads 1]

On an MMLU subject (high_school_psychology: K = 1500 arms x N = 545 examples),
observes a uniformly random ``--observed`` share of the cells (just past the 5%
warm-up, where LRF spends its steps), then prints the median wall time of one
post-warm-up step of :class:`baselines.lrf.LRFPolicy` (refit of the 64-member
rank-1 ensemble, arm scores, batch of B = 32) and of
``banditeval.bandits.upper_confidence_bound_exploration_low_rank_factorization``
on the same observed matrix, and their ratio.  Needs ``banditeval==0.1.1``.
"""

from __future__ import annotations

import argparse
import statistics
import timeit

import numpy as np
import torch
from banditeval.bandits import upper_confidence_bound_exploration_low_rank_factorization

from baselines.lrf import LRFPolicy
from gittinseval import EvaluationProblem
from gittinseval.data import load_mmlu


def median_seconds(function, repeats: int) -> float:
    return statistics.median(timeit.repeat(function, number=1, repeat=repeats))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--subject", default="high_school_psychology",
        help="MMLU subject whose matrix is timed (default: %(default)s)"
    )
    parser.add_argument("--observed", type=float, default=0.06, help="share of observed cells")
    parser.add_argument("--repeats", type=int, default=3,
        help="timed steps per implementation; the median is printed (default: %(default)s)"
    )
    parser.add_argument("--threads", type=int, default=1, help="torch threads, for both implementations")
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    scores = load_mmlu(args.subject).scores
    n_arms, n_examples = scores.shape
    rng = np.random.default_rng(0)
    observed = rng.uniform(size=scores.shape) < args.observed

    policy = LRFPolicy(batch_size=32)
    problem = EvaluationProblem(n_examples, np.ones(n_arms), 0.1 * n_arms * n_examples, binary=True)
    policy.reset(problem, rng)
    policy.warmup.clear()
    policy.values = np.where(observed, scores, 0.0)
    policy.observed = observed.copy()
    policy.stats.counts = observed.sum(axis=1)
    policy.stats.sums = policy.values.sum(axis=1)

    matrix = torch.tensor(np.where(observed, scores, np.nan), dtype=torch.float32)
    torch.manual_seed(0)
    ours = median_seconds(policy.select, args.repeats)
    reference = median_seconds(
        lambda: upper_confidence_bound_exploration_low_rank_factorization(matrix, batch_size=32), args.repeats
    )
    threads = torch.get_num_threads()
    print(f"{args.subject}: K={n_arms} x N={n_examples}, {observed.mean():.1%} observed, {threads} torch threads")
    print(f"LRFPolicy.select (refit + scores + batch): {ours:8.3f} s")
    print(f"banditeval LRF step:                       {reference:8.3f} s")
    print(f"ratio banditeval / ours:                   {reference / ours:8.2f}")


if __name__ == "__main__":
    main()
