"""The confidence-stop numbers (gittinseval/results/confidence_stop.py) against counts taken by hand."""

import math

import pytest

from gittinseval.results.confidence_stop import confidence_stop_rows
from gittinseval.results.stats import Share


def _run(label, step, regret=None, cost_pct=None):
    stop = {"prob_eps_best": 0.9, "eps": 0.01, "step": step, "cost_pct": cost_pct, "regret": regret}
    return {"benchmark": "toy", "cost_mode": "unit", "label": label, "confidence_stop": stop}


def test_fired_stops_their_mean_cost_and_the_wrong_ones():
    runs = [_run("A", 3, 0.0, 2.0), _run("A", 5, 0.05, 4.0), _run("A", None), _run("B", None),
            {"benchmark": "toy", "cost_mode": "unit", "label": "C"}]  # no confidence stop recorded
    a, b = confidence_stop_rows(runs)
    assert (a.label, a.runs, a.fired, a.eps) == ("A", 3, 2, 0.01) and a.delta == pytest.approx(0.1)
    assert a.wrong == Share(1, 2) and a.cost_pct == pytest.approx(3.0)
    assert (b.label, b.fired) == ("B", 0) and math.isnan(b.cost_pct)
