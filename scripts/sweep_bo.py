"""Configuration-level BO baselines against GittinsEval-S: regret at 2%, 5% and 10% of exhaustive cost.

PBGI, LogEI and LogEIPC (lambda = 1e-4, 5% random initial design, 10% budget)
and GittinsEval-S (specific prior, lambda = 1e-4, LCB rule) on AlpacaEval (the
paper's 152 arms; B = 8) and one MMLU subject (B = 2), under unit and
cost-aware costs, seeds 0..S-1.  Prints mean ± 1 SE of the simple regret after
the last query within each cost level, the mean cost % at which the stopping
signal fired, and the median wall time per run; writes every run
(trace.csv/summary.json) under --out for ``scripts/plot.py``.  One process,
one torch thread.

    python scripts/sweep_bo.py [--seeds 20] [--subject college_mathematics] [--out outputs/sweep_bo]
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path

import numpy as np
import torch

from baselines.logei import LogEIPolicy
from baselines.logeipc import LogEIPCPolicy
from baselines.pbgi import PBGIPolicy
from gittinseval import BenchmarkPrior, GittinsPolicy, PriceCost, UnitCost, simulate
from gittinseval.data import load_alpacaeval_paper, load_mmlu
from gittinseval.simulator import regret_at

PERCENTS = (2, 5, 10)


def policies(batch_size: int) -> dict[str, object]:
    return {
        "PBGI": PBGIPolicy,
        "LogEI": LogEIPolicy,
        "LogEIPC": LogEIPCPolicy,
        f"GittinsEval-S (B={batch_size})": lambda: GittinsPolicy(batch_size=batch_size),
    }


def summarise(values: list[float | None]) -> str:
    present = np.array([v for v in values if v is not None])
    if present.size == 0:
        return "n/a"
    se = present.std(ddof=1) / np.sqrt(present.size) if present.size > 1 else 0.0
    missing = "" if present.size == len(values) else f" [{present.size}/{len(values)}]"
    return f"{present.mean():.4f} ± {se:.4f}{missing}"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", type=int, default=20, help="seeds per policy (default: %(default)s)")
    parser.add_argument("--subject", default="college_mathematics",
        help="MMLU subject of the sweep (default: %(default)s)"
    )
    parser.add_argument("--out", type=Path, default=Path("outputs/sweep_bo"),
        help="folder of the runs and the table (default: %(default)s)"
    )
    args = parser.parse_args()
    torch.set_num_threads(1)
    settings = [(load_alpacaeval_paper(), 8), (load_mmlu(args.subject), 2)]
    header = f"{'benchmark':<26}{'cost':<7}{'policy':<22}" + "".join(f"{f'regret@{p}%':>28}" for p in PERCENTS)
    print(header + f"{'stop %':>10}{'median s/run':>14}", flush=True)
    for benchmark, batch_size in settings:
        prior = BenchmarkPrior().resolve(benchmark)
        for cost_model in (UnitCost(), PriceCost()):
            costs = cost_model(benchmark)
            for label, make_policy in policies(batch_size).items():
                regrets: dict[int, list[float | None]] = {p: [] for p in PERCENTS}
                walls, stops = [], []
                for seed in range(args.seeds):
                    started = time.perf_counter()
                    result = simulate(
                        benchmark, make_policy(), costs, prior, seed=seed,
                        cost_mode=cost_model.name, prior_name=prior.name,
                    )
                    walls.append(time.perf_counter() - started)
                    name = f"{benchmark.name.replace('/', '_')}/{cost_model.name}/{result.summary['policy']}/{seed}"
                    result.save(args.out / name)
                    trace = result.trace
                    for p in PERCENTS:
                        regrets[p].append(regret_at(trace["cost_pct"], trace["regret"], p))
                    if result.summary["stop_cost_pct"] is not None:
                        stops.append(result.summary["stop_cost_pct"])
                stop = "-" if not stops else f"{np.mean(stops):.2f}" + (
                    "" if len(stops) == args.seeds else f"({len(stops)})"
                )
                row = f"{benchmark.name:<26}{cost_model.name:<7}{label:<22}"
                row += "".join(f"{summarise(regrets[p]):>28}" for p in PERCENTS)
                print(row + f"{stop:>10}{np.median(walls):>14.2f}", flush=True)


if __name__ == "__main__":
    main()
