"""gittinseval-report: panels and curves, table numbers against a direct computation, files written.

The report works on the runs' rows (:class:`~gittinseval.sim.results_store.RunRow`); ``rows`` reduces
fake runs to them, and the expected numbers are computed from the runs' traces.  The tables are numbers
(:mod:`gittinseval.results.panels`); their cells are checked as the markdown writer
(:mod:`gittinseval.results.tables`) writes them."""

import numpy as np
import pytest

from gittinseval.cli.report import main
from gittinseval.results.panels import (
    PanelTables,
    by_cost_mode,
    curve_rows,
    in_initial_design,
    paired_rows,
    panel_tables,
    panels,
    stop_rows,
)
from gittinseval.results.report import write_report
from gittinseval.results.tables import overview_cells, paired_cells, regret_cells, stop_cells, timing_cells
from gittinseval.sim.results_store import RunRow
from gittinseval.sim.simulator import RunResult


def fake_run(benchmark, label, cost_pct, regret, *, seed=0, stop=None, cost_mode="unit", kappa=1.0, details=None,
             stand_in=False, wall=1.0, policy="gittins", n_initial=None):
    cost_pct, regret = np.asarray(cost_pct, float), np.asarray(regret, float)
    n = len(cost_pct)
    trace = {
        "step": np.arange(1, n + 1), "arm": np.zeros(n, int), "batch_size": np.full(n, 8), "cost": cost_pct,
        "cost_pct": cost_pct, "recommended": np.zeros(n, int), "regret": regret,
    }
    summary = {
        "benchmark": benchmark, "benchmark_details": details or {}, "label": label, "seed": seed,
        "stop_cost_pct": stop, "cost_mode": cost_mode, "stand_in": stand_in, "batch_size": 8, "lam": 1e-4,
        "kappa": kappa, "budget_fraction": 0.1, "wall_time_s": wall,
        "stop_regret": None if stop is None else float(regret[cost_pct <= stop][-1]), "policy": policy,
        "hyperparameters": {} if n_initial is None else {"n_initial": n_initial},
    }
    return RunResult(trace, summary)


def rows(runs):
    return [RunRow.of(run) for run in runs]


def test_gsm8k_matrices_pool_mmlu_subjects_pool_by_bucket_and_a_varying_setting_splits_curves():
    hard_large = {"difficulty": "hard", "size": "large", "subject": "x"}
    runs = [
        fake_run("gsm8k_standin/m1", "GittinsEval-G", [1, 2], [0.2, 0.1], stand_in=True),
        fake_run("gsm8k_standin/m2", "GittinsEval-G", [1, 2], [0.2, 0.0], stand_in=True),
        fake_run("mmlu/moral_scenarios", "GittinsEval-G", [1, 2], [0.1, 0.0], kappa=1.0, details=hard_large),
        fake_run("mmlu/professional_law", "GittinsEval-G", [1, 2], [0.3, 0.2], kappa=0.0, details=hard_large),
    ]
    gsm8k, mmlu = panels(rows(runs))
    assert gsm8k.key == "gsm8k_standin_unit" and "[stand-in data]" in gsm8k.title
    assert list(gsm8k.curves) == ["GittinsEval-G"] and len(gsm8k.curves["GittinsEval-G"]) == 2
    assert mmlu.key == "mmlu_hard-large_unit" and "stand-in" not in mmlu.title
    assert sorted(mmlu.curves) == ["GittinsEval-G κ=0.0", "GittinsEval-G κ=1.0"]
    by_subject = panels(rows(runs), mmlu_panels="subject")
    assert [p.key for p in by_subject] == ["gsm8k_standin_unit", "mmlu_moral_scenarios_unit",
                                           "mmlu_professional_law_unit"]
    assert [p.key for p in panels(rows(runs), mmlu_panels="size")][1] == "mmlu_large_unit"
    with pytest.raises(ValueError, match="mmlu_panels"):
        panels(rows(runs), mmlu_panels="bucket_size")


def test_runs_of_other_cost_plans_are_curves_of_their_own_and_a_label_with_one_plan_keeps_its_name():
    runs = []
    for plan in ("true", "5x off for 50%, learned", "5x off for 50%"):
        run = fake_run("gsm8k_zeroeval", "GittinsEval-S", [1, 2], [0.1, 0.0], cost_mode="per_cell")
        run.summary["cost_plan"] = plan
        runs.append(run)
    ucbe = fake_run("gsm8k_zeroeval", "UCB-E", [1, 2], [0.2, 0.1], cost_mode="per_cell", policy="ucbe")
    ucbe.summary["cost_plan"] = "true"
    (panel,) = panels(rows([*runs, ucbe]))
    assert list(panel.curves) == ["GittinsEval-S costs=5x off for 50%", "GittinsEval-S costs=5x off for 50%, learned",
                                  "GittinsEval-S costs=true", "UCB-E"]


def test_table_numbers_equal_a_direct_computation():
    rng = np.random.default_rng(0)
    runs = []
    for seed in range(5):
        cost = np.sort(rng.uniform(0.1, 10.0, size=30))
        regret = rng.uniform(0, 0.3, size=30)
        stop = float(cost[10]) if seed % 2 == 0 else None
        runs.append(fake_run("toy", "UCB-E", cost, regret, seed=seed, stop=stop, wall=float(seed + 1)))
    (panel,) = panels(rows(runs))
    (row,) = regret_cells(curve_rows(panel))
    for percent in (1, 2, 5, 10):
        values = []
        for run in runs:
            below = run.trace["cost_pct"] <= percent
            if below.any():
                values.append(run.trace["regret"][below][-1])
        mean, se = np.mean(values), np.std(values, ddof=1) / np.sqrt(len(values))
        expected = f"{mean:.4f} ± {se:.4f}" + ("" if len(values) == 5 else f" (n={len(values)})")
        assert row[f"regret @ {percent} %"] == expected
    assert row["runs"] == "5"
    (stops,) = stop_cells([PanelTables.of(panel, stopping={"gittins"})])
    at_stop = [r.trace["regret"][10] for r in runs if r.summary["stop_cost_pct"] is not None]
    stop_costs = [r.summary["stop_cost_pct"] for r in runs if r.summary["stop_cost_pct"] is not None]
    assert stops == {
        "panel": "toy (unit cost)", "method": "UCB-E", "stopped": "3/5",
        "stop cost %": f"{np.mean(stop_costs):.3f} ± {np.std(stop_costs, ddof=1) / np.sqrt(3):.3f}",
        "regret at stop": f"{np.mean(at_stop):.4f} ± {np.std(at_stop, ddof=1) / np.sqrt(3):.4f}",
    }
    (timing,) = timing_cells([PanelTables.of(panel)])
    assert timing == {"method": "UCB-E", "toy": f"3 ± {np.std([1, 2, 3, 4, 5], ddof=1) / np.sqrt(5):.2g} s"}


def test_bo_is_compared_only_after_its_initial_design():
    """A BO run's regret below the end of its initial design is left out of the regret and paired cells,
    which say how many runs were; a cell whose runs are all in their design says so."""
    runs = []
    for seed, design_end in enumerate((1.5, 3.0, 4.0)):  # the third design's last configuration ends at 4 %
        cost = np.array([0.5, design_end, 6.0])
        runs.append(fake_run("toy", "PBGI", cost, [0.4, 0.2 + seed / 10, 0.1], seed=seed, policy="pbgi", n_initial=2))
        runs.append(fake_run("toy", "GittinsEval-S", [0.5, 1.0, 6.0], [0.3, 0.0, 0.0], seed=seed))
    table_rows = rows(runs)
    assert [in_initial_design(row, 2) for row in table_rows[::2]] == [False, True, True]
    assert not in_initial_design(table_rows[1], 0.1)  # not a BO run
    (panel,) = panels(table_rows)
    bo = next(row for row in regret_cells(curve_rows(panel)) if row["method"] == "PBGI")
    assert bo["regret @ 1 %"] == "in design"
    assert bo["regret @ 2 %"] == "0.2000 ± 0.0000 (n=1, 2 in design)"
    assert bo["regret @ 5 %"] == f"{np.mean([0.2, 0.3, 0.4]):.4f} ± {np.std([0.2, 0.3, 0.4], ddof=1) / np.sqrt(3):.4f}"
    (paired,) = paired_cells(paired_rows(panel, "GittinsEval-S"))
    assert paired["Δ regret @ 1 %"] == "in design" and paired["Δ regret @ 2 %"] == "0.2000 ± 0.0000 (n=1, 2 in design)"
    (overview,) = overview_cells([PanelTables.of(panel)], 2)
    assert overview["PBGI"] == bo["regret @ 2 %"] and overview["GittinsEval-S"] == "0.0000 ± 0.0000"


def test_a_stop_is_set_beside_the_first_bo_stop_of_the_same_benchmark_and_seed():
    """Per (benchmark, seed), BO's first stop is the earliest of its methods'; a pair where neither stopped is
    left out, a run that never stopped counts as stopping after any that did."""
    stops = {  # seed: (GittinsEval-S, PBGI, LogEI)
        0: (1.0, 5.0, 6.0),  # S earlier by 4
        1: (7.0, 5.5, None),  # S later by 1.5
        2: (2.0, None, None),  # BO never stopped: S earlier, no difference
        3: (None, None, None),  # neither stopped: left out
        4: (None, 3.0, 4.0),  # S never stopped: BO earlier
    }
    runs = []
    for seed, (s, pbgi, logei) in stops.items():
        runs.append(fake_run("toy", "GittinsEval-S", [0.5, 9.0], [0.1, 0.0], seed=seed, stop=s))
        runs.append(fake_run("toy", "PBGI", [2.0, 9.0], [0.1, 0.0], seed=seed, stop=pbgi, policy="pbgi", n_initial=1))
        runs.append(fake_run("toy", "LogEI", [2.0, 9.0], [0.1, 0.0], seed=seed, stop=logei, policy="logei",
                             n_initial=1))
    runs.append(fake_run("toy", "UCB-E", [0.5, 9.0], [0.1, 0.0], policy="ucbe"))
    (panel,) = panels(rows(runs))
    by_label = {row.label: row for row in stop_rows(panel, {"gittins", "pbgi", "logei"})}
    assert sorted(by_label) == ["GittinsEval-S", "LogEI", "PBGI"]  # UCB-E has no stopping signal
    first = by_label["GittinsEval-S"].first_stops
    assert (first.pairs, first.earlier) == (4, 2) and by_label["PBGI"].first_stops is None
    differences = [1.0 - 5.0, 7.0 - 5.5]
    assert (first.difference.mean, first.difference.n) == (pytest.approx(np.mean(differences)), 2)
    (table,) = panel_tables(rows(runs))
    cells = {row["method"]: row for row in stop_cells([table])}
    assert cells["GittinsEval-S"]["earlier than BO"] == "2/4" and cells["PBGI"]["earlier than BO"] == "–"
    assert cells["GittinsEval-S"]["stop % − BO's"] == f"{np.mean(differences):.3f} ± 2.750 (n=2)"
    assert cells["LogEI"]["stopped"] == "2/5"


def test_paired_differences_match_seed_by_seed_and_subject_by_subject():
    """Pairs by (benchmark, seed); an unmatched run is left out; values from a direct computation."""
    rng = np.random.default_rng(3)
    details = {"difficulty": "hard", "size": "small", "subject": "x"}
    runs, want = [], {1: [], 5: []}
    for subject in ("mmlu/a", "mmlu/b"):
        for seed in range(4):
            cost = np.array([0.5, 1.0, 3.0, 6.0])
            base, other = rng.uniform(0, 0.3, size=4), rng.uniform(0, 0.3, size=4)
            runs.append(fake_run(subject, "GittinsEval-S", cost, base, seed=seed, details=details))
            runs.append(fake_run(subject, "GittinsEval-EB", cost, other, seed=seed, details=details))
            want[1].append(other[1] - base[1])
            want[5].append(other[2] - base[2])
    runs.append(fake_run("mmlu/c", "GittinsEval-EB", [1.0], [0.9], seed=0, details=details))  # no partner
    (panel,) = panels(rows(runs))
    (row,) = paired_cells(paired_rows(panel, "GittinsEval-S"))
    assert row["method − GittinsEval-S"] == "GittinsEval-EB" and row["pairs"] == "8"
    for percent in (1, 5):
        # Two subjects per seed: the SE is that of the four per-seed means (clustered by seed).
        seed_means = np.reshape(want[percent], (2, 4)).mean(axis=0)
        mean, se = np.mean(want[percent]), np.std(seed_means, ddof=1) / np.sqrt(4)
        assert row[f"Δ regret @ {percent} %"] == f"{mean:.4f} ± {se:.4f}"
    assert paired_rows(panel, "UCB-E") == []
    (overview,) = overview_cells(by_cost_mode(panel_tables(rows(runs)))["unit"], 2)
    by_method = {r["method"]: r for r in regret_cells(curve_rows(panel))}
    assert overview["GittinsEval-S"] == by_method["GittinsEval-S"]["regret @ 2 %"]
    assert overview["runs"] == "GittinsEval-EB 9, GittinsEval-S 8"


def test_a_size_panel_on_one_subject_names_it_and_one_on_several_says_subjects():
    def run_on(subject, size, cost_mode="unit"):
        return fake_run(f"mmlu/{subject}", "UCB-E", [1.0, 2.0], [0.2, 0.1], cost_mode=cost_mode,
                        details={"difficulty": "hard", "size": size, "subject": subject})

    runs = [run_on("abstract_algebra", "small"), run_on("abstract_algebra", "small", "aware"),
            run_on("moral_scenarios", "large"), run_on("professional_law", "large"),
            # One subject under unit cost, two cost-aware: the family (both modes) is on two.
            run_on("anatomy", "medium"), run_on("anatomy", "medium", "aware"), run_on("virology", "medium", "aware")]
    names = {panel.key: panel.name for panel in panels(rows(runs), mmlu_panels="size")}
    assert names == {
        "mmlu_small_unit": "MMLU small: abstract_algebra", "mmlu_small_aware": "MMLU small: abstract_algebra",
        "mmlu_large_unit": "MMLU large subjects",
        "mmlu_medium_unit": "MMLU medium subjects", "mmlu_medium_aware": "MMLU medium subjects",
    }


def test_values_of_one_seed_have_no_se():
    runs = [fake_run(f"mmlu/{s}", "UCB-E", [1.0, 2.0], [0.2, 0.1], details={"difficulty": "hard", "size": "small",
                                                                           "subject": s}) for s in "ab"]
    (row,) = regret_cells(curve_rows(panels(rows(runs))[0]))
    assert row["regret @ 2 %"] == "0.1000 ± – (one seed)"


def test_a_column_past_the_runs_budget_is_empty():
    run = fake_run("toy", "UCB-E", [0.5, 1.0, 2.0], [0.3, 0.2, 0.1])
    run.summary["budget_fraction"] = 0.02
    (row,) = regret_cells(curve_rows(panels(rows([run]))[0]))
    assert row["regret @ 2 %"] == "0.1000 ± 0.0000" and row["regret @ 5 %"] == "–" and row["regret @ 10 %"] == "–"


def test_report_writes_figures_tables_and_an_index(tmp_path, capsys):
    for seed in range(2):
        fake_run("toy", "UCB-E", [0.5, 1.0, 5.0], [0.3, 0.2, 0.0], seed=seed, policy="ucbe"
                 ).save(tmp_path / "sweep" / f"s{seed}")
        fake_run("toy", "GittinsEval-S", [0.5, 1.0, 5.0], [0.2, 0.0, 0.0], seed=seed, stop=1.0, cost_mode="aware"
                 ).save(tmp_path / "other" / f"s{seed}")
    report = write_report([tmp_path / "sweep", tmp_path / "other"], tmp_path / "out", versus=("UCB-E",))
    text = report.read_text()
    assert "### toy (unit cost)" in text and "### toy (aware cost)" in text and "| GittinsEval-S | 2 |" in text
    assert (tmp_path / "out" / "timing_unit.png").is_file() and (tmp_path / "out" / "timing_aware.png").is_file()
    written = {path.name for path in (tmp_path / "out").glob("*.md")}
    assert written == {
        "report.md", "overview.md", "toy_unit.md", "toy_aware.md", "stopping.md", "timing_unit.md", "timing_aware.md",
        *(f"overview_{mode}_{p}pct.md" for mode in ("unit", "aware") for p in (1, 2, 5, 10)),
    }  # no paired table: UCB-E and S are in different panels
    for name in ("toy_unit", "toy_aware", "stopping", "timing_aware"):
        assert (tmp_path / "out" / f"{name}.md").read_text() in text
    # One figure per benchmark, its unit-cost and cost-aware panels side by side.
    assert (tmp_path / "out" / "toy.png").stat().st_size > 10_000 and "![toy](toy.png)" in text
    assert not (tmp_path / "out" / "toy_unit.png").exists()
    main([str(tmp_path / "sweep"), "--linear"])
    assert "wrote" in capsys.readouterr().out and (tmp_path / "sweep" / "report" / "report.md").is_file()
    overview = (tmp_path / "out" / "overview.md").read_text()
    assert overview.index("## unit cost, regret @ 1 %") < overview.index("## aware cost, regret @ 1 %")
    assert "| toy | 2 each |" in overview
    with pytest.raises(SystemExit) as error:
        main([str(tmp_path / "empty")])
    assert error.value.code == 2


def test_the_figures_drawn_are_chosen(tmp_path):
    fake_run("toy", "UCB-E", [0.5, 1.0], [0.3, 0.0], policy="ucbe").save(tmp_path / "sweep" / "s0")
    write_report([tmp_path / "sweep"], tmp_path / "families", figures="families")
    assert sorted(path.name for path in (tmp_path / "families").glob("*.png")) == ["toy.png"]
    write_report([tmp_path / "sweep"], tmp_path / "none", figures="none")
    assert not list((tmp_path / "none").glob("*.png"))
    assert "![" not in (tmp_path / "none" / "report.md").read_text()
    write_report([tmp_path / "sweep"], tmp_path / "timing", figures="timing")
    assert sorted(path.name for path in (tmp_path / "timing").glob("*.png")) == ["timing_unit.png"]
    assert "toy.png" not in (tmp_path / "timing" / "report.md").read_text()
    with pytest.raises(ValueError, match="figures must be one of all, families, timing, none"):
        write_report([tmp_path / "sweep"], tmp_path / "bad", figures="regret")


def test_the_timing_figure_marks_the_stop_of_the_runs_that_recorded_its_wall_time(tmp_path, monkeypatch):
    """Rows of a store made before ``stop_wall_time_s`` (none here) beside rows that have it: the mark is the mean of
    those that have it."""
    import gittinseval.results.report as report_module

    drawn = {}
    monkeypatch.setattr(report_module, "plot_wall_times",
                        lambda groups, out, title, stops: drawn.setdefault(out.name, (groups, stops)) and out)
    runs = []
    for seed, stop_wall in enumerate([None, 0.2, 0.4]):
        run = fake_run("toy", "GittinsEval-S", [0.5, 1.0], [0.3, 0.0], seed=seed, stop=0.5, wall=1.0 + seed)
        if stop_wall is not None:
            run.summary["stop_wall_time_s"] = stop_wall
        runs.append(run)
    runs.append(fake_run("toy", "UCB-E", [0.5, 1.0], [0.3, 0.0], policy="ucbe"))
    write_report([], tmp_path / "out", figures="timing", runs=rows(runs))
    groups, stops = drawn["timing_unit.png"]
    assert groups == {"toy": {"GittinsEval-S": [1.0, 2.0, 3.0], "UCB-E": [1.0]}}
    assert stops == {"toy": {"GittinsEval-S": [0.2, 0.4], "UCB-E": []}}


def test_curves_of_a_swept_setting_are_in_numeric_order():
    runs = []
    for batch_size in (32, 8, 16):
        run = fake_run("toy", "GittinsEval-S", [1, 2], [0.1, 0.0])
        run.summary["batch_size"] = batch_size
        runs.append(run)
    (panel,) = panels(rows(runs))
    assert list(panel.curves) == ["GittinsEval-S B=8", "GittinsEval-S B=16", "GittinsEval-S B=32"]


def test_runs_carrying_a_certificate_get_its_table_and_runs_without_get_none(tmp_path):
    from gittinseval import GaussianPrior, GittinsPolicy, simulate
    from tests.conftest import binary_benchmark

    bench = binary_benchmark(8, 40, seed=3)
    runs = [simulate(bench, GittinsPolicy(batch_size=4), np.ones(8), GaussianPrior(), budget_fraction=0.2, seed=s,
                     cost_mode="unit") for s in range(4)]
    certificates = [run.summary["certificate"] for run in runs]
    write_report([], tmp_path / "with", figures="none", runs=[RunRow.of(run) for run in runs])
    table = (tmp_path / "with" / "certificate.md").read_text().splitlines()
    assert table[0] == "| benchmark | cost | method | runs | P(best) | P(within 0.01) | 95% interval covers |"
    covered = np.mean([c["lower"] <= bench.row_means[c["arm"]] <= c["upper"] for c in certificates])
    assert table[2] == (
        f"| toy | unit | GittinsEval | 4 | {np.mean([c['prob_best'] for c in certificates]):.3f} | "
        f"{np.mean([c['prob_eps_best'] for c in certificates]):.3f} | {covered:.3f} |"
    )
    assert "How sure the final recommendations were" in (tmp_path / "with" / "report.md").read_text()
    for run in runs:
        del run.summary["certificate"]
    write_report([], tmp_path / "without", figures="none", runs=[RunRow.of(run) for run in runs])
    assert not (tmp_path / "without" / "certificate.md").exists()
