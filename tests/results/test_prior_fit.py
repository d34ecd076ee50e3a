"""The GittinsEval-EB prior-fit table (gittinseval/results/prior_fit.py) against values worked out by hand."""

from gittinseval.results.prior_fit import prior_fit_rows
from gittinseval.results.tables import EMPTY, prior_fit_cells


def prior_fit_table(summaries):
    """The prior-fit table as the report writes it: its numbers, then their text."""
    return prior_fit_cells(prior_fit_rows(summaries))


def eb_run(benchmark, cost, fits, refreshes, tables, mean, var_estimate, population=None):
    run = {"benchmark": benchmark, "cost_mode": cost, "label": "GittinsEval-EB",
           "diagnostics": {"prior_fits": fits, "table_refreshes": refreshes, "tables_computed": tables,
                           "final_prior_mean": mean, "final_prior_var": var_estimate,
                           "final_prior_var_estimate": var_estimate}}
    if population is not None:
        run["arm_population"] = {"mean": population[0], "var": population[1]}
    return run


def test_rows_pool_a_family_per_cost_mode_as_median_min_max():
    runs = [
        eb_run("mmlu/anatomy", "unit", 10, 2, 3, 0.50, 0.010, (0.45, 0.005)),
        eb_run("mmlu/virology", "unit", 30, 6, 7, 0.60, 0.004, (0.62, 0.008)),
        eb_run("mmlu/astronomy", "unit", 20, 4, 5, 0.70, 0.009, (0.70, 0.003)),
        eb_run("mmlu/anatomy", "aware", 11, 5, 6, 0.55, 0.020, (0.45, 0.005)),
        {"benchmark": "mmlu/anatomy", "cost_mode": "unit", "label": "GittinsEval-G", "diagnostics": {}},
    ]
    rows = prior_fit_table(runs)
    assert [(row["benchmark"], row["cost"]) for row in rows] == [("mmlu", "aware"), ("mmlu", "unit")]
    aware, unit = rows
    assert unit["EB runs"] == "3"
    assert unit["prior fits"] == "20 [10, 30]"
    assert unit["table refreshes"] == "4 [2, 6]"
    assert unit["tables built"] == "5 [3, 7]"
    # mu_0 - m: +0.05, -0.02, 0.00; v_0 / s^2: 2.0, 0.5, 3.0.
    assert unit["final μ₀ − mean of arm means"] == "+0.000 [-0.020, +0.050]"
    assert unit["final v₀ estimate / variance of arm means"] == "2.00 [0.50, 3.00]"
    assert aware["final v₀ estimate / variance of arm means"] == "4.00 [4.00, 4.00]"


def test_runs_without_a_population_are_counted_but_not_judged():
    runs = [
        eb_run("alpacaeval", "unit", 4, 1, 2, 0.3, 0.01, (0.2, 0.01)),
        eb_run("alpacaeval", "unit", 6, 3, 4, 0.3, 0.01),  # an older store's run
        eb_run("alpacaeval", "unit", 8, 5, 6, 0.3, 0.01, (0.3, 0.0)),  # all arms equal: no ratio
    ]
    (row,) = prior_fit_table(runs)
    assert row["EB runs"] == "3 (1 judged)"
    assert row["prior fits"] == "6 [4, 8]"
    assert row["final μ₀ − mean of arm means"] == "+0.100 [+0.100, +0.100]"
    only_older = prior_fit_table([eb_run("alpacaeval", "unit", 4, 1, 2, 0.3, 0.01)])
    assert only_older[0]["final μ₀ − mean of arm means"] == EMPTY


def test_no_eb_run_gives_no_table():
    assert prior_fit_table([{"benchmark": "gsm8k", "cost_mode": "unit", "diagnostics": {}}]) == []
