"""A scoring function's bill per example (gittinseval/live/usage.py): checked, charged, and kept by the store."""

import sqlite3

import numpy as np
import pyarrow.csv
import pytest

from gittinseval import GittinsPolicy
from gittinseval.live import Evaluator, LiveConfig, LiveTask, ScoringError, Usage, evaluate
from gittinseval.live.export import export_store, store_tables


def test_a_usage_is_one_bill_per_example():
    usage = Usage([0.25, 0.5, 0.0], [10, 20, None], [3, 4, None])
    assert len(usage) == 3 and usage.cost == 0.75 and usage.tokens_in == (10, 20, None)
    assert ScoringError("x", usage=usage).cost == 0.75 and ScoringError("x", cost=0.1, usage=usage).cost == 0.1
    with pytest.raises(ValueError, match="usage: 2 tokens_in for 3 examples"):
        Usage([0.1, 0.2, 0.3], [1, 2], [1, 2, 3])
    with pytest.raises(ValueError, match="usage: dollars must be finite and non-negative"):
        Usage([0.1, -0.2], [1, 2], [1, 2])
    with pytest.raises(ValueError, match="usage: tokens_out must be non-negative"):
        Usage([0.1, 0.2], [1, 2], [1, -2])


def test_a_usage_says_which_replies_the_cache_served_or_nothing():
    assert Usage([0.1, 0.0], [1, 2], [1, 2]).cached == (None, None)  # a scorer without a cache
    assert Usage([0.1, 0.0], [1, 2], [1, 2], cached=[False, np.True_]).cached == (False, True)
    with pytest.raises(ValueError, match=r"usage: cached must be 2 booleans \(or None\), got \[True\]"):
        Usage([0.1, 0.0], [1, 2], [1, 2], cached=[True])
    with pytest.raises(ValueError, match="usage: cached must be 2 booleans"):
        Usage([0.1, 0.0], [1, 2], [1, 2], cached=["yes", True])


def run(score_fn, store=None):
    return evaluate(["a", "b"], list(range(4)), score_fn, None, costs=[1e-5, 1e-5], policy=GittinsPolicy(2),
                    store=store, progress=False, concurrency=1)


def test_a_score_fn_that_bills_each_example_is_charged_their_sum_and_the_store_keeps_the_bills(tmp_path):
    def score_fn(arm, batch):
        tokens = [10 * (example + 1) for example in batch]
        return [1.0] * len(batch), Usage([t * 1e-6 for t in tokens], tokens, [2] * len(batch))

    result = run(score_fn, tmp_path / "run.sqlite")
    assert result.spent == pytest.approx(2 * sum(10 * (n + 1) * 1e-6 for n in range(4)), rel=1e-12)
    with sqlite3.connect(tmp_path / "run.sqlite") as db:
        bills = db.execute("SELECT example, dollars, tokens_in, tokens_out FROM usage ORDER BY example").fetchall()
    assert bills == [(n, pytest.approx(10 * (n + 1) * 1e-6), 10 * (n + 1), 2) for n in range(4) for _ in "ab"]


def test_a_usage_of_the_wrong_length_is_a_failed_call_that_stops_the_run():
    result = run(lambda arm, batch: (np.ones(len(batch)), Usage([1e-6], [1], [1])))
    assert result.stop_reason == "error" and result.attempts == {"scored": 0, "failed": 1, "lost": 0}
    assert "the call's usage covers 1 examples, it asked for 2" in result.error_message
    assert result.spent == pytest.approx(1e-6)  # what it reported


def test_a_failure_whose_usage_is_of_the_wrong_length_is_charged_its_sum_and_recorded(tmp_path):
    def score_fn(arm, batch):
        raise ScoringError("the grader broke", scores=[1.0, None], usage=Usage([2e-6], [5], [1]))

    result = run(score_fn, tmp_path / "run.sqlite")
    assert result.stop_reason == "error" and result.attempts == {"scored": 0, "failed": 1, "lost": 0}
    assert result.spent == pytest.approx(2e-6)
    with sqlite3.connect(tmp_path / "run.sqlite") as db:
        (error,) = db.execute("SELECT error FROM attempts").fetchone()
        assert db.execute("SELECT COUNT(*) FROM usage").fetchone() == (0,)
    assert "the grader broke" in error and "usage covers 1 examples, it asked for 2, not kept" in error


def test_a_cost_and_a_usage_that_disagree_are_a_failed_call_charged_the_usage(tmp_path):
    task = LiveTask(["a", "b"], list(range(4)), costs=[1e-5, 1e-5])
    with Evaluator(task, LiveConfig(policy=GittinsPolicy(2), store=tmp_path / "run.sqlite")) as evaluator:
        request = evaluator.ask()
        attempt = evaluator.start_attempt(request)
        usage = Usage([1e-6, 3e-6], [1, 3], [1, 1])
        with pytest.raises(ValueError, match=r"reported 0.5 dollars and a usage of 4e-06"):
            evaluator.finish_attempt(attempt, [1.0, 0.0], 0.5, usage)
        assert evaluator.spent == pytest.approx(4e-6)
        attempt = evaluator.start_attempt(request)
        evaluator.finish_attempt(attempt, [1.0, 0.0], 4e-6 * (1 + 1e-12), usage)  # agreeing to rounding
        assert evaluator.spent == pytest.approx(8e-6)
    failed, scored = store_tables(tmp_path / "run.sqlite")[1].to_pylist()
    assert (failed["status"], scored["status"]) == ("failed", "scored")
    # The disagreeing usage is not kept, only its sum charged; the ledger sums the scored call's over its examples.
    assert (failed["billed_dollars"], failed["tokens_in"], failed["tokens_out"]) == (None, None, None)
    assert (scored["tokens_in"], scored["tokens_out"]) == (1 + 3, 1 + 1)
    assert scored["billed_dollars"] == pytest.approx(4e-6, rel=1e-12)


def test_a_call_with_an_unknown_token_count_has_no_token_sum_in_the_ledger(tmp_path):
    task = LiveTask(["a", "b"], list(range(4)), costs=[1e-5, 1e-5])
    with Evaluator(task, LiveConfig(policy=GittinsPolicy(2), store=tmp_path / "run.sqlite")) as evaluator:
        request = evaluator.ask()
        evaluator.tell(request, [1.0, 0.0], usage=Usage([1e-6, 2e-6], [5, None], [1, 2]))
        request = evaluator.ask()
        attempt = evaluator.start_attempt(request)
        evaluator.fail_attempt(attempt, ScoringError("the grader broke", usage=Usage([4e-6, 5e-6], [7, 8], [0, 1])))
    told, failed = store_tables(tmp_path / "run.sqlite")[1].to_pylist()
    assert (told["tokens_in"], told["tokens_out"]) == (None, 3)
    assert told["billed_dollars"] == pytest.approx(3e-6, rel=1e-12)
    # A failed call's usage is kept and summed like a scored one's.
    assert (failed["status"], failed["tokens_in"], failed["tokens_out"]) == ("failed", 15, 1)
    assert failed["billed_dollars"] == pytest.approx(9e-6, rel=1e-12) == pytest.approx(failed["dollars"], rel=1e-12)


def test_a_told_usage_is_charged_kept_and_exported_and_a_bad_one_changes_nothing(tmp_path):
    task = LiveTask(["a", "b"], list(range(4)), costs=[1e-5, 1e-5])
    with Evaluator(task, LiveConfig(policy=GittinsPolicy(2), store=tmp_path / "run.sqlite")) as evaluator:
        request = evaluator.ask()
        usage = Usage([1e-6, 3e-6], [10, 30], [1, 2])
        with pytest.raises(ValueError, match=r"told a cost of 0.5 dollars and a usage of 4e-06"):
            evaluator.tell(request, [1.0, 0.0], 0.5, usage)
        with pytest.raises(ValueError, match="usage covers 1 examples, it asked for 2"):
            evaluator.tell(request, [1.0, 0.0], usage=Usage([1e-6], [1], [1]))
        assert evaluator.spent == 0 and evaluator.outstanding == [request]  # refused: nothing recorded
        assert evaluator.tell(request, [1.0, 0.0], usage=usage) == pytest.approx(4e-6)
        assert evaluator.spent == pytest.approx(4e-6)
    cells_path, _ = export_store(tmp_path / "run.sqlite", "csv", tmp_path / "out")
    cells = pyarrow.csv.read_csv(cells_path).to_pylist()
    by_example = {row["example"]: row for row in cells}
    for position, example in enumerate(request.examples.tolist()):
        row = by_example[example]
        assert (row["tokens_in"], row["tokens_out"]) == (usage.tokens_in[position], usage.tokens_out[position])
        assert row["billed_dollars"] == pytest.approx(usage.dollars[position])
