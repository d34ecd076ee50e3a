"""Where the spend of each cost plan went on the real GSM8K matrix, run by run (the learned-costs page).

    python scripts/learned_costs_spend.py docs/results/learned_costs.parquet [--percent 10] [--out FILE]

For the GittinsEval runs of an ``experiment=learned_costs`` store or sweep folder (whose runs
record ``arm_spend``, the spend on each arm up to each reported share), by cost plan: the
mean share of the spend up to ``--percent`` % of the exhaustive cost that went to the arms
the run's guess made five times cheaper than they are, to those it made five times dearer
(the arms of ``cost=per_cell_learned`` for that seed, whatever the plan), and to the six
most accurate models.  Prints the Markdown table, or writes it to ``--out`` (``make results``
writes the page's).
"""

from __future__ import annotations

import argparse
from collections import defaultdict
from pathlib import Path

import numpy as np

from gittinseval import LearnedCellCost
from gittinseval.data import load_gsm8k_zeroeval
from gittinseval.results.tables import markdown_table
from gittinseval.sim.results_store import load_rows
from gittinseval.sim.simulator import REPORT_PERCENTS

TOP_ARMS = 6


def spend_shares(source: str | Path, percent: int = 10) -> list[dict[str, str]]:
    """One row per cost plan: the mean share of each run's spend up to ``percent`` % per arm group."""
    bench = load_gsm8k_zeroeval()
    misguess = LearnedCellCost(misguess_factor=5.0)
    best = np.argsort(-bench.row_means)[:TOP_ARMS]
    shares: dict[str, list[tuple[float, ...]]] = defaultdict(list)
    for row in load_rows(source):
        summary = row.summary
        if summary["policy"] != "gittins":
            continue
        if "arm_spend" not in summary:
            raise ValueError(f"{source}: a run of seed {summary['seed']} has no arm_spend (run with "
                             "record_arm_spend=true, as experiment=learned_costs does)")
        spend = np.asarray(summary["arm_spend"][f"{percent}pct"])
        ratio = misguess.guess(bench, summary["seed"]) / bench.prices
        groups = (np.flatnonzero(ratio < 1), np.flatnonzero(ratio > 1), best)
        shares[summary["cost_plan"]].append(tuple(spend[group].sum() / spend.sum() for group in groups))
    if not shares:
        raise ValueError(f"{source} holds no GittinsEval run")
    return [
        {f"share of the spend to {percent} %": plan, "guessed 5x cheap": f"{cheap:.3f}",
         "guessed 5x dear": f"{dear:.3f}", f"the {TOP_ARMS} best": f"{top:.3f}", "runs": str(len(values))}
        for plan, values in sorted(shares.items())
        for cheap, dear, top in [np.mean(values, axis=0)]
    ]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("source", help="a results store or sweep folder of experiment=learned_costs")
    parser.add_argument("--percent", type=int, default=10, choices=REPORT_PERCENTS,
                        help="share of the exhaustive cost (default: 10)")
    parser.add_argument("--out", type=Path, help="write the table here instead of printing it")
    args = parser.parse_args()
    table = markdown_table(spend_shares(args.source, args.percent))
    if args.out is None:
        print(table, end="")
    else:
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(table)


if __name__ == "__main__":
    main()
