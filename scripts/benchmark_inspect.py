"""Overhead of the inspect_ai adapter per batch, on top of the model's own time (target: at most 0.3 s).

Scores batches of ``--batch-size`` samples of the bundled arithmetic task
(gittinseval/live/examples/inspect_arithmetic.py) through
:class:`gittinseval.live.tasks.inspect_task.InspectScorer`, on inspect's ``mockllm`` with
scripted replies that carry their own usage and answer after ``--latency`` seconds
(the model's own time; samples of a batch run concurrently, so a batch's model time is
one latency).  Prints, over ``--batches`` batches after the first call:

- the first call (inspect's imports and set-up);
- one arm's batch at a time (a policy that is not concurrent): wall seconds per batch
  minus the latency, and CPU seconds per batch;
- ``--arms`` arms' batches asked for at once (a concurrent policy), which run as one
  eval: wall seconds per round minus the latency, and CPU seconds.

With a latency, inspect's ``max_connections`` (10 by default) caps the samples in
flight: more arms x batch size than that makes a round wait for several latencies
(``--max-connections`` raises it).  Wall time is what a run waits; on a busy machine
it includes time the process was not scheduled, so CPU time is printed beside it.

    .venv/bin/python scripts/benchmark_inspect.py --batches 20
    .venv/bin/python scripts/benchmark_inspect.py --batches 10 --latency 0.5 --max-connections 32
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import tempfile
import time
from pathlib import Path

from gittinseval.live.examples.inspect_arithmetic import scripted_replies
from gittinseval.live.tasks.inspect_task import inspect_task

EXAMPLES = Path(__file__).resolve().parent.parent / "gittinseval" / "live" / "examples"


def summary(values: list[float]) -> str:
    return f"median {statistics.median(values):.3f} s (range {min(values):.3f}-{max(values):.3f})"


async def timed(call) -> tuple[float, float]:
    wall, cpu = time.perf_counter(), time.process_time()
    await call()
    return time.perf_counter() - wall, time.process_time() - cpu


async def measure(task, n_batches: int, batch_size: int, n_arms: int, latency: float) -> None:
    scorer, examples = task.score_fn, task.examples

    def batch(start: int) -> list:
        return [examples[(start + i) % len(examples)] for i in range(batch_size)]

    wall, cpu = await timed(lambda: scorer(task.arms[0], batch(0)))
    print(f"first call: {wall:.3f} s wall, {cpu:.3f} s CPU (imports and set-up, once per process)")
    single = [await timed(lambda k=k: scorer(task.arms[0], batch(k * batch_size))) for k in range(n_batches)]
    print(
        f"one arm's batch of {batch_size} at a time: overhead {summary([w - latency for w, _ in single])} wall, "
        f"{summary([c for _, c in single])} CPU per batch"
    )

    async def one_round(k: int) -> None:
        await asyncio.gather(*(scorer(arm, batch(k * batch_size)) for arm in task.arms))

    rounds = [await timed(lambda k=k: one_round(k)) for k in range(n_batches)]
    print(
        f"{n_arms} arms' batches at once (one eval): overhead {summary([w - latency for w, _ in rounds])} wall, "
        f"{summary([c for _, c in rounds])} CPU per round, "
        f"{statistics.median(w - latency for w, _ in rounds) / n_arms:.3f} s wall per batch"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--batches", type=int, default=20)
    parser.add_argument("--batch-size", type=int, default=8)
    parser.add_argument("--arms", type=int, default=3)
    parser.add_argument("--latency", type=float, default=0.0, help="seconds of the model per reply")
    parser.add_argument(
        "--max-connections", type=int, default=None, help="inspect's concurrent calls per model (default: its own)"
    )
    args = parser.parse_args()
    models = [f"mockllm/arm{k}" for k in range(args.arms)]
    with tempfile.TemporaryDirectory() as logs:
        task = inspect_task(
            f"{EXAMPLES / 'inspect_arithmetic.py'}@arithmetic",
            arms=[{"model": model} for model in models],
            prices={model: {"input": 0.1, "output": 0.4} for model in models},
            tokens={"input": 40, "output": 6},
            model_args={model: {"custom_outputs": scripted_replies(1.0, 40, 6, args.latency)} for model in models},
            log_dir=logs,
            eval_options={} if args.max_connections is None else {"max_connections": args.max_connections},
        )
        print(
            f"inspect adapter, mockllm, {args.batches} batches of {args.batch_size} samples, "
            f"{args.arms} arms, model latency {args.latency} s, max_connections {args.max_connections or 'default'}; "
            "logs written to a temporary folder"
        )
        asyncio.run(measure(task, args.batches, args.batch_size, args.arms, args.latency))


if __name__ == "__main__":
    main()
