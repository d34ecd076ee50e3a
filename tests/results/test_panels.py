"""The report's numbers (gittinseval.results.panels): runs grouped into panels and curves, and each panel's rows as
estimates, against the runs' traces read by hand.  (How the report's tables write these numbers: test_report.py.)"""

import numpy as np
import pytest

from gittinseval.results import panels as panels_module
from gittinseval.results.panels import (
    TABLE_PERCENTS,
    PanelTables,
    by_cost_mode,
    by_family,
    curve_rows,
    in_initial_design,
    paired_difference,
    paired_rows,
    panels,
    stop_rows,
    stopping_policies,
)
from gittinseval.sim.results_store import RunRow
from gittinseval.sim.simulator import RunResult


def row(benchmark, label, cost_pct, regret, *, seed=0, cost_mode="unit", policy="ucbe", stop=None, n_initial=None,
        budget=0.1, wall=1.0, stand_in=False):
    """The row of a run whose batches end at ``cost_pct`` % of the exhaustive cost with these regrets."""
    cost_pct, regret = np.asarray(cost_pct, float), np.asarray(regret, float)
    trace = {"step": np.arange(1, cost_pct.size + 1), "cost_pct": cost_pct, "regret": regret}
    summary = {"benchmark": benchmark, "label": label, "seed": seed, "cost_mode": cost_mode, "policy": policy,
               "budget_fraction": budget, "wall_time_s": wall, "stand_in": stand_in, "stop_cost_pct": stop,
               "stop_regret": None if stop is None else float(regret[cost_pct <= stop][-1]),
               "hyperparameters": {} if n_initial is None else {"n_initial": n_initial}}
    return RunRow.of(RunResult(trace, summary))


def regret_at(run, percent):
    """The regret after the last batch at or below ``percent`` % (``None`` before the first)."""
    below = np.flatnonzero(np.asarray(run["cost"]) <= percent)
    return None if below.size == 0 else run["regret"][below[-1]]


def mean_and_se(values):
    """One value per seed: the mean and its standard error (0 for a single value, its own mean)."""
    return np.mean(values), 0.0 if len(values) == 1 else np.std(values, ddof=1) / np.sqrt(len(values))


def test_a_panel_is_a_family_and_cost_mode_and_its_curves_are_the_labels():
    runs = [row("toy", "UCB-E", [1], [0.1]), row("toy", "GittinsEval-S", [1], [0.0], cost_mode="aware"),
            row("piqa_standin/m2", "UCB-E", [1], [0.2], stand_in=True), row("toy", "Uniform", [1], [0.3]),
            row("toy", "UCB-E", [], [])]  # a run with no batch is in no panel
    found = panels(runs)
    assert [p.key for p in found] == ["toy_unit", "toy_aware", "piqa_standin_unit"]
    toy = found[0]
    assert list(toy.curves) == ["UCB-E", "Uniform"] and len(toy.curves["UCB-E"]) == 1
    assert (toy.title, toy.family_title) == ("toy (unit cost)", "toy")
    assert found[2].title == "piqa_standin (unit cost) [stand-in data]"


def test_curve_rows_are_the_seeds_regrets_at_each_share_of_cost():
    rng = np.random.default_rng(4)
    traces = []
    for seed in range(4):
        cost = np.sort(rng.uniform(0.5, 10.0, 12))
        traces.append({"cost": cost, "regret": rng.uniform(0.0, 0.2, 12), "seed": seed,
                       "stop": float(cost[3]) if seed < 3 else None, "wall": 2.0 + seed})
    runs = [row("toy", "GittinsEval-S", t["cost"], t["regret"], seed=t["seed"], stop=t["stop"], wall=t["wall"],
                policy="gittins") for t in traces]
    (curve,) = curve_rows(panels(runs)[0])
    assert (curve.label, curve.runs, curve.stopped) == ("GittinsEval-S", 4, 3)
    for percent in TABLE_PERCENTS:
        values = [v for t in traces if (v := regret_at(t, percent)) is not None]
        estimate = curve.regret[percent]
        assert estimate.n == len(values) and curve.in_design[percent] == 0
        mean, se = mean_and_se(values)
        assert estimate.mean == pytest.approx(mean) and estimate.se == pytest.approx(se)
    stops = [t["cost"][3] for t in traces[:3]]
    assert curve.stop_cost.mean == pytest.approx(np.mean(stops)) and curve.stop_cost.n == 3
    assert curve.stop_regret.mean == pytest.approx(np.mean([t["regret"][3] for t in traces[:3]]))
    assert curve.wall_time.mean == pytest.approx(3.5) and curve.wall_time.seeds == 4


def test_regrets_past_the_budget_or_inside_bos_initial_design_are_left_out():
    # A BO run whose initial design (2 configurations) ends at 3 %; its budget is 5 %.
    bo = row("toy", "PBGI", [1.5, 3.0, 4.5], [0.4, 0.3, 0.1], policy="pbgi", n_initial=2, budget=0.05)
    assert [in_initial_design(bo, p) for p in (1, 2, 3, 5)] == [True, True, False, False]
    (curve,) = curve_rows(panels([bo])[0])
    assert curve.regret[1] is None and curve.in_design[1] == 1  # before its first batch, and in its design
    assert curve.regret[2] is None and curve.in_design[2] == 1
    assert curve.regret[5].mean == 0.1 and curve.in_design[5] == 0
    assert curve.regret[10] is None and curve.in_design[10] == 0  # past its budget: no run says anything


def test_paired_rows_are_the_differences_of_runs_of_the_same_benchmark_and_seed():
    base = {seed: [0.3, 0.2, 0.1 + seed / 100] for seed in range(3)}
    other = {seed: [0.35, 0.1 + seed / 50, 0.05] for seed in range(3)}
    runs = [row("toy", "S", [0.5, 1.5, 4.0], base[s], seed=s) for s in range(3)]
    runs += [row("toy", "EB", [0.5, 1.5, 4.0], other[s], seed=s) for s in range(3)]
    runs.append(row("toy", "EB", [0.5], [0.9], seed=7))  # no partner: left out
    (panel,) = panels(runs)
    (paired,) = paired_rows(panel, "S")
    assert (paired.label, paired.versus, paired.pairs) == ("EB", "S", 3)
    for percent, step in ((1, 0), (2, 1), (5, 2), (10, 2)):
        mean, se = mean_and_se([other[s][step] - base[s][step] for s in range(3)])
        assert paired.difference[percent].mean == pytest.approx(mean)
        assert paired.difference[percent].se == pytest.approx(se, abs=1e-15)
    assert paired_rows(panel, "absent") == []


def test_stop_rows_cover_the_policies_with_a_signal():
    runs = [row("toy", "S", [1.0, 2.0], [0.1, 0.0], seed=s, policy="gittins", stop=1.0 if s else None)
            for s in range(2)]
    runs.append(row("toy", "UCB-E", [1.0], [0.2], policy="ucbe"))
    assert stopping_policies(runs) == {"gittins"}
    (panel,) = panels(runs)
    (stops,) = stop_rows(panel, stopping_policies(runs))
    assert (stops.label, stops.runs, stops.stopped, stops.first_stops) == ("S", 2, 1, None)  # no BO to compare
    assert stops.stop_cost.mean == 1.0 and stops.stop_regret.mean == 0.1
    tables = PanelTables.of(panel, ("UCB-E",), {"gittins"})
    assert [r.label for r in tables.rows] == ["S", "UCB-E"] and list(tables.paired) == ["UCB-E"]
    assert [r.label for r in tables.stops] == ["S"]


def test_tables_are_grouped_unit_cost_first():
    runs = [row(bench, "UCB-E", [1], [0.1], cost_mode=mode)
            for bench, mode in (("b", "per_cell"), ("a", "aware"), ("a", "unit"), ("b", "unit"))]
    tables = [PanelTables.of(panel) for panel in panels(runs)]
    assert [t.panel.key for t in tables] == ["b_per_cell", "a_aware", "a_unit", "b_unit"]
    grouped = by_cost_mode(tables)
    assert list(grouped) == ["unit", "per_cell", "aware"]  # unit first, then in order of first appearance
    assert [t.panel.family for t in grouped["unit"]] == ["a", "b"]
    families = by_family(tables)
    assert list(families) == ["b", "a"]
    assert [t.panel.cost_mode for t in families["b"]] == ["unit", "per_cell"]
    assert [t.panel.cost_mode for t in families["a"]] == ["unit", "aware"]


def test_a_paired_difference_of_any_value_and_the_regret_as_the_tables_count_it():
    mine = [row("a", "S", [1], [0.1], seed=0, wall=2.0), row("b", "S", [1], [0.2], seed=0, wall=3.0),
            row("a", "S", [1], [0.1], seed=1, wall=5.0)]
    other = [row("a", "U", [1], [0.1], seed=0, wall=1.0), row("b", "U", [1], [0.2], seed=0, wall=1.0)]
    difference = paired_difference(mine, other, lambda run: run.summary["wall_time_s"])
    assert (difference.mean, difference.n, difference.seeds) == (1.5, 2, 1)  # seed 1 has no partner
    assert paired_difference(mine, other, lambda run: None) is None
    bo = row("a", "BO", [1, 3, 6], [0.3, 0.2, 0.1], n_initial=2)
    assert [panels_module.regret_at(bo, p) for p in (2, 5)] == [None, 0.2]  # in its design at 2 %, past it at 5 %
    assert panels_module.regret_at(row("a", "S", [1, 3], [0.1, 0.0], budget=0.02), 5) is None  # past its budget
