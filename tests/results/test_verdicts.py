"""The verdict rule (gittinseval.results.verdicts): a cell's outcome, a claim's verdict, the cells judged from runs,
and the claims read from claims.yaml."""

import math
from pathlib import Path

import numpy as np
import pytest

from gittinseval.results.manifest import StoreReport
from gittinseval.results.stats import Estimate
from gittinseval.results.verdicts import (
    AGAINST,
    HOLDS,
    LEVEL,
    NO_STORE,
    NOT_REPRODUCED,
    PARTIAL,
    REPRODUCED,
    STAND_IN_ONLY,
    Cell,
    Claim,
    Comparison,
    judge,
    outcome,
    read_claims,
    verdict,
)
from tests.results.test_panels import row


def estimate(mean, se):
    return Estimate(mean, se, 20, 20)


def test_a_cell_holds_beyond_two_ses_in_the_claims_direction_and_is_against_beyond_two_the_other_way():
    assert outcome(estimate(-0.021, 0.01), "lower") == HOLDS
    assert outcome(estimate(-0.019, 0.01), "lower") == LEVEL  # within 2 SE
    assert outcome(estimate(0.021, 0.01), "lower") == AGAINST
    assert outcome(estimate(0.021, 0.01), "higher") == HOLDS
    assert outcome(estimate(-0.021, 0.01), "higher") == AGAINST
    assert outcome(estimate(0.0, 0.0), "lower") == LEVEL  # identical runs: no difference either way
    # Level with or below: holds unless above by more than 2 SE; level with: only within 2 SE.
    assert [outcome(estimate(m, 0.01), "level_or_lower") for m in (-0.5, 0.019, 0.021)] == [HOLDS, HOLDS, AGAINST]
    assert [outcome(estimate(m, 0.01), "level") for m in (-0.021, 0.02, 0.021)] == [AGAINST, HOLDS, AGAINST]
    # No estimate, or no SE to judge it by: no outcome (the cell is left out).
    assert outcome(None, "lower") is None and outcome(estimate(-1.0, math.nan), "lower") is None


def cell(result, stand_in=False):
    return Cell("panel", stand_in, "A", "B", 2, estimate(0.0, 0.0), result)


def test_the_verdict_over_cells():
    assert verdict([cell(HOLDS), cell(HOLDS, stand_in=True)]) == REPRODUCED
    assert verdict([cell(HOLDS)]) == REPRODUCED
    assert verdict([cell(HOLDS, stand_in=True)]) == STAND_IN_ONLY  # no real cell
    assert verdict([cell(HOLDS, stand_in=True), cell(AGAINST), cell(HOLDS)]) == STAND_IN_ONLY
    assert verdict([cell(HOLDS, stand_in=True), cell(LEVEL, stand_in=True), cell(HOLDS)]) == PARTIAL
    assert verdict([cell(HOLDS), cell(LEVEL)]) == PARTIAL
    assert verdict([cell(LEVEL), cell(AGAINST, stand_in=True)]) == NOT_REPRODUCED
    assert verdict([cell(HOLDS), cell(None), cell(None, stand_in=True)]) == REPRODUCED  # cells left out
    assert verdict([]) == NOT_REPRODUCED


def report(name):
    return StoreReport(name, Path(f"{name}.parquet"), Path("out") / name)


def claim(measure="regret", direction="lower", **test):
    defaults = {"reports": ("store",), "methods": ("S",), "versus": ("U",), "percents": (1, 2)}
    return Claim("c", "S below U", "words", "main", measure, direction, (Comparison(**(defaults | test)),),
                 window=(1.0, 10.0) if measure == "stop_within" else None)


def test_a_regret_claim_pairs_runs_by_benchmark_and_seed_and_leaves_bo_in_its_design_out():
    rng = np.random.default_rng(0)
    gaps = rng.uniform(0.01, 0.02, 6)
    runs = []
    for seed, gap in enumerate(gaps):
        for matrix in ("toy/m1", "toy/m2"):
            runs += [row(matrix, "S", [0.5, 1.5], [0.1, 0.05], seed=seed),
                     row(matrix, "U", [0.5, 1.5], [0.1 + gap, 0.05 + gap], seed=seed),
                     row(matrix, "BO", [0.5, 1.5], [0.3, 0.2], seed=seed, n_initial=2, policy="pbgi")]
    judged = judge(claim(versus=("U", "BO")), {"store": report("store")}, {Path("store.parquet"): runs})
    by_key = {(c.versus, c.percent): c for c in judged.cells}
    assert sorted(by_key) == [("BO", 1), ("BO", 2), ("U", 1), ("U", 2)]
    # S - U over the pairs of a matrix and seed: the mean of the seeds' gaps, clustered by seed.
    assert by_key[("U", 2)].estimate.mean == pytest.approx(-gaps.mean())
    assert by_key[("U", 2)].estimate.se == pytest.approx(gaps.std(ddof=1) / np.sqrt(len(gaps)))
    assert by_key[("U", 2)].outcome == by_key[("U", 1)].outcome == HOLDS
    # BO's initial design ends at its second batch, 1.5 %: at 1 % it has no cell, at 2 % it has one.
    assert by_key[("BO", 1)].estimate is None and by_key[("BO", 1)].outcome is None
    assert by_key[("BO", 2)].estimate.mean == pytest.approx(-0.15) and by_key[("BO", 2)].outcome == HOLDS
    assert judged.verdict == REPRODUCED and judged.count(stand_in=False) == {HOLDS: 3, LEVEL: 0, AGAINST: 0}


def test_a_level_a_stop_and_a_wall_time_are_judged_too():
    runs = [row("toy", "S", [1, 2, 4], [0.02, 0.005, 0.0], seed=seed, stop=stop, wall=0.1 + seed / 100)
            for seed, stop in enumerate([2, 4, None, 3])]
    runs += [row("toy", "U", [1, 2, 4], [0.1, 0.05, 0.0], seed=seed, wall=1.0 + seed / 50) for seed in range(4)]
    reports, stores = {"store": report("store")}, {Path("store.parquet"): runs}
    level = judge(claim(versus=(), level=0.01, percents=(2,)), reports, stores)
    (only,) = level.cells
    assert (only.versus, only.estimate.mean, only.outcome) == ("level 0.01", pytest.approx(-0.005), HOLDS)
    # A signal that did not fire counts at the budget's end (10 %); U never fired.
    stop = judge(claim("stop", percents=()), reports, stores)
    assert stop.cells[0].percent is None
    assert stop.cells[0].estimate.mean == pytest.approx(np.mean([2, 4, 10, 3]) - 10)
    within = judge(claim("stop_within", "higher", versus=(), level=0.5, percents=()), reports, stores)
    assert within.cells[0].estimate.mean == pytest.approx(0.75 - 0.5)  # three of the four fired within 1-10 %
    wall = judge(claim("wall_time", percents=()), reports, stores)
    assert wall.cells[0].estimate.mean == pytest.approx(np.mean([0.1 + s / 100 - 1.0 - s / 50 for s in range(4)]))
    assert wall.verdict == REPRODUCED


def test_a_store_not_made_yet_is_named_and_an_unknown_curve_is_an_error():
    runs = {Path("store.parquet"): [row("toy", "S", [1], [0.0]), row("toy", "U", [1], [0.1])]}
    missing = judge(claim(reports=("later",)), {"store": report("store")}, runs)
    assert (missing.verdict, missing.cells, missing.missing) == (NO_STORE, (), ("later",))
    partly = judge(claim(reports=("store", "later")), {"store": report("store")}, runs)
    assert partly.missing == ("later",) and partly.cells
    with pytest.raises(ValueError, match="no curve 'V'"):
        judge(claim(versus=("V",)), {"store": report("store")}, runs)
    with pytest.raises(ValueError, match="no panel"):
        judge(claim(panels=("mmlu_*",)), {"store": report("store")}, runs)


def test_the_claims_are_read_with_their_tests_and_checked(tmp_path):
    (tmp_path / "claims.yaml").write_text("""
bo: &bo [PBGI, LogEI]
claims:
  - &one
    name: one
    claim: S below BO
    paper: "gains over BO"
    page: main
    direction: lower
    methods: [S]
    versus: *bo
    percents: [5, 10]
    reports: [main]
    panels: ["gsm8k_*"]
  - <<: *one
    name: two
    paper: null
    measure: stop
    percents: []
    tests:
      - {reports: [a], methods: [B=8], versus: [B=4]}
      - {reports: [b], level: 0.5, versus: null}
""")
    one, two = read_claims(tmp_path)
    assert one.tests == (Comparison(("main",), ("S",), ("PBGI", "LogEI"), None, ("gsm8k_*",), (5, 10)),)
    assert (two.paper, two.measure, two.page) == (None, "stop", "main")
    assert two.tests[0] == Comparison(("a",), ("B=8",), ("B=4",), None, ("gsm8k_*",), ())
    assert two.tests[1].level == 0.5 and two.tests[1].methods == ("S",) and two.tests[1].reports == ("b",)
    assert read_claims(tmp_path / "elsewhere") == []
    for entry, error in (
        ("{name: x, claim: c, paper: p, page: m, direction: up, methods: [S], level: 1, percents: [1], reports: [r]}",
         "direction one of"),
        ("{name: x, claim: c, paper: p, page: m, direction: lower, methods: [S], level: 1, reports: [r]}",
         "needs percents"),
        ("{name: x, claim: c, paper: p, page: m, direction: lower, methods: [S], level: 1, versus: [U], "
         "percents: [1], reports: [r]}", "one of the two"),
        ("{name: x, claim: c, paper: p, page: m, direction: lower, methods: [S], level: 1, percents: [1]}",
         "needs reports"),
        ("{name: x, claim: c, page: m, direction: lower}", "needs paper"),
        ("{name: x, claim: c, paper: p, page: m, direction: lower, colour: red}", "unknown keys"),
    ):
        (tmp_path / "claims.yaml").write_text(f"claims:\n  - {entry}\n")
        with pytest.raises(ValueError, match=error):
            read_claims(tmp_path)
