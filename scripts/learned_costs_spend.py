"""Where the spend of each cost plan went on the real GSM8K matrix, run by run (the learned-costs page).

    python scripts/learned_costs_spend.py outputs/learned_costs [--percent 10]

For the GittinsEval runs of an ``experiment=learned_costs`` sweep folder (the results store
keeps no traces), by cost plan: the mean share of the spend up to ``--percent`` % of the
exhaustive cost that went to the arms the run's guess made five times cheaper than they
are, to those it made five times dearer (the arms of ``cost=per_cell_learned`` for that
seed, whatever the plan), and to the six most accurate models.
"""

from __future__ import annotations

import argparse
from collections import defaultdict

import numpy as np

from gittinseval import LearnedCellCost
from gittinseval.data import load_gsm8k_zeroeval
from gittinseval.sim.results_store import find_runs

TOP_ARMS = 6


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("sweep", help="a sweep folder of experiment=learned_costs (runs with their traces)")
    parser.add_argument("--percent", type=float, default=10.0, help="share of the exhaustive cost (default: 10)")
    args = parser.parse_args()
    bench = load_gsm8k_zeroeval()
    misguess = LearnedCellCost(misguess_factor=5.0)
    best = np.argsort(-bench.row_means)[:TOP_ARMS]
    shares: dict[str, list[tuple[float, float, float]]] = defaultdict(list)
    for run in find_runs(args.sweep):
        if run.summary["policy"] != "gittins":
            continue
        ratio = misguess.guess(bench, run.summary["seed"]) / bench.prices
        within = run.trace["cost_pct"] <= args.percent
        arms = run.trace["arm"][within]
        spend = np.diff(run.trace["cost"], prepend=0.0)[within]
        total = spend.sum()
        shares[run.summary["cost_plan"]].append(
            tuple(spend[np.isin(arms, group)].sum() / total
                  for group in (np.flatnonzero(ratio < 1), np.flatnonzero(ratio > 1), best))
        )
    print(f"share of the spend to {args.percent:g} % | guessed 5x cheap | guessed 5x dear | the {TOP_ARMS} best | runs")
    for plan, values in sorted(shares.items()):
        cheap, dear, top = np.mean(values, axis=0)
        print(f"{plan:<28} | {cheap:16.3f} | {dear:15.3f} | {top:10.3f} | {len(values)}")


if __name__ == "__main__":
    main()
