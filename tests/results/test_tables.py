"""The report's markdown writer: estimates as cells, and the overview laid out from numeric rows alone."""

import math

import numpy as np
import pytest

from gittinseval.results.panels import CurveRow, PairedRow, Panel, PanelTables, by_cost_mode
from gittinseval.results.stats import Estimate
from gittinseval.results.tables import estimate_cell, overview_cells, overview_markdown


def test_an_estimate_cell_has_its_se_and_its_count_when_the_row_has_more():
    assert estimate_cell(Estimate(0.1234, 0.01, 5, 5), 5) == "0.1234 ± 0.0100"
    assert estimate_cell(Estimate(0.1, 0.0, 1, 1), 3) == "0.1000 ± 0.0000 (n=1)"
    assert estimate_cell(Estimate(2.5, math.nan, 4, 1), 4, digits=3) == "2.500 ± – (one seed)"
    assert estimate_cell(None, 4) == "–"


def test_estimates_of_value_seed_pairs():
    assert Estimate.of([]) is None
    assert Estimate.of([(0.3, 0)]) == Estimate(0.3, 0.0, 1, 1)  # a single value is its own mean
    one_seed = Estimate.of([(0.1, 7), (0.3, 7)])
    assert (one_seed.mean, math.isnan(one_seed.se), one_seed.n, one_seed.seeds) == (0.2, True, 2, 1)
    two_seeds = Estimate.of([(0.1, 0), (0.3, 1)])
    assert two_seeds.se == pytest.approx(np.std([0.1, 0.3], ddof=1) / np.sqrt(2)) and two_seeds.seeds == 2


def _curve(label, runs, regret, stop_cost=None, stopped=0):
    """A curve's numbers: ``regret`` at 1, 2 and 5 % (10 % has no run), over every run."""
    estimates = {percent: Estimate(value, 0.01, runs, runs) for percent, value in zip((1, 2, 5), regret, strict=True)}
    return CurveRow(label, runs, estimates | {10: None}, stop_cost, None, stopped, 1.0)


def test_the_overview_is_computed_from_numeric_rows():
    """No run, no text to parse: the panel's name and cost mode come from the Panel, every cell from the rows."""
    odd = Panel("mmlu_odd", "aware", "MMLU odd (x)", stand_in=True, curves={})
    odd_tables = PanelTables(
        odd,
        [_curve("A", 4, (0.2, 0.1, 0.05), Estimate(1.5, 0.2, 2, 2), stopped=2), _curve("B", 3, (0.3, 0.15, 0.0))],
        {"A": [PairedRow("B", "A", 3, {1: None, 2: Estimate(-0.05, 0.02, 2, 2), 5: None, 10: None})]},
    )
    plain = PanelTables(Panel("toy", "aware", "toy", stand_in=False, curves={}),
                        [_curve("A", 2, (0.4, 0.3, 0.2))], {"A": []})
    unit = PanelTables(Panel("toy", "unit", "toy", stand_in=False, curves={}), [_curve("A", 2, (0, 0, 0))], {})
    grouped = by_cost_mode([odd_tables, unit, plain])
    assert list(grouped) == ["aware", "unit"] and grouped["aware"] == [odd_tables, plain]
    first, second = overview_cells(grouped["aware"])
    assert first == {
        "panel": "MMLU odd (x)", "runs": "A 4, B 3",
        "1 % A": "0.2000 ± 0.0100", "1 % B": "0.3000 ± 0.0100",
        "2 % A": "0.1000 ± 0.0100", "2 % B": "0.1500 ± 0.0100",
        "5 % A": "0.0500 ± 0.0100", "5 % B": "0.0000 ± 0.0100",
        "stop % A": "1.500 ± 0.200 (2/4)", "stop % B": "– (0/3)",
        "B − A @ 2 %": "-0.0500 ± 0.0200 (n=2)",
    }
    assert list(second) == list(first)  # a panel without B has "–" in B's columns
    assert second["panel"] == "toy" and second["runs"] == "2 each" and second["2 % B"] == "–"
    assert second["B − A @ 2 %"] == "–" and second["stop % A"] == "– (0/2)"
    text = overview_markdown(grouped)
    assert text.startswith("# Overview\n\n## aware cost\n\n| panel | runs | 1 % A | 1 % B |")
    assert "| MMLU odd (x) | A 4, B 3 | 0.2000 ± 0.0100 |" in text and "## unit cost" in text
