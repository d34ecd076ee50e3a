"""Sweep the bandit baselines next to GittinsEval-S and tabulate regret and wall time.

    python scripts/sweep_bandits.py [--seeds 20] [--subject college_mathematics] [--out outputs/sweep_bandits]

Runs, one process and one run at a time, unit cost and a 10% budget:
  * MMLU ``--subject`` (B = 2 for ucbe/gittins/uniform, the paper's batch size for
    small subjects; B = 32 for lrf; sysrs in blocks of 2; prompteval one cell a time),
  * AlpacaEval (B = 8, lrf B = 32; prompteval left out: its Rasch model needs
    binary scores).
GittinsEval-S is ``policy=gittins`` with ``prior=specific``.  Each run is saved
under ``--out/<benchmark>/<policy>/seed=<s>/``; runs already saved are read back,
so an interrupted sweep resumes.  Wall times are of one process with
``--threads`` torch threads (1 by default).  Prints a Markdown table of the mean regret
(+- standard error) at 1%, 2%, 5% and 10% of the exhaustive cost and the median
wall time per run, and writes it to ``--out/table.md``.
"""

from __future__ import annotations

import argparse
from pathlib import Path

import numpy as np
import torch
from hydra import compose, initialize_config_dir
from hydra.utils import instantiate

from gittinseval.cli import CONFIG_DIR
from gittinseval.simulator import RunResult, regret_at, simulate

PERCENTS = (1, 2, 5, 10)


def settings(subject: str) -> dict[str, tuple[list[str], dict[str, list[str]]]]:
    """Per benchmark: its config overrides and, per policy, the policy overrides."""
    mmlu = ["benchmark=mmlu", f"benchmark.subject={subject}"]
    small, wide = ["policy.batch_size=2"], ["policy.batch_size=8"]
    return {
        f"mmlu_{subject}": (
            mmlu,
            {
                "gittins": small,
                "ucbe": small,
                "lrf": ["policy.batch_size=32"],
                "sysrs": small,
                "prompteval": ["policy.batch_size=1"],
                "uniform": small,
            },
        ),
        "alpacaeval": (
            ["benchmark=alpacaeval"],
            {"gittins": wide, "ucbe": wide, "lrf": ["policy.batch_size=32"], "sysrs": wide, "uniform": wide},
        ),
    }


def run_or_load(directory: Path, benchmark, policy_cfg, costs, prior, seed: int) -> RunResult:
    """The saved run in ``directory``, or a new simulation saved there."""
    if (directory / "summary.json").is_file():
        return RunResult.load(directory)
    policy = instantiate(policy_cfg)
    result = simulate(benchmark, policy, costs, prior, seed=seed, cost_mode="unit", prior_name=prior.name)
    result.save(directory)
    return result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", type=int, default=20, help="seeds per policy (default: %(default)s)")
    parser.add_argument("--subject", default="college_mathematics",
        help="MMLU subject of the sweep (default: %(default)s)"
    )
    parser.add_argument("--out", type=Path, default=Path("outputs/sweep_bandits"),
        help="folder of the runs and the table (default: %(default)s)"
    )
    parser.add_argument("--only", nargs="*", help="policies to run (default: all)")
    parser.add_argument("--threads", type=int, default=1, help="torch threads (small ops lose to thread overhead)")
    args = parser.parse_args()
    torch.set_num_threads(args.threads)

    lines = [
        "| benchmark | policy | B | runs | " + " | ".join(f"regret @{p}%" for p in PERCENTS) + " | median wall s |",
        "|---" * (5 + len(PERCENTS)) + "|",
    ]
    with initialize_config_dir(config_dir=str(CONFIG_DIR), version_base="1.3"):
        for bench_name, (bench_overrides, policies) in settings(args.subject).items():
            base = compose(config_name="config", overrides=[*bench_overrides, "prior=specific", "cost=unit"])
            benchmark = instantiate(base.benchmark)
            costs = instantiate(base.cost)(benchmark)
            prior = instantiate(base.prior).resolve(benchmark)
            for name, overrides in policies.items():
                if args.only and name not in args.only:
                    continue
                cfg = compose(config_name="config", overrides=[*bench_overrides, f"policy={name}", *overrides])
                regrets, times = [], []
                for seed in range(args.seeds):
                    directory = args.out / bench_name / name / f"seed={seed}"
                    result = run_or_load(directory, benchmark, cfg.policy, costs, prior, seed)
                    trace = result.trace
                    regrets.append([regret_at(trace["cost_pct"], trace["regret"], p) for p in PERCENTS])
                    times.append(result.summary["wall_time_s"])
                    print(f"{bench_name} {name} seed={seed}: final regret {trace['regret'][-1]:.4f}, "
                          f"{times[-1]:.1f} s", flush=True)
                regrets = np.array(regrets, dtype=np.float64)  # None (no step yet) -> nan
                mean = np.nanmean(regrets, axis=0)
                error = np.nanstd(regrets, axis=0, ddof=1) / np.sqrt(np.sum(~np.isnan(regrets), axis=0))
                cells = " | ".join(f"{m:.4f} ± {e:.4f}" for m, e in zip(mean, error, strict=True))
                label = result.summary["label"]
                batch = result.summary["batch_size"]
                lines.append(f"| {bench_name} | {label} | {batch} | {len(times)} | {cells} | {np.median(times):.2f} |")
    table = "\n".join(lines)
    print(table)
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "table.md").write_text(table + "\n")


if __name__ == "__main__":
    main()
