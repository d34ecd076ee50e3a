"""The final-certificate numbers (gittinseval/results/certificates.py) against means and counts taken by hand."""

import pytest

from gittinseval.results.certificates import certificate_rows
from gittinseval.results.stats import Share


def _run(label, prob_best, covered, benchmark="toy"):
    certificate = {"lower": 0.6, "upper": 0.8, "true_mean": 0.7 if covered else 0.9, "level": 0.9, "eps": 0.02,
                   "prob_best": prob_best, "prob_eps_best": prob_best + 0.1}
    return {"benchmark": benchmark, "cost_mode": "unit", "label": label, "certificate": certificate}


def test_a_row_per_benchmark_cost_and_label_with_its_means_and_coverage():
    runs = [_run("L", 0.5, True), _run("L", 0.7, False), _run("A", 0.2, True), _run("L", 0.1, True, "other"),
            {"benchmark": "toy", "cost_mode": "unit", "label": "L", "certificate": None}]  # made before certificates
    rows = certificate_rows(runs)
    assert [(row.benchmark, row.label) for row in rows] == [("other", "L"), ("toy", "A"), ("toy", "L")]
    row = rows[-1]
    assert row.runs == 2 and (row.eps, row.level) == (0.02, 0.9)
    assert row.prob_best == pytest.approx(0.6) and row.prob_eps_best == pytest.approx(0.7)
    assert row.covered == Share(1, 2)


def test_runs_without_a_certificate_give_no_rows():
    assert certificate_rows([{"benchmark": "toy", "cost_mode": "unit", "label": "L"}]) == []
