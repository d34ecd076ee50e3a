"""What the posterior-mean recommendation (κ = 0) recommends on the GSM8K stand-ins, run by run.

    python scripts/ablation_recommendations.py outputs/ablation_check [--percent 2]

For each κ = 0 run of a ``paper/ablation_recommendation`` sweep folder (the results store
keeps no traces): the arm recommended after the last batch at or below ``--percent`` % of
the exhaustive cost, on how many questions that arm was seen by then, its row mean and the
matrix's best row mean.  Then, for each stand-in matrix, how many arms lie above 0.25 and
0.3: the arms a posterior mean can promote past the best after a few lucky batches (the
ablation page, "The posterior-mean rule on the GSM8K stand-in").
"""

from __future__ import annotations

import argparse

import numpy as np

from gittinseval.data import load_gsm8k
from gittinseval.sim.results_store import find_runs

MATRIX_SEEDS = range(1, 6)
THRESHOLDS = (0.25, 0.3)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("sweep", help="a sweep folder of paper/ablation_recommendation (runs with their traces)")
    parser.add_argument("--percent", type=float, default=2.0, help="share of the exhaustive cost (default: 2)")
    args = parser.parse_args()
    for run in find_runs(args.sweep):
        if run.summary["kappa"] != 0:
            continue
        means = load_gsm8k(run.summary["benchmark_details"]["matrix_seed"]).row_means
        trace = run.trace
        last = np.searchsorted(trace["cost_pct"], args.percent + 1e-9, side="right") - 1
        arm = trace["recommended"][last]
        seen = trace["batch_size"][: last + 1][trace["arm"][: last + 1] == arm].sum()
        print(f"{run.summary['benchmark']} seed {run.summary['seed']}: recommended arm seen on {seen} questions, "
              f"row mean {means[arm]:.3f}, best {means.max():.3f}")
    for matrix_seed in MATRIX_SEEDS:
        means = load_gsm8k(matrix_seed).row_means
        counts = ", ".join(f"{(means > threshold).sum()} above {threshold}" for threshold in THRESHOLDS)
        print(f"matrix {matrix_seed}: {counts} (best {means.max():.3f})")


if __name__ == "__main__":
    main()
