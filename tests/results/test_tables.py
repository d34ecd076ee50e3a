"""The report's markdown writer: estimates as cells, and the overview laid out from numeric rows alone."""

import math

import numpy as np
import pytest

from gittinseval.results.panels import CurveRow, Panel, PanelTables, by_cost_mode
from gittinseval.results.stats import Estimate
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
    assert first == {"panel": "MMLU odd (x)", "runs": "A 4, B 3", "A": "0.2000 ± 0.0100", "B": "in design"}
    assert list(second) == list(first)  # a panel without B has "–" in B's column
    assert second == {"panel": "toy", "runs": "2 each", "A": "0.4000 ± 0.0100", "B": "–"}
    assert overview_cells(grouped["aware"], 2)[0]["B"] == "0.1500 ± 0.0100 (n=2, 1 in design)"
    text = overview_markdown(grouped)
    assert text.startswith("# Overview\n\n## unit cost, regret @ 1 %\n\n| panel | runs | A |")
    aware = "## aware cost, regret @ 2 %\n\n| panel | runs | A | B |\n|---|---|---|---|\n| MMLU odd (x) | A 4, B 3 |"
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
