"""Helpers of the results tests: fake runs with a given trace, and the reports of the committed stores."""

import time
from pathlib import Path

import numpy as np
import pytest

from gittinseval.results.manifest import read_manifest, read_stores
from gittinseval.results.status import STATUS_DIR, write_status
from gittinseval.results.verdict_tables import VERDICTS_DIR, write_verdicts
from gittinseval.sim.simulator import RunResult

REPOSITORY = Path(__file__).resolve().parents[2]
RESULTS = Path("docs", "results")


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


@pytest.fixture
def in_repository(monkeypatch):
    # The manifest's paths, and the stores' names in each report.md, are relative to the repository.
    monkeypatch.chdir(REPOSITORY)


@pytest.fixture(scope="session")
def regenerated(tmp_path_factory):
    """Every report of the manifest, the status tables and the verdicts, written afresh from the committed
    stores into a folder of their own (``<report name>/``, ``status/`` and ``verdicts/``), without drawing
    figures; and the seconds the reports and status tables took."""
    fresh = tmp_path_factory.mktemp("regenerated")
    with pytest.MonkeyPatch.context() as patch:
        patch.chdir(REPOSITORY)
        start = time.perf_counter()
        reports = read_manifest(RESULTS)
        runs = read_stores(reports)
        for report in reports:
            report.write(fresh / report.name, draw=False, runs=runs[report.store])
        write_status(RESULTS, reports, fresh / STATUS_DIR.name, runs)
        seconds = time.perf_counter() - start
        write_verdicts(RESULTS, reports, fresh / VERDICTS_DIR.name, runs)
    return fresh, reports, seconds
