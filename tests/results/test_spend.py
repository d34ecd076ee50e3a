"""Spend shares (gittinseval/results/spend.py) against sums taken by hand."""

import numpy as np
import pytest

from gittinseval.results.spend import spend_rows
from gittinseval.results.tables import spend_cells


def spend_table(summaries, **options):
    """The spend table as the report writes it: its numbers, then their text."""
    return spend_cells(spend_rows(summaries, **options))


def summary(seed, spend, ratio=None, plan=None, label="GittinsEval-S", means=(0.9, 0.8, 0.7, 0.6, 0.5),
            benchmark="gsm8k_zeroeval"):
    run = {"seed": seed, "label": label, "benchmark": benchmark, "cost_mode": "per_cell", "arm_means": list(means),
           "arm_spend": {"1pct": [0.0] * len(spend), "10pct": list(spend)}}
    if plan is not None:
        run |= {"cost_plan": plan, "arm_planned_over_true": list(ratio)}
    return run


def test_each_run_is_measured_on_its_seeds_misguessed_arms_and_the_best_arms():
    off_0 = [0.2, 1.0, 5.0, 1.0, 0.2]  # seed 0: arms 0 and 4 guessed cheap, arm 2 dear
    off_1 = [1.0, 5.0, 1.0, 0.2, 1.0]  # seed 1: arm 3 cheap, arm 1 dear
    runs = [
        summary(0, [1, 2, 3, 4, 10], off_0, "5x off"),
        summary(1, [0, 5, 5, 0, 10], off_1, "5x off"),
        summary(0, [4, 4, 0, 0, 2], [1.0] * 5, "true"),
        summary(1, [2, 0, 0, 6, 2], [1.0] * 5, "true"),
        {"seed": 0, "label": "UCB-E"},  # no arm_spend: left out
    ]
    rows = {row["share of the spend to 10 %"]: row for row in spend_table(runs, top=2)}
    assert list(rows) == ["GittinsEval-S, costs 5x off", "GittinsEval-S, costs true"]
    off, true = rows["GittinsEval-S, costs 5x off"], rows["GittinsEval-S, costs true"]
    # By hand: seed 0 spends 20 in all, seed 1 20; the best two arms are 0 and 1.
    assert off["guessed cheap"] == f"{np.mean([(1 + 10) / 20, 0 / 20]):.3f}"
    assert off["guessed dear"] == f"{np.mean([3 / 20, 5 / 20]):.3f}"
    assert off["the 2 best"] == f"{np.mean([3 / 20, 5 / 20]):.3f}" and off["runs"] == "2"
    # The true-cost runs are measured on the arms their seed's 5x-off plan got wrong.
    assert true["guessed cheap"] == f"{np.mean([(4 + 2) / 10, 6 / 10]):.3f}"
    assert true["guessed dear"] == f"{np.mean([0 / 10, 0 / 10]):.3f}"
    assert true["the 2 best"] == f"{np.mean([8 / 10, 2 / 10]):.3f}"


def test_a_seed_without_a_misguessed_plan_leaves_the_guess_columns_empty():
    (row,) = spend_table([summary(3, [1, 1, 0, 0, 2], [1.0] * 5, "true")], top=1)
    assert (row["guessed cheap"], row["guessed dear"], row["the 1 best"]) == ("–", "–", "0.250")


def test_a_share_is_the_mean_over_the_runs_that_have_it_and_says_how_many():
    off = [0.2, 1.0, 5.0, 1.0, 1.0]
    runs = [summary(0, [1, 0, 0, 0, 1], off, "true"), summary(0, [0, 0, 0, 0, 0], [1.0] * 5, "true"),
            summary(1, [3, 0, 0, 0, 1], [1.0] * 5, "true")]  # seed 1: no misguessed plan; seed 0's second: no spend
    (row,) = spend_table(runs, top=1)
    assert row["guessed cheap"] == "0.500 (1 runs)" and row["the 1 best"] == f"{np.mean([0.5, 0.75]):.3f} (2 runs)"
    assert row["runs"] == "3"


def test_benchmarks_are_kept_apart():
    runs = [summary(0, [1, 0, 0, 0, 1], [0.2, 1, 1, 1, 1], "5x off"),
            summary(0, [1, 1, 1], [1, 1, 5.0], "5x off", means=(0.1, 0.2, 0.3), benchmark="other")]
    rows = spend_table(runs, top=1)
    assert [(row["benchmark"], row["guessed cheap"], row["guessed dear"]) for row in rows] == [
        ("gsm8k_zeroeval", "0.500", "0.000"), ("other", "0.000", "0.333")]


def test_runs_of_one_seed_that_misguess_different_arms_are_refused():
    runs = [summary(0, [1] * 5, [0.2, 1, 1, 1, 1], "a"), summary(0, [1] * 5, [1, 0.2, 1, 1, 1], "b")]
    with pytest.raises(ValueError, match="seed 0 on gsm8k_zeroeval misguess different arms"):
        spend_table(runs)


def test_runs_without_arm_spend_give_no_table():
    assert spend_table([{"seed": 0, "label": "UCB-E"}]) == []
