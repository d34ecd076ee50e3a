"""The end of a live run (gittinseval.live.result): the ledger line, the error and failure messages, and the summary
that ``summary.json`` records, against the fields they are made of."""

import json
import math

import numpy as np
import pytest

from gittinseval.core.certificate import posterior_from_statistics
from gittinseval.live.failures import NonRetryableError
from gittinseval.live.result import LiveResult
from gittinseval.live.status import ArmStatus, Recommendation

POSTERIOR = posterior_from_statistics([6.0, 2.0, 0.0], [8, 4, 0], 20, 0.5, 0.04)
STATUS = ArmStatus.of(POSTERIOR, ("small", "large", "tiny"), outstanding=[2], kappa=1.0)
TRACE = {"step": np.arange(1, 4), "arm": np.array([0, 1, 0])}


def result(**fields) -> LiveResult:
    recommended = Recommendation(0, '{"model": "small"}', 0.7, 0.0025, 0.65, label="small")
    defaults = {"recommendation": recommended, "spent": 0.123456789, "budget_usd": 0.5, "stop_reason": "budget",
                "stop_signal": False, "trace": TRACE, "status": STATUS,
                "attempts": {"scored": 3, "failed": 1}, "charged_as_expected": 0.01}
    return LiveResult(**(defaults | fields))


def test_the_ledger_line_says_what_was_spent_on_how_many_calls():
    assert result().ledger_line() == (
        "spent $0.123457 of a budget of $0.5 on 4 scoring calls (3 scored, 1 failed); "
        "charged as expected (calls of unknown cost): $0.01"
    )
    unit = result(status_unit="unit", spent=12.0, budget_usd=None, attempts={"scored": 1}, charged_as_expected=0.0)
    assert unit.ledger_line() == (
        "spent 12 of no budget on 1 scoring call (1 scored); charged as expected (calls of unknown cost): 0"
    )


def test_a_run_that_scored_nothing_says_why_it_recommends_nothing():
    assert result().failure is None and result().error_message is None
    stopped = result(recommendation=None, stop_reason="interrupted")
    assert stopped.failure == "no recommendation: nothing was scored; stopped (interrupted)"
    failed = result(recommendation=None, stop_reason="error", error=NonRetryableError("HTTP 401: bad key"),
                    error_where="arm 1 (large), examples [3, 4]")
    assert failed.error_message == "arm 1 (large), examples [3, 4]: NonRetryableError: HTTP 401: bad key"
    assert failed.failure == (
        "no recommendation: nothing was scored; the scoring calls failed: "
        "arm 1 (large), examples [3, 4]: NonRetryableError: HTTP 401: bad key"
    )
    assert result(error=ValueError("x")).error_message == "ValueError: x"  # no place given


def test_the_summary_is_json_and_reads_the_recommendation_and_the_table():
    summary = result(store="outputs/live/run.sqlite", warnings=["check the grading"]).summary()
    assert json.loads(json.dumps(summary)) == summary
    assert summary["recommended"] == 0 and summary["recommended_label"] == "small"
    assert summary["recommended_sd"] == math.sqrt(0.0025) == 0.05
    assert (summary["recommended_mean"], summary["recommended_lcb"], summary["recommended_value"]) == (0.7, 0.65, None)
    assert summary["n_requests"] == 3 and summary["n_cells"] == 12  # told cells of the table: 8 + 4 + 0
    assert summary["store"] == "outputs/live/run.sqlite" and summary["warnings"] == ["check the grading"]
    assert summary["certificate"] is None and summary["failure"] is None and summary["error"] is None
    assert (summary["spent"], summary["budget_usd"], summary["stop_reason"]) == (0.123456789, 0.5, "budget")
    empty = result(recommendation=None, stop_reason="exhausted").summary()
    assert all(empty[key] is None for key in empty if key.startswith("recommended"))
    assert empty["failure"] == "no recommendation: nothing was scored; stopped (exhausted)"


TIMEOUT = "arm 1 (large), example 4: TransientError: http://127.0.0.1:1/v1/chat/completions: Request timed out."


@pytest.mark.parametrize(
    ("fields", "stop_line"),
    [
        ({"charged_as_expected": 0.0}, "stopped (budget)"),
        # Timeouts charged as expected reached the budget: how many, how much, and the last failure.
        ({"charged_as_expected": 0.0016, "calls_charged_as_expected": 2, "spent": 0.0016, "last_failure": TIMEOUT},
         "stopped (budget); 2 calls of unknown cost (timed out, lost or without usage) charged as expected: "
         f"$0.0016 of the $0.0016 spent; the last failed call: {TIMEOUT}"),
        ({"charged_as_expected": 3.0, "calls_charged_as_expected": 1, "spent": 7.0, "status_unit": "unit"},
         "stopped (budget); 1 call of unknown cost (timed out, lost or without usage) charged as expected: "
         "3 of the 7 spent"),
        # Calls charged as expected say what spent a budget, not why another stop came.
        ({"stop_reason": "interrupted", "calls_charged_as_expected": 1, "last_failure": TIMEOUT},
         f"stopped (interrupted); the last failed call: {TIMEOUT}"),
        # An error that stopped the run is its own message (error_message), not the last failed call.
        ({"stop_reason": "error", "error": NonRetryableError("HTTP 401"), "last_failure": TIMEOUT}, "stopped (error)"),
    ],
    ids=["budget", "timeouts spent the budget", "unit costs", "interrupted after a failure", "error"],
)
def test_the_stop_line_says_the_failures_that_ended_the_run(fields, stop_line):
    assert result(**fields).stop_line == stop_line


def test_a_run_that_scored_nothing_before_the_budget_says_its_last_failure_in_the_failure_and_the_summary():
    lost = result(recommendation=None, charged_as_expected=0.0016, calls_charged_as_expected=2, spent=0.0016,
                  attempts={"scored": 0, "failed": 2, "lost": 0}, last_failure=TIMEOUT)
    summary = lost.summary()
    assert lost.failure == f"no recommendation: nothing was scored; {lost.stop_line}"
    assert summary["failure"] == lost.failure and TIMEOUT in lost.failure and "TransientError" in lost.failure
    assert (summary["last_failure"], summary["calls_charged_as_expected"], summary["error"]) == (TIMEOUT, 2, None)
    assert json.loads(json.dumps(summary)) == summary
