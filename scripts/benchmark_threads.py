"""Time the root tables and a whole run alone and beside one competing CPU-bound process.

    .venv/bin/python scripts/benchmark_threads.py [--repeats 7] [--subject moral_scenarios] [--threads 1 2]

For each torch thread count (``--threads``; 1 is the library's and a run's default, see
``gittinseval/utils/threads.py``), two calls are timed in wall seconds, each ``--repeats`` times
alone and as often beside a competitor (a second Python process spinning on one core),
in turn:

- the root-table call of an MMLU run with its 14 distinct prices (N = 1534, B = 8, lambda = 1e-4 times the
  MMLU prices; ``root_schedule`` with the process's table cache bypassed);
- one whole GittinsEval-S run on ``--subject`` (cost-aware, seed 0), built from the
  experiment's config as ``gittinseval`` builds it (``simulate_config``), with the root
  tables computed afresh.

It prints the median alone, the median beside the competitor and their ratio (the
median of pair-by-pair ratios), for each call and thread count.  Run it on an otherwise
idle machine: the competitor is the only other load it means to measure.
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import time
from collections.abc import Callable

import numpy as np
from hydra import compose, initialize_config_dir

from gittinseval.cli.configs import CONFIG_DIR
from gittinseval.core.roots import root_schedule
from gittinseval.data import load_mmlu
from gittinseval.sim.experiment import simulate_config
from gittinseval.utils.caches import clear_run_shared_caches

SPIN = "while True: pass"


def timed(call: Callable[[], object]) -> float:
    started = time.perf_counter()
    call()
    return time.perf_counter() - started


def pairs(call: Callable[[], object], repeats: int) -> tuple[list[float], list[float]]:
    """``repeats`` wall times of ``call`` alone and beside a spinning process, in turn."""
    alone, busy = [], []
    for _ in range(repeats):
        alone.append(timed(call))
        competitor = subprocess.Popen([sys.executable, "-c", SPIN])
        try:
            time.sleep(0.3)  # let it reach its loop
            busy.append(timed(call))
        finally:
            competitor.kill()
            competitor.wait()
    return alone, busy


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--repeats", type=int, default=7)
    parser.add_argument("--subject", default="moral_scenarios")
    parser.add_argument("--threads", type=int, nargs="+", default=[1, 2])
    args = parser.parse_args()
    prices = np.unique(load_mmlu("professional_law").prices)
    print(f"{len(prices)} distinct MMLU prices; whole run: GittinsEval-S on {args.subject}, cost-aware, seed 0")
    for threads in args.threads:
        def tables(threads: int = threads) -> object:
            return root_schedule(1534, 8, 0.02, 1e-4 * prices, threads=threads)

        with initialize_config_dir(config_dir=str(CONFIG_DIR), version_base="1.3"):
            cfg = compose(config_name="config", overrides=[
                f"benchmark.subject={args.subject}", "prior=specific", "cost=aware", "logger=none",
                f"threads={threads}",
            ])

        def run(cfg=cfg) -> object:
            clear_run_shared_caches()  # every run computes its tables, as a fresh process does
            return simulate_config(cfg)

        for name, call in (("root tables", tables), ("whole run", run)):
            call()  # warm-up: imports, data, caches of the first call
            alone, busy = pairs(call, args.repeats)
            ratios = [b / a for a, b in zip(alone, busy, strict=True)]
            print(f"threads={threads} {name:12s} alone {statistics.median(alone):7.3f} s "
                  f"[{min(alone):.3f}-{max(alone):.3f}], beside a busy process {statistics.median(busy):7.3f} s "
                  f"[{min(busy):.3f}-{max(busy):.3f}], ratio {statistics.median(ratios):.2f} "
                  f"[{min(ratios):.2f}-{max(ratios):.2f}]", flush=True)


if __name__ == "__main__":
    main()
