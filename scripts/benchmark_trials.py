"""Time batched trials (``trials=``) against one job per run, and estimate the MMLU grid.

    python scripts/benchmark_trials.py [--subjects abstract_algebra,high_school_biology,moral_scenarios]
                                       [--seeds 3] [--methods gittins_g,gittins_s,ucbe]

For each subject, method and cost mode, in this process:

- *one job per run*: ``--seeds`` runs as a Hydra sweep without ``trials`` would do them,
  each composing its config and starting with an empty root-table cache (a fresh job);
- *batched*: the same runs through :func:`run_trials` in one job (one config, tables
  built once); the first trial and the mean of the others are timed apart.

Prints per-run CPU seconds of both and their ratio, then estimates the whole grid of the
given methods over the 57 MMLU subjects x 20 seeds x 2 cost modes on 2 cores:
each subject costs its size bucket's measured (first trial + 19 x later trial), scaled
by N / N_measured (the step count grows with N), divided by 2 cores.  This is an
extrapolation from the subjects measured, not a measurement of the grid; the whole
grid itself runs with
``gittinseval -m benchmark.subject=all method=gittins_g,gittins_s,ucbe cost=unit,aware seed=0 trials=20``.
"""

from __future__ import annotations

import argparse
import shutil
import tempfile
import time
from pathlib import Path

from hydra import compose, initialize_config_dir

from gittinseval.cli.configs import CONFIG_DIR
from gittinseval.data import load_mmlu, mmlu_subjects
from gittinseval.sim.experiment import run_trials
from gittinseval.utils.caches import clear_run_shared_caches

SEEDS_PER_SUBJECT, CORES = 20, 2


def compose_run(*overrides: str):
    with initialize_config_dir(config_dir=str(CONFIG_DIR), version_base="1.3"):
        return compose(config_name="config", overrides=[*overrides, "logger=none"])


def cpu_seconds(function) -> float:
    start = time.process_time()
    function()
    return time.process_time() - start


def measure(settings: list[str], seeds: int, out: Path) -> tuple[float, float, float]:
    """CPU seconds per run as one job per run; of the first batched trial; of each later one."""
    start = time.process_time()
    for seed in range(seeds):
        clear_run_shared_caches()  # a fresh job starts without tables
        run_trials(compose_run(*settings, f"seed={seed}"), out / f"single_{seed}")
    single = (time.process_time() - start) / seeds
    clear_run_shared_caches()
    start = time.process_time()
    run_trials(compose_run(*settings, "seed=0"), out / "batched_first")
    first = time.process_time() - start
    start = time.process_time()
    run_trials(compose_run(*settings, "seed=1", f"trials={seeds - 1}"), out / "batched_later")
    later = (time.process_time() - start) / (seeds - 1)
    for path in out.iterdir():  # the next measurement starts from empty run folders
        shutil.rmtree(path)
    return single, first, later


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--subjects", default="abstract_algebra,high_school_biology,moral_scenarios",
                        help="MMLU subjects measured, ideally one per size bucket (default: %(default)s)")
    parser.add_argument("--seeds", type=int, default=3, help="runs per subject, method and cost mode (>= 2)")
    parser.add_argument("--methods", default="gittins_g,gittins_s,ucbe", help="methods of the grid")
    args = parser.parse_args()
    if args.seeds < 2:
        parser.error("--seeds must be at least 2 (the first trial is timed apart from the others)")
    per_bucket: dict[str, tuple[float, float, int]] = {}
    header = ("subject", "method", "cost", "per job s", "first s", "later s", "ratio")
    print("{:26s} {:10s} {:5s} {:>9s} {:>8s} {:>8s} {:>6s}".format(*header))
    with tempfile.TemporaryDirectory() as scratch:
        for subject in args.subjects.split(","):
            first_total = later_total = 0.0
            for method in args.methods.split(","):
                for cost in ("unit", "aware"):
                    settings = [f"benchmark.subject={subject}", f"method={method}", f"cost={cost}"]
                    single, first, later = measure(settings, args.seeds, Path(scratch))
                    batched = (first + later * (args.seeds - 1)) / args.seeds
                    print(f"{subject:26s} {method:10s} {cost:5s} {single:9.3f} {first:8.3f} {later:8.3f} "
                          f"{single / batched:6.2f}")
                    first_total += first
                    later_total += later
            bench = load_mmlu(subject)
            per_bucket[bench.details["size"]] = (first_total, later_total, bench.n_examples)
    estimate = 0.0
    missing = set()
    for subject in mmlu_subjects():
        bench = load_mmlu(subject)
        size = bench.details["size"]
        if size not in per_bucket:
            missing.add(size)
            continue
        first, later, n_measured = per_bucket[size]
        estimate += (first + (SEEDS_PER_SUBJECT - 1) * later) * bench.n_examples / n_measured
    if missing:
        print(f"no subject measured in size bucket(s) {sorted(missing)}: no grid estimate")
        return
    print(f"estimated grid ({args.methods}; 57 subjects x {SEEDS_PER_SUBJECT} seeds x 2 cost modes) with trials=20 "
          f"on {CORES} cores: {estimate / CORES / 60:.1f} min (CPU {estimate / 3600:.2f} h)")


if __name__ == "__main__":
    main()
