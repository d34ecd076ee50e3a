"""Overhead of live evaluation per request at K = 1500, against the scoring time.

Times, on the bundled MMLU subject (1500 arms), for ``--requests`` requests:

- the bare policy (``GittinsPolicy.select`` + ``observe`` + ``recommend``), as in the simulator;
- ``Evaluator.ask`` + ``tell`` with an in-memory store (policy + bookkeeping + SQLite);
- the same with a SQLite file in WAL mode, ``synchronous=FULL`` (two fsyncs per request);
- the whole driver, ``evaluate(...)`` with a zero-latency matrix scorer at concurrency 1
  (adds the asyncio loop and the thread pool), and the scorer call itself.

    .venv/bin/python scripts/benchmark_live.py --requests 2000
"""

from __future__ import annotations

import argparse
import tempfile
import time
from pathlib import Path

import numpy as np

from gittinseval import EvaluationProblem, GittinsPolicy
from gittinseval.data import load_mmlu
from gittinseval.live import Evaluator, LiveConfig, LiveTask, MatrixScorer, evaluate


def time_policy(scores: np.ndarray, costs: np.ndarray, n_requests: int, batch_size: int) -> float:
    n_arms, n_examples = scores.shape
    policy = GittinsPolicy(batch_size=batch_size)
    problem = EvaluationProblem(n_examples, costs, n_examples * costs.sum(), 0.5, 0.04, binary=True)
    policy.reset(problem, np.random.default_rng(0))
    started = time.perf_counter()
    for _ in range(n_requests):
        request = policy.select()
        policy.observe(request, scores[request.arm, request.examples])
        policy.recommend()
    return (time.perf_counter() - started) / n_requests


def time_evaluator(
    scores: np.ndarray, costs: np.ndarray, n_requests: int, batch_size: int, store: Path | None
) -> float:
    n_arms, n_examples = scores.shape
    policy = GittinsPolicy(batch_size=batch_size)
    task = LiveTask(range(n_arms), range(n_examples), costs=costs, binary=True)
    with Evaluator(task, LiveConfig(policy=policy, store=store)) as evaluator:
        started = time.perf_counter()
        for _ in range(n_requests):
            request = evaluator.ask()
            evaluator.tell(request, scores[request.arm, request.examples])
        return (time.perf_counter() - started) / n_requests


def time_driver(
    scores: np.ndarray, costs: np.ndarray, n_requests: int, batch_size: int, store: Path
) -> tuple[float, float]:
    """Seconds per request of the whole driver, and of the scorer calls inside it."""
    n_arms, n_examples = scores.shape
    scorer = MatrixScorer(scores)
    in_scorer = [0.0]

    def timed_scorer(arm, examples):
        started = time.perf_counter()
        result = scorer(arm, examples)
        in_scorer[0] += time.perf_counter() - started
        return result

    budget = n_requests * batch_size * float(costs.min()) * 0.999
    started = time.perf_counter()
    result = evaluate(
        range(n_arms),
        range(n_examples),
        timed_scorer,
        budget,
        costs=np.full(n_arms, costs.min()),
        policy=GittinsPolicy(batch_size=batch_size),
        binary=True,
        store=store,
        progress=False,
    )
    n_done = len(result.trace["step"])
    return (time.perf_counter() - started) / n_done, in_scorer[0] / n_done


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--requests", type=int, default=2000, help="scoring requests to time (default: %(default)s)")
    parser.add_argument("--batch-size", type=int, default=8, help="examples per request, B (default: %(default)s)")
    parser.add_argument("--subject", default="high_school_psychology",
        help="MMLU subject replayed as the live task (default: %(default)s)"
    )
    args = parser.parse_args()
    bench = load_mmlu(args.subject)
    costs = bench.prices * 1000 / 1e6
    shape = f"K = {bench.n_arms}, N = {bench.n_examples}, B = {args.batch_size}"
    print(f"MMLU {args.subject}: {shape}, {args.requests} requests")
    us = 1e6
    policy = time_policy(bench.scores, costs, args.requests, args.batch_size)
    print(f"  bare policy select+observe+recommend:          {policy * us:9.1f} us/request")
    memory = time_evaluator(bench.scores, costs, args.requests, args.batch_size, None)
    print(f"  Evaluator ask+tell, in-memory store:           {memory * us:9.1f} us/request")
    with tempfile.TemporaryDirectory() as directory:
        on_disk = time_evaluator(bench.scores, costs, args.requests, args.batch_size, Path(directory) / "run.sqlite")
        print(f"  Evaluator ask+tell, SQLite file (WAL, FULL):   {on_disk * us:9.1f} us/request")
        driver, scorer = time_driver(
            bench.scores, costs, args.requests, args.batch_size, Path(directory) / "drv.sqlite"
        )
        print(f"  evaluate() at concurrency 1, file store:       {driver * us:9.1f} us/request")
        print(f"    of which the (zero-latency) matrix scorer:   {scorer * us:9.1f} us/request")
    for latency in (0.1, 1.0):
        print(
            f"  against a {latency:g} s scoring call: ask+tell overhead is {100 * on_disk / latency:.3g}% "
            f"(file store), {100 * memory / latency:.3g}% (in memory)"
        )


if __name__ == "__main__":
    main()
