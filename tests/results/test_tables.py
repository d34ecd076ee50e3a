"""The report's markdown writer: estimates as cells, and the overview laid out from numeric rows alone."""

import math

import numpy as np
import pytest

from gittinseval.results import tables
from gittinseval.results.calibration import calibration_rows, reliability_rows
from gittinseval.results.confidence_stop import confidence_stop_rows
from gittinseval.results.panels import CurveRow, Panel, PanelTables, by_cost_mode
from gittinseval.results.stats import Estimate, wilson_interval
from gittinseval.results.tables import estimate_cell, overview_cells, overview_markdown, slug, timing_cells


def test_an_estimate_cell_has_its_se_and_its_count_when_the_row_has_more():
    assert estimate_cell(Estimate(0.1234, 0.01, 5, 5), 5) == "0.1234 ± 0.0100"
    assert estimate_cell(Estimate(0.1, 0.0, 1, 1), 3) == "0.1000 ± 0.0000 (n=1)"
    assert estimate_cell(Estimate(2.5, math.nan, 4, 1), 4, digits=3) == "2.500 ± – (one seed)"
    assert estimate_cell(None, 4) == "–"
    assert estimate_cell(None, 4, in_design=4) == estimate_cell(Estimate(0.1, 0.0, 4, 4), 4, in_design=4) == "in design"
    assert estimate_cell(Estimate(0.1, 0.02, 3, 3), 4, in_design=1) == "0.1000 ± 0.0200 (n=3, 1 in design)"


def test_estimates_of_value_seed_pairs():
    assert Estimate.of([]) is None
    assert Estimate.of([(0.3, 0)]) == Estimate(0.3, 0.0, 1, 1)  # a single value is its own mean
    one_seed = Estimate.of([(0.1, 7), (0.3, 7)])
    assert (one_seed.mean, math.isnan(one_seed.se), one_seed.n, one_seed.seeds) == (0.2, True, 2, 1)
    two_seeds = Estimate.of([(0.1, 0), (0.3, 1)])
    assert two_seeds.se == pytest.approx(np.std([0.1, 0.3], ddof=1) / np.sqrt(2)) and two_seeds.seeds == 2


def _curve(label, runs, regret, in_design=(0, 0, 0)):
    """A curve's numbers: ``regret`` at 1, 2 and 5 % (10 % has no run), over every run not in design."""
    estimates = {p: None if value is None else Estimate(value, 0.01, runs - d, runs - d)
                 for p, value, d in zip((1, 2, 5), regret, in_design, strict=True)}
    designing = dict(zip((1, 2, 5), in_design, strict=True)) | {10: 0}
    return CurveRow(label, runs, estimates | {10: None}, designing, None, None, 0, Estimate(1.0, 0.1, runs, runs))


def test_the_overview_is_computed_from_numeric_rows():
    """No run, no text to parse: the panel's name and cost mode come from the Panel, every cell from the rows."""
    odd = Panel("mmlu_odd", "aware", "MMLU odd (x)", stand_in=True, curves={})
    odd_tables = PanelTables(odd, [_curve("A", 4, (0.2, 0.1, 0.05)), _curve("B", 3, (None, 0.15, 0.0), (3, 1, 0))],
                             {}, [])
    plain = PanelTables(Panel("toy", "aware", "toy", stand_in=False, curves={}), [_curve("A", 2, (0.4, 0.3, 0.2))],
                        {}, [])
    unit = PanelTables(Panel("toy", "unit", "toy", stand_in=False, curves={}), [_curve("A", 2, (0, 0, 0))], {}, [])
    grouped = by_cost_mode([odd_tables, plain, unit])
    assert list(grouped) == ["unit", "aware"] and grouped["aware"] == [odd_tables, plain]
    first, second = overview_cells(grouped["aware"], 1)
    assert first == {"panel (regret @ 1 %)": "MMLU odd (x)", "runs": "A 4, B 3", "A": "0.2000 ± 0.0100",
                     "B": "in design"}
    assert list(second) == list(first)  # a panel without B has "–" in B's column
    assert second == {"panel (regret @ 1 %)": "toy", "runs": "2 each", "A": "0.4000 ± 0.0100", "B": "–"}
    assert overview_cells(grouped["aware"], 2)[0]["B"] == "0.1500 ± 0.0100 (n=2, 1 in design)"
    text = overview_markdown(grouped)
    assert text.startswith("# Overview\n\n## unit cost, regret @ 1 %\n\n| panel (regret @ 1 %) | runs | A |")
    aware = ("## aware cost, regret @ 2 %\n\n| panel (regret @ 2 %) | runs | A | B |\n|---|---|---|---|\n"
             "| MMLU odd (x) | A 4, B 3 |")
    assert aware in text


def test_a_wall_time_is_given_as_a_multiple_of_ucb_e_where_the_panel_has_it():
    def curve(label, seconds):
        row = _curve(label, 2, (0, 0, 0))
        row.wall_time = Estimate(seconds, 0.05, 2, 2)
        return row

    small = PanelTables(Panel("s", "unit", "small", False, {}), [curve("UCB-E", 0.5), curve("S", 1.25)], {}, [])
    large = PanelTables(Panel("l", "unit", "large", False, {}), [curve("S", 12.5)], {}, [])
    ucbe, s = timing_cells([small, large])
    assert ucbe == {"method": "UCB-E", "small": "0.5 ± 0.05 s", "large": "–"}
    assert s == {"method": "S", "small": "1.25 ± 0.05 s (2.5× UCB-E)", "large": "12.5 ± 0.05 s"}


def test_a_label_becomes_a_file_name():
    assert slug("GittinsEval-S λ=0.0001") == "gittinseval-s-0.0001" and slug("UCB-E") == "ucb-e"


def _certificate(prob_best, prob_eps_best, lower, upper, true_mean, regret):
    return {"arm": 0, "mean": (lower + upper) / 2, "lower": lower, "upper": upper, "level": 0.95,
            "prob_best": prob_best, "prob_best_se": 0.0, "prob_eps_best": prob_eps_best, "prob_eps_best_se": 0.0,
            "eps": 0.01, "n_samples": 4096, "true_mean": true_mean, "regret": regret}


def _calibration_summaries():
    # Two MMLU subjects and one GSM8K run; the second MMLU run misses its interval and is 0.02 off the best.
    hit = _certificate(0.9, 0.95, 0.6, 0.8, 0.7, 0.0)
    near = _certificate(0.3, 1.0, 0.6, 0.8, 0.71, 0.005)
    miss = _certificate(0.05, 0.2, 0.6, 0.8, 0.9, 0.02)
    return [
        {"benchmark": "mmlu/anatomy", "cost_mode": "unit", "label": "UCB-E",
         "certificates": {"1pct": hit, "2pct": near, "5pct": None, "10pct": hit, "stop": None},
         "confidence_stop": {"prob_eps_best": 0.95, "eps": 0.01, "step": 3, "cost": 1.0, "cost_pct": 2.0,
                             "regret": 0.02}},
        {"benchmark": "mmlu/virology", "cost_mode": "unit", "label": "UCB-E",
         "certificates": {"1pct": miss, "2pct": miss, "5pct": None, "10pct": hit, "stop": None},
         "confidence_stop": {"prob_eps_best": 0.95, "eps": 0.01, "step": None, "cost": None, "cost_pct": None,
                             "regret": None}},
        {"benchmark": "gsm8k_zeroeval", "cost_mode": "unit", "label": "UCB-E",
         "certificates": {"1pct": hit, "2pct": None, "5pct": None, "10pct": None, "stop": None},
         "confidence_stop": {"prob_eps_best": 0.95, "eps": 0.01, "step": 5, "cost": 1.0, "cost_pct": 4.0,
                             "regret": 0.0}},
        {"benchmark": "mmlu/anatomy", "cost_mode": "unit", "label": "Uniform"},  # a run without certificates
    ]


def _per_family(rows, cells):
    """Per family, its table as the report writes it: its numbers, then their text."""
    return {family: cells(family_rows) for family, family_rows in rows.items()}


def test_wilson_interval_matches_its_closed_form_at_the_ends_and_brackets_the_share():
    z2 = 1.959963984540054 ** 2
    assert wilson_interval(0, 10) == pytest.approx((0.0, z2 / (10 + z2)))
    assert wilson_interval(10, 10) == pytest.approx((10 / (10 + z2), 1.0))
    low, high = wilson_interval(30, 100)
    assert low < 0.3 < high and high - low == pytest.approx(2 * 1.96 * (0.3 * 0.7 / 100) ** 0.5, rel=0.05)


def test_calibration_cells_pool_a_family_per_method_and_checkpoint():
    cells = _per_family(calibration_rows(_calibration_summaries()), tables.calibration_cells)
    assert list(cells) == ["gsm8k_zeroeval", "mmlu"]
    mmlu = {row["at"]: row for row in cells["mmlu"]}
    assert list(mmlu) == ["1 %", "2 %", "10 %"]  # no certificate at 5 % or at a stop
    assert mmlu["1 %"]["runs"] == "2"
    # 1 %: hit and miss; covered 1 of 2, best 1 of 2, within 0.01 1 of 2, stated P(best) (0.9 + 0.05) / 2.
    assert mmlu["1 %"]["95 % interval covers"].startswith("0.500 [")
    assert mmlu["1 %"]["P(best) stated"] == "0.475" and mmlu["1 %"]["best"].startswith("0.500 [")
    assert mmlu["1 %"]["P(within 0.01) stated"] == "0.575"
    # 2 %: near (regret 0.005 <= 0.01, not best) and miss.
    assert mmlu["2 %"]["best"].startswith("0.000 [") and mmlu["2 %"]["within 0.01"].startswith("0.500 [")
    assert mmlu["10 %"]["95 % interval covers"] == "1.000 [0.342, 1.000]"
    assert calibration_rows([{"benchmark": "x", "cost_mode": "unit", "label": "L"}]) == {}


def test_reliability_bins_hold_each_statement_once_with_one_in_the_last_bin():
    cells = tables.reliability_cells(reliability_rows(_calibration_summaries())["mmlu"])
    assert [row["stated"] for row in cells][-1] == "[0.95, 1]"
    counts = {row["stated"]: int(row["P(within 0.01): n"]) for row in cells}
    # Statements of P(within 0.01): 0.95 x 2 (hit at 1 % and 10 %, anatomy), 1.0 (near), 0.2 x 2 (miss), 0.95 (hit
    # at 10 %, virology): 0.95 and 1.0 share the last bin; 0.2 opens the [0.2, 0.4) bin.
    assert counts["[0.95, 1]"] == 4 and counts["[0.2, 0.4)"] == 2 and sum(counts.values()) == 6
    last = next(row for row in cells if row["stated"] == "[0.95, 1]")
    assert last["P(within 0.01): mean stated"] == f"{(0.95 * 3 + 1.0) / 4:.3f}"
    assert last["P(within 0.01): observed"].startswith("1.000 [")
    best = {row["stated"]: row for row in cells}
    # P(best) 0.05 is in [0.05, 0.2) (left-closed), twice, never best.
    assert best["[0.05, 0.2)"]["P(best): n"] == "2" and best["[0.05, 0.2)"]["P(best): observed"].startswith("0.000")


def test_confidence_stop_cells_count_fired_stops_and_their_errors():
    cells = tables.confidence_stop_cells(confidence_stop_rows(_calibration_summaries()))
    rows = {row["benchmark"]: row for row in cells}
    assert rows["mmlu/anatomy"]["fired"] == "1/1" and rows["mmlu/virology"]["fired"] == "0/1"
    assert rows["mmlu/anatomy"]["not within 0.01 (δ = 0.05)"].startswith("1.000 [")
    assert rows["gsm8k_zeroeval"]["not within 0.01 (δ = 0.05)"].startswith("0.000 [")
    assert rows["gsm8k_zeroeval"]["mean stop (% of exhaustive)"] == "4"
    assert rows["mmlu/virology"]["mean stop (% of exhaustive)"] == tables.EMPTY
