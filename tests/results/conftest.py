"""Helpers of the results tests: fake runs with a given trace."""

import numpy as np

from gittinseval.sim.simulator import RunResult


def fake_run(cost_pct, regret, label="GittinsEval-G", stop=None, benchmark="toy", seed=0, budget=0.1):
    cost_pct, regret = np.asarray(cost_pct, float), np.asarray(regret, float)
    n = len(cost_pct)
    trace = {
        "step": np.arange(1, n + 1),
        "arm": np.zeros(n, int),
        "batch_size": np.ones(n, int),
        "cost": cost_pct,
        "cost_pct": cost_pct,
        "recommended": np.zeros(n, int),
        "regret": regret,
    }
    summary = {"benchmark": benchmark, "label": label, "stop_cost_pct": stop, "cost_mode": "unit",
               "stand_in": False, "seed": seed, "budget_fraction": budget}
    return RunResult(trace, summary)
