"""Spend by price decile (gittinseval/results/price_deciles.py): deciles by the share of arms priced at most an
arm's price, each run's share of its spend per decile, averaged per curve, against a computation by hand."""

from fractions import Fraction

import numpy as np
import pytest

from gittinseval.results.price_deciles import price_decile_rows, price_deciles
from gittinseval.results.tables import price_decile_cells


def deciles_by_hand(prices):
    """Decile d of an arm: (d - 1) / 10 < #{j : p_j <= p_k} / K <= d / 10, in exact fractions."""
    shares = [Fraction(sum(other <= price for other in prices), len(prices)) for price in prices]
    return [next(d for d in range(1, 11) if Fraction(d - 1, 10) < share <= Fraction(d, 10)) for share in shares]


@pytest.mark.parametrize("prices", [
    list(range(1, 21)),  # 20 arms: two a decile
    [0.5] * 3 + [1.0] * 27,  # ties share a decile: the three cheapest are the cheapest tenth
    [0.3, 0.1, 0.2, 0.1, 5.0, 0.9, 0.9, 2.5, 0.05, 7.0, 0.4, 0.9, 1.1, 3.3, 0.2, 0.8, 0.6],  # 17 arms, unsorted
    list(np.random.default_rng(3).lognormal(size=41)),
])
def test_price_deciles_are_those_of_the_share_of_arms_priced_at_most_the_arms_price(prices):
    assert price_deciles(prices).tolist() == deciles_by_hand(prices)


def summary(spend, prices, *, label="GittinsEval-S", lam=1e-4, seed=0, benchmark="toy", means=None):
    return {
        "benchmark": benchmark, "cost_mode": "aware", "label": label, "lam": lam, "seed": seed,
        "arm_spend": {"1pct": [0.0] * len(spend), "10pct": spend}, "arm_prices": prices,
        "arm_means": means or [0.5] * len(prices),
    }


def test_each_row_is_the_mean_share_of_its_runs_spend_on_each_decile():
    prices = [float(p) for p in range(1, 21)]  # deciles: arms 0-1, 2-3, ..., 18-19
    means = [0.1] * 20
    means[17] = 0.9  # the best arm is in decile 9
    first = [2.0, 2.0] + [0.0] * 16 + [4.0, 0.0]  # 50 % on D1, 50 % on D10
    second = [0.0, 0.0, 1.0] + [0.0] * 17  # everything on D2
    rows = price_decile_rows([
        summary(first, prices, seed=0, means=means), summary(second, prices, seed=1, means=means),
        summary(first, prices, lam=1e-3, means=means), summary([0.0] * 20, prices, lam=1e-3, seed=1, means=means),
        {"benchmark": "toy", "cost_mode": "aware", "label": "old", "lam": None, "arm_spend": {"10pct": first}},
    ])
    assert [(row.label, row.lam, row.runs) for row in rows] == [("GittinsEval-S", 1e-4, 2), ("GittinsEval-S", 1e-3, 2)]
    assert rows[0].shares == pytest.approx([0.25, 0.5] + [0.0] * 7 + [0.25])
    assert rows[1].shares == pytest.approx([0.5] + [0.0] * 8 + [0.5])  # a run that spent nothing has no share
    assert rows[0].arms == (2,) * 10 and rows[0].lowest[9] == 19.0 and rows[0].highest[9] == 20.0
    assert rows[0].best_decile == 9
    cells = price_decile_cells(rows[:1])
    assert cells == [{
        "benchmark": "toy", "cost": "aware", "share of the spend to 10 %": "GittinsEval-S λ=0.0001",
        **{f"D{d}": share for d, share in enumerate(["25.0 %", "50.0 %"] + ["0.0 %"] * 7 + ["25.0 %"], start=1)},
        "best arm in": "D9", "runs": "2",
    }]


def test_a_decile_without_arms_has_no_share_and_runs_of_other_prices_are_refused():
    prices = [0.5] * 3 + [1.0] * 27  # every arm at 1.0 is in decile 10: deciles 2-9 hold none
    (row,) = price_decile_rows([summary([1.0] * 30, prices, label="UCB-E", lam=None)])
    assert row.arms == (3, 0, 0, 0, 0, 0, 0, 0, 0, 27) and row.shares[0] == pytest.approx(0.1)
    assert np.isnan(row.shares[1]) and np.isnan(row.lowest[1])
    assert price_decile_cells([row])[0]["D2"] == "–"
    assert price_decile_cells([row])[0]["share of the spend to 10 %"] == "UCB-E"
    with pytest.raises(ValueError, match="different arm prices"):
        price_decile_rows([summary([1.0] * 30, prices), summary([1.0] * 30, prices[::-1], seed=1)])
