"""Time UCB-E-LRF steps against BanditEval's step function (a benchmark, not a test).

    python scripts/benchmark_lrf.py [--subject high_school_psychology] [--observed 0.06]
                                    [--steps 5] [--reference-steps 3] [--threads 1]

On an MMLU subject (high_school_psychology: K = 1500 arms x N = 545 examples),
observes a uniformly random ``--observed`` share of the cells (just past the 5%
warm-up, where LRF spends its steps), then times, in one process and on the
same matrix:

* ``banditeval.bandits.upper_confidence_bound_exploration_low_rank_factorization``
  (B = 32, 64 members, rank 1, 10 ALS rounds), ``--reference-steps`` calls;
* :class:`baselines.lrf.LRFPolicy` in parity mode, ``--steps`` consecutive
  steps, each ``select`` (refit, arm scores, batch) plus the ``observe`` of its
  batch, so every step sees the cells the previous one added;
* the same with ``warm_start=true`` (its first, cold fit is not timed).

The three kinds of step are interleaved so that a change in the machine's load
shifts them alike: each round times one banditeval step and a block of ``--block``
consecutive steps of each of ours (per-step time: the block's time over its size).
A parity step draws the next step's random numbers on a second thread while it
fits; a block ends when the draw it started last is done, so each block's time holds
as many draws as steps.  Prints the median wall and CPU seconds per step of each
(CPU: this process's user + system time, summed over its threads; on a shared
machine it is the steadier figure), the ratios banditeval / ours (parity) and
the warm-start speed-ups over parity.  Needs ``banditeval==0.1.1``.
"""

from __future__ import annotations

import argparse
import statistics
import time

import numpy as np
import torch
from banditeval.bandits import upper_confidence_bound_exploration_low_rank_factorization

from baselines.lrf import LRFPolicy
from gittinseval import EvaluationProblem, Request
from gittinseval.data import load_mmlu


def observed_policy(scores: np.ndarray, observed: np.ndarray, seed: int, warm_start: bool) -> LRFPolicy:
    """A policy past its warm-up that has observed the cells ``observed``."""
    n_arms, n_examples = scores.shape
    policy = LRFPolicy(batch_size=32, warm_start=warm_start)
    problem = EvaluationProblem(n_examples, np.ones(n_arms), 0.1 * n_arms * n_examples, binary=True)
    policy.reset(problem, np.random.default_rng(seed))
    policy.warmup.clear()
    for arm in range(n_arms):
        examples = np.flatnonzero(observed[arm])
        if examples.size:
            policy.observe(Request(arm, examples), scores[arm, examples])
    return policy


def timed(function) -> tuple[float, float]:
    """Wall seconds and CPU seconds of this process (all its threads) of one call."""
    wall, cpu = time.perf_counter(), time.process_time()
    function()
    return time.perf_counter() - wall, time.process_time() - cpu


def step(policy: LRFPolicy, scores: np.ndarray) -> None:
    request = policy.select()
    policy.observe(request, scores[request.arm, request.examples])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--subject", default="high_school_psychology",
        help="MMLU subject whose matrix is timed (default: %(default)s)")
    parser.add_argument("--observed", type=float, default=0.06, help="share of observed cells")
    parser.add_argument("--steps", type=int, default=5, help="timed blocks of ours, per mode")
    parser.add_argument("--block", type=int, default=5, help="consecutive steps of ours per timed block")
    parser.add_argument("--reference-steps", type=int, default=3, help="timed banditeval steps")
    parser.add_argument("--threads", type=int, default=None, help="torch threads for both (default: torch's)")
    args = parser.parse_args()
    if args.threads is not None:
        torch.set_num_threads(args.threads)
    scores = load_mmlu(args.subject).scores
    n_arms, n_examples = scores.shape
    observed = np.random.default_rng(0).uniform(size=scores.shape) < args.observed
    matrix = torch.tensor(np.where(observed, scores, np.nan), dtype=torch.float32)
    torch.manual_seed(0)

    parity = observed_policy(scores, observed, 1, warm_start=False)
    warm = observed_policy(scores, observed, 1, warm_start=True)
    step(warm, scores)  # the cold first fit
    step(parity, scores)  # the draws of the first timed step are made during this one
    def block(policy: LRFPolicy) -> None:
        for _ in range(args.block):
            step(policy, scores)
        if policy.draws_ahead is not None:
            policy.draws_ahead.settle()

    steps = {
        "banditeval": lambda: upper_confidence_bound_exploration_low_rank_factorization(matrix, batch_size=32),
        "parity": lambda: block(parity),
        "warm": lambda: block(warm),
    }
    counts = {"banditeval": args.reference_steps, "parity": args.steps, "warm": args.steps}
    times: dict[str, list[tuple[float, float]]] = {name: [] for name in steps}
    for round_ in range(max(counts.values())):
        for name, function in steps.items():
            if round_ < counts[name]:
                times[name].append(timed(function))
    per_step = {"banditeval": 1, "parity": args.block, "warm": args.block}
    times = {name: [(w / per_step[name], c / per_step[name]) for w, c in values] for name, values in times.items()}
    wall = {name: statistics.median(t[0] for t in values) for name, values in times.items()}
    cpu = {name: statistics.median(t[1] for t in values) for name, values in times.items()}

    print(
        f"{args.subject}: K={n_arms} x N={n_examples}, {observed.mean():.1%} observed, "
        f"{torch.get_num_threads()} torch threads; median seconds per step (per step of each block in brackets)"
    )
    print(f"{'':38s} {'wall':>8s} {'cpu':>8s}")
    for name, label in (
        ("banditeval", "banditeval LRF step"),
        ("parity", "ours, parity mode (select + observe)"),
        ("warm", "ours, warm_start=true"),
    ):
        spread = ", ".join(f"{t[0]:.3f}" for t in times[name])
        print(f"{label:38s} {wall[name]:8.3f} {cpu[name]:8.3f}   ({spread})")
    print(f"{'ratio banditeval / ours (parity)':38s} {wall['banditeval'] / wall['parity']:8.1f} "
          f"{cpu['banditeval'] / cpu['parity']:8.1f}")
    print(f"{'speed-up of warm_start over parity':38s} {wall['parity'] / wall['warm']:8.1f} "
          f"{cpu['parity'] / cpu['warm']:8.1f}")

if __name__ == "__main__":
    main()
