"""CPU seconds per run of the expensive MMLU baselines (PBGI, LogEI, LogEIPC, UCB-E-LRF), as the grid runs them.

    OMP_NUM_THREADS=1 .venv/bin/python scripts/benchmark_baselines_speed.py
        [--methods pbgi,logei,logeipc,lrf] [--subjects management,high_school_psychology]
        [--seeds 0] [--cost aware] [--out outputs/benchmark_baselines_speed.json]

Each run is one job of ``paper/mmlu_subjects`` (the experiment's config, 10% budget,
one torch thread), built by :func:`~gittinseval.sim.experiment.simulate_config` and
timed in this process's CPU seconds (``time.process_time``: the machine may be
shared, and wall time then measures the other jobs too).  The default subjects are a
small one (management, 103 examples) and a large one (high_school_psychology, 545);
every BO run fits its GP on the same 1500 configurations, so its time barely depends
on the subject, while LRF's grows with the number of examples.  Prints each run's CPU
seconds and steps, then the median per method and subject, and writes them to
``--out``.  The first run of a process also pays its imports, so each timed run is
preceded by one untimed warm-up run of the same method on the small subject at a 6%
budget.  To compare two checkouts, run this script from each, alternately.
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path
from statistics import median

from hydra import compose, initialize_config_dir

from gittinseval.cli.configs import CONFIG_DIR
from gittinseval.sim.experiment import simulate_config


def grid_config(method: str, subject: str, cost: str, seed: int, budget: float | None = None):
    """The ``paper/mmlu_subjects`` job of ``method`` on ``subject``, logging nothing, on one thread."""
    overrides = ["experiment=paper/mmlu_subjects", "benchmark=mmlu", f"benchmark.subject={subject}",
                 f"method={method}", f"cost={cost}", f"seed={seed}", "logger=none", "threads=1"]
    if budget is not None:
        overrides.append(f"budget={budget}")
    with initialize_config_dir(config_dir=str(CONFIG_DIR), version_base="1.3"):
        return compose(config_name="config", overrides=overrides)


def cpu_seconds(cfg) -> tuple[float, int]:
    """CPU seconds of this process while it simulates ``cfg``, and the run's step count."""
    started = time.process_time()
    summary = simulate_config(cfg).summary
    return time.process_time() - started, int(summary["n_steps"])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--methods", default="pbgi,logei,logeipc,lrf")
    parser.add_argument("--subjects", default="management,high_school_psychology")
    parser.add_argument("--seeds", default="0", help="comma-separated seeds, one run each")
    parser.add_argument("--cost", default="aware", choices=["aware", "unit"])
    parser.add_argument("--out", type=Path, default=Path("outputs/benchmark_baselines_speed.json"))
    args = parser.parse_args()
    subjects, seeds = args.subjects.split(","), [int(seed) for seed in args.seeds.split(",")]
    medians: dict[str, dict[str, float]] = {}
    for method in args.methods.split(","):
        cpu_seconds(grid_config(method, subjects[0], args.cost, seed=0, budget=0.06))  # imports and caches
        for subject in subjects:
            runs = []
            for seed in seeds:
                seconds, steps = cpu_seconds(grid_config(method, subject, args.cost, seed))
                runs.append(seconds)
                print(f"{method:8s} {subject:24s} {args.cost:5s} seed {seed:3d}: {seconds:8.2f} CPU s, {steps} steps",
                      flush=True)
            medians.setdefault(method, {})[subject] = median(runs)
            print(f"== {method} {subject}: median {median(runs):.2f} CPU s over {len(runs)} runs", flush=True)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps({"cost": args.cost, "seeds": seeds, "median_cpu_s": medians}, indent=1))


if __name__ == "__main__":
    main()
