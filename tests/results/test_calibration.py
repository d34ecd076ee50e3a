"""The calibration numbers (gittinseval/results/calibration.py) against counts taken by hand."""

import math

import pytest

from gittinseval.results.calibration import calibration_rows, model_reliability_rows, reliability_rows
from gittinseval.results.stats import Share


def _certificate(prob_best, prob_eps_best, covered, regret):
    return {"lower": 0.6, "upper": 0.8, "true_mean": 0.7 if covered else 0.9, "level": 0.95, "eps": 0.01,
            "prob_best": prob_best, "prob_eps_best": prob_eps_best, "regret": regret}


def _run(benchmark, label, certificates):
    return {"benchmark": benchmark, "cost_mode": "unit", "label": label, "certificates": certificates}


# MMLU (two subjects pooled): at 1 % one run covered and best, one neither and 0.02 off; at the stop one run
# 0.005 off (within 0.01, not best) and not covered.  GSM8K: one certificate at 10 %.
RUNS = [
    _run("mmlu/anatomy", "A", {"1pct": _certificate(0.9, 0.95, True, 0.0),
                               "stop": _certificate(0.5, 1.0, False, 0.005)}),
    _run("mmlu/virology", "A", {"1pct": _certificate(0.1, 0.2, False, 0.02), "stop": None}),
    _run("gsm8k", "B", {"10pct": _certificate(1.0, 1.0, True, 0.0)}),
    _run("gsm8k", "C", None),  # a run without checkpoint certificates
]


def test_calibration_rows_count_each_family_per_label_and_checkpoint():
    rows = calibration_rows(RUNS)
    assert list(rows) == ["gsm8k", "mmlu"]
    first, stop = rows["mmlu"]
    assert (first.label, first.checkpoint, first.runs, first.eps, first.level) == ("A", "1pct", 2, 0.01, 0.95)
    assert (first.covered, first.best, first.within) == (Share(1, 2), Share(1, 2), Share(1, 2))
    assert first.prob_best == pytest.approx(0.5) and first.prob_eps_best == pytest.approx(0.575)
    assert stop.checkpoint == "stop"
    assert (stop.covered, stop.best, stop.within) == (Share(0, 1), Share(0, 1), Share(1, 1))
    assert calibration_rows(RUNS[3:]) == {}


def test_reliability_bins_hold_every_statement_once_and_one_in_the_last_bin():
    bins = reliability_rows(RUNS)["mmlu"]
    assert [(b.low, b.high, b.closed) for b in bins][-1] == (0.95, 1.0, True)
    assert sum(b.best.observed.n for b in bins) == sum(b.within.observed.n for b in bins) == 3
    # P(within 0.01): 0.95 and 1.0 (both came true) share the last bin; 0.2 (0.02 off) opens [0.2, 0.4).
    assert bins[-1].within.observed == Share(2, 2) and bins[-1].within.stated == pytest.approx(0.975)
    assert next(b for b in bins if b.low == 0.2).within.observed == Share(0, 1)
    # P(best) 0.1 falls in [0.05, 0.2); the first bin is empty, its mean statement nan.
    assert bins[1].best.observed == Share(0, 1) and bins[0].best.observed == Share(0, 0)
    assert math.isnan(bins[0].best.stated)


def test_model_reliability_is_the_reliability_of_each_models_statements():
    runs = [{**run, "model_certificates": {"gaussian": run["certificates"], "eb": run["certificates"]}}
            for run in RUNS[:3]]
    tables = model_reliability_rows(runs)
    assert list(tables) == [("gsm8k", "eb"), ("gsm8k", "gaussian"), ("mmlu", "eb"), ("mmlu", "gaussian")]
    observed = [b.within.observed for b in reliability_rows(RUNS)["mmlu"]]
    assert [b.within.observed for b in tables[("mmlu", "eb")]] == observed
