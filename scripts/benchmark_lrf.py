"""Time UCB-E-LRF steps in both dropout modes against BanditEval's step function (a benchmark, not a test).

    OMP_NUM_THREADS=1 .venv/bin/python scripts/benchmark_lrf.py [--subject high_school_psychology]
        [--observed 0.06] [--rounds 5] [--block 5] [--reference-steps 3] [--threads 1]

On an MMLU subject (high_school_psychology: K = 1500 arms x N = 545 examples),
observes a uniformly random ``--observed`` share of the cells (just past the 5%
warm-up, where LRF spends its steps), then times, in one process and on the
same matrix, with the paper's ensemble (rank 1, 64 members, 10 ALS rounds, B = 32):

* ``banditeval.bandits.upper_confidence_bound_exploration_low_rank_factorization``,
  ``--reference-steps`` calls;
* :class:`gittinseval.baselines.lrf.LRFPolicy` with ``dropout_draws="stream"`` (parity: the
  reference's whole ``torch.rand(E, K, N)`` stream per fit), with
  ``dropout_draws="observed"`` (the dropout of the observed cells only; the
  experiments' default) and with ``"observed"`` and ``warm_start=true``: blocks of
  ``--block`` consecutive steps, each a ``select`` (refit, arm scores, batch) plus
  the ``observe`` of its batch, so every step sees the cells the previous one added.

The kinds of step are interleaved, ``--rounds`` rounds of one block of each of ours
and (in the first ``--reference-steps`` rounds) one banditeval step, so that a
change in the machine's load shifts them alike.  A stream step draws the next
step's random numbers on a second thread while it fits; a block ends when the draw
it started last is done, so each block's time holds as many draws as steps.

Prints the median wall and CPU seconds per step of each (CPU: this process's user +
system time, summed over its threads; on a shared machine it is the steadier
figure), then the ratios parity / observed and banditeval / observed, each as the
ratio of the medians and the range of its per-round ratios (a round's blocks ran
back to back).  Runs torch on ``--threads`` threads (default 1: ``torch.set_num_threads``;
start it under ``OMP_NUM_THREADS=1`` so that no other library spawns a pool either).
Needs ``banditeval==0.1.1``.
"""

from __future__ import annotations

import argparse
import statistics
import time
from collections.abc import Callable

import numpy as np
import torch
from banditeval.bandits import upper_confidence_bound_exploration_low_rank_factorization

from gittinseval import EvaluationProblem, Request
from gittinseval.baselines.lrf import LowRankEnsemble, LRFPolicy
from gittinseval.data import load_mmlu

BATCH_SIZE = 32
LABELS = {
    "banditeval": "banditeval LRF step",
    "stream": "ours, dropout_draws=stream (parity)",
    "observed": "ours, dropout_draws=observed",
    "warm": "ours, observed + warm_start=true",
}


def observed_policy(scores: np.ndarray, observed: np.ndarray, seed: int, dropout_draws: str, warm_start: bool):
    """A policy past its warm-up that has observed the cells ``observed``."""
    n_arms, n_examples = scores.shape
    ensemble = LowRankEnsemble(dropout_draws=dropout_draws)
    policy = LRFPolicy(batch_size=BATCH_SIZE, ensemble=ensemble, warm_start=warm_start)
    problem = EvaluationProblem(n_examples, np.ones(n_arms), 0.1 * n_arms * n_examples, binary=True)
    policy.reset(problem, np.random.default_rng(seed))
    policy.warmup.clear()
    for arm in range(n_arms):
        examples = np.flatnonzero(observed[arm])
        if examples.size:
            policy.observe(Request(arm, examples), scores[arm, examples])
    return policy


def timed(function: Callable[[], None]) -> tuple[float, float]:
    """Wall seconds and CPU seconds of this process (all its threads) of one call."""
    wall, cpu = time.perf_counter(), time.process_time()
    function()
    return time.perf_counter() - wall, time.process_time() - cpu


def step(policy: LRFPolicy, scores: np.ndarray) -> None:
    request = policy.select()
    policy.observe(request, scores[request.arm, request.examples])


def ratio_summary(numerator: list[float], denominator: list[float]) -> str:
    """Ratio of the medians, and the range of the ratios of the rounds both ran."""
    per_round = [a / b for a, b in zip(numerator, denominator, strict=False)]
    median = statistics.median(numerator) / statistics.median(denominator)
    return f"{median:8.1f}  (per round {min(per_round):.1f}-{max(per_round):.1f})"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--subject", default="high_school_psychology", help="MMLU subject whose matrix is timed (default: %(default)s)"
    )
    parser.add_argument("--observed", type=float, default=0.06, help="share of observed cells")
    parser.add_argument("--rounds", type=int, default=5, help="timed blocks of each of ours")
    parser.add_argument("--block", type=int, default=5, help="consecutive steps of ours per timed block")
    parser.add_argument("--reference-steps", type=int, default=3, help="timed banditeval steps")
    parser.add_argument("--threads", type=int, default=1, help="torch threads for all (default: %(default)s)")
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    scores = load_mmlu(args.subject).scores
    n_arms, n_examples = scores.shape
    observed = np.random.default_rng(0).uniform(size=scores.shape) < args.observed
    matrix = torch.tensor(np.where(observed, scores, np.nan), dtype=torch.float32)
    torch.manual_seed(0)

    policies = {
        "stream": observed_policy(scores, observed, 1, "stream", warm_start=False),
        "observed": observed_policy(scores, observed, 1, "observed", warm_start=False),
        "warm": observed_policy(scores, observed, 1, "observed", warm_start=True),
    }
    for policy in policies.values():
        step(policy, scores)  # warm's cold first fit; the draws of stream's first timed step are made during it

    def block(policy: LRFPolicy) -> None:
        for _ in range(args.block):
            step(policy, scores)
        if policy.draws_ahead is not None:
            policy.draws_ahead.settle()

    steps: dict[str, Callable[[], None]] = {
        "banditeval": lambda: upper_confidence_bound_exploration_low_rank_factorization(matrix, batch_size=BATCH_SIZE),
        **{name: (lambda policy=policy: block(policy)) for name, policy in policies.items()},
    }
    counts = {"banditeval": args.reference_steps, **dict.fromkeys(policies, args.rounds)}
    per_step = {"banditeval": 1, **dict.fromkeys(policies, args.block)}
    wall: dict[str, list[float]] = {name: [] for name in steps}
    cpu: dict[str, list[float]] = {name: [] for name in steps}
    for round_ in range(max(counts.values())):
        for name, function in steps.items():
            if round_ < counts[name]:
                seconds = timed(function)
                wall[name].append(seconds[0] / per_step[name])
                cpu[name].append(seconds[1] / per_step[name])

    print(
        f"{args.subject}: K={n_arms} x N={n_examples}, {observed.mean():.1%} observed, B={BATCH_SIZE}, "
        f"{torch.get_num_threads()} torch thread(s); median seconds per step (CPU of each timed round in brackets)"
    )
    print(f"{'':38s} {'wall':>8s} {'cpu':>8s}")
    for name, label in LABELS.items():
        spread = ", ".join(f"{t:.3f}" for t in cpu[name])
        print(f"{label:38s} {statistics.median(wall[name]):8.3f} {statistics.median(cpu[name]):8.3f}   ({spread})")
    for numerator, label in (("stream", "parity"), ("banditeval", "banditeval")):
        print(f"ratio {label} / observed, cpu:  {ratio_summary(cpu[numerator], cpu['observed'])}")
        print(f"ratio {label} / observed, wall: {ratio_summary(wall[numerator], wall['observed'])}")
    print(f"speed-up of warm_start over observed, cpu: {ratio_summary(cpu['observed'], cpu['warm'])}")


if __name__ == "__main__":
    main()
