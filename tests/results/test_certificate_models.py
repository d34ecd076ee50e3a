"""The model-comparison tables (gittinseval.results.certificate_models) against hand counts on made-up summaries."""

import numpy as np
import pytest

from gittinseval.results.certificate_models import (
    ANYTIME,
    calibration_rows,
    expected_calibration_error,
    regret_rows,
    stop_rows,
    verdicts,
)


def test_the_expected_calibration_error_is_the_binned_gap_between_stated_and_observed():
    rng = np.random.default_rng(0)
    stated = rng.random(400)
    happened = rng.random(400) < stated
    # Brute force: the five bins one by one.
    error = 0.0
    for low in (0.0, 0.2, 0.4, 0.6, 0.8):
        inside = (stated >= low) & (stated < low + 0.2) if low < 0.8 else stated >= 0.8
        error += inside.mean() * abs(stated[inside].mean() - happened[inside].mean())
    assert expected_calibration_error(stated, happened) == pytest.approx(error)
    # Calibrated statements: a small error; statements of 0.9 that never come true: 0.9.
    assert expected_calibration_error(stated, happened) < 0.08
    assert expected_calibration_error([0.9] * 10, [False] * 10) == pytest.approx(0.9)
    assert np.isnan(expected_calibration_error([], []))


def _statement(model, prob, regret, covered, certified_eps, lcb_regret):
    true_mean = 0.8
    return {
        "prob_eps_best": prob, "prob_best": prob / 2, "eps": 0.01, "regret": regret, "true_mean": true_mean,
        "lower": true_mean - 0.01 if covered else true_mean + 0.01, "upper": true_mean + 0.02, "model": model,
        "lcb_arm": 0, "lcb_regret": lcb_regret,
        "anytime": {"lower": 0.7, "upper": 0.9, "certified_eps": certified_eps, "delta": 0.05},
    }


def _summary(seed, regret, stop_step, stop_regret):
    by_model = {
        model: {
            "1pct": _statement(model, 0.9, regret, covered=seed % 2 == 0, certified_eps=0.05, lcb_regret=shift + 0.02),
            "10pct": _statement(model, 0.3, 0.0, covered=True, certified_eps=0.0 if seed else 0.0, lcb_regret=shift),
            "stop": None,
        }
        for model, shift in (("gaussian", 0.01), ("eb", 0.0))
    }
    stop = {"prob_eps_best": 0.95, "eps": 0.01, "step": stop_step, "cost_pct": None if stop_step is None else 2.0,
            "regret": stop_regret}
    return {
        "benchmark": "mmlu/anatomy" if seed < 3 else "mmlu/virology", "seed": seed, "label": "X",
        "model_certificates": by_model,
        "model_stops": {"gaussian": {**stop, "mode": "posterior"}, "eb": {**stop, "mode": "posterior"},
                        ANYTIME: {**stop, "step": None, "cost_pct": None, "regret": None, "mode": "anytime"}},
    }


@pytest.fixture
def summaries():
    # Four runs of one family (two subjects pooled): 1 % statements of 0.9 with regret 0.02 (not within 0.01) in
    # two runs and 0 in two; stops fired in three runs, one of them on an arm 0.05 from the best.
    return [
        _summary(0, 0.02, 10, 0.0),
        _summary(1, 0.0, 12, 0.05),
        _summary(3, 0.02, None, None),
        _summary(4, 0.0, 7, 0.0),
    ]


def test_calibration_rows_pool_a_family_and_count_by_hand(summaries):
    rows = {row.model: row for row in calibration_rows(summaries)}
    assert set(rows) == {"gaussian", "eb", ANYTIME}
    eb = rows["eb"]
    assert eb.family == "mmlu" and eb.n == 8 and eb.runs == 4
    # Covered: the 10 % statements (4) and the 1 % ones of even seeds (0 and 4).
    assert eb.covered == 6
    assert eb.within_stated == pytest.approx((4 * 0.9 + 4 * 0.3) / 8)
    assert eb.within_observed == pytest.approx(6 / 8)
    # Bins: 0.9 (4 statements, 2 within) and 0.3 (4 statements, all within).
    assert eb.within_ece == pytest.approx(0.5 * abs(0.9 - 0.5) + 0.5 * abs(0.3 - 1.0))
    anytime = rows[ANYTIME]
    # A statement is false where the regret exceeds its certified eps: the 1 % statements of regret 0.02 < 0.05
    # are true; none is false.
    assert anytime.violated_runs == 0 and anytime.covered == 8


def test_stop_rows_count_fired_and_wrong_stops_per_run(summaries):
    rows = {row.model: row for row in stop_rows(summaries)}
    eb = rows["eb"]
    assert (eb.runs, eb.fired, eb.wrong) == (4, 3, 1)
    assert eb.cost_pct == pytest.approx(2.0) and eb.delta == pytest.approx(0.05)
    assert eb.wrong_per_run == pytest.approx(0.25)
    # 1 wrong stop in 4 runs against 0.05 + 2 sqrt(0.05 * 0.95 / 4) = 0.268: within.
    assert eb.keeps_promise
    assert rows[ANYTIME].fired == 0


def test_regret_rows_pair_each_model_with_the_gaussian_by_run(summaries):
    rows = {(row.checkpoint, row.model): row for row in regret_rows(summaries, ("1pct",))}
    assert rows[("1pct", "gaussian")].regret.mean == pytest.approx(0.03)
    assert rows[("1pct", "eb")].regret.mean == pytest.approx(0.02)
    assert rows[("1pct", "eb")].versus_gaussian.mean == pytest.approx(-0.01)
    assert rows[("1pct", "gaussian")].versus_gaussian is None


def test_verdicts_read_the_targets(summaries):
    sentence = verdicts(summaries)["mmlu"]
    assert "eb: ECE of P(within eps) 0.550 (missed)" in sentence
    assert "stop fired in 3 of 4 runs, met the 25 % target, 1 wrong (within delta 0.05 + 2 SE)" in sentence
    assert "anytime: guarantee kept (0 of 4 runs" in sentence
