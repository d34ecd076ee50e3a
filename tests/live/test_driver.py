"""evaluate(): budget bound under concurrency, stopping, retries, failures, resume, Ctrl-C."""

import asyncio
import signal
import sqlite3
import subprocess
import sys
import textwrap
import time

import numpy as np
import pytest

from gittinseval import GaussianPrior, GittinsPolicy, simulate
from gittinseval.baselines.uniform import UniformPolicy
from gittinseval.core.certificate import CertificateSettings
from gittinseval.core.confidence_stop import ConfidenceStop
from gittinseval.core.session import RunSettings
from gittinseval.live import (
    LiveConfig,
    LiveTask,
    MatrixScorer,
    NonRetryableError,
    TransientError,
    evaluate,
    evaluate_async,
)
from gittinseval.utils.validation import ConfigError
from tests.conftest import binary_benchmark

K, N, B = 16, 48, 4


@pytest.fixture(scope="module")
def bench():
    return binary_benchmark(K, N, seed=2)


def options(bench, lam=1e-3, **extra):
    """Costs in the policy's unit (1e6 tokens per example), the scores' kind and a fresh GittinsEval."""
    return {
        "costs": bench.prices,
        "tokens_per_example": 1e6,
        "binary": bench.binary,
        "policy": GittinsPolicy(B, lam),
        "progress": False,
        "retry_backoff": 0.001,
        **extra,
    }


def stored_cells(path):
    with sqlite3.connect(path) as db:
        return db.execute("SELECT arm, example, score FROM cells").fetchall()


@pytest.mark.parametrize("seed", range(3))
def test_concurrency_8_spends_at_most_one_batch_per_worker_over_budget(bench, tmp_path, seed):
    rng = np.random.default_rng(seed)
    actual_cost_factor = {}

    async def score_fn(arm, examples):
        # Random latency, so requests finish out of order; actual costs up to 3x the expected.
        await asyncio.sleep(float(rng.uniform(0, 0.004)))
        factor = actual_cost_factor.setdefault(len(actual_cost_factor), float(rng.uniform(0.5, 3.0)))
        return bench.scores[arm, examples], factor * len(examples) * bench.prices[arm]

    budget = 0.2 * N * bench.prices.sum()
    result = evaluate(
        range(K), range(N), score_fn, budget, concurrency=8, store=tmp_path / "run.sqlite", seed=seed, **options(bench)
    )
    assert result.stop_reason == "budget"
    with sqlite3.connect(tmp_path / "run.sqlite") as db:
        batch_costs = np.array([c for (c,) in db.execute("SELECT cost FROM requests WHERE outcome = 'told'")])
    assert result.spent == pytest.approx(batch_costs.sum())
    assert budget <= result.spent <= budget + 8 * batch_costs.max()
    # Several requests were really in flight at once (the bound is not vacuous).
    assert result.spent - budget > 0
    cells = stored_cells(tmp_path / "run.sqlite")
    assert len(cells) == len({(a, e) for a, e, _ in cells}) == int(result.trace["batch_size"].sum())


def test_thread_pool_runs_calls_concurrently(bench):
    active, peak = [0], [0]

    def score_fn(arm, examples):
        active[0] += 1
        peak[0] = max(peak[0], active[0])
        time.sleep(0.005)
        active[0] -= 1
        return bench.scores[arm, examples]

    result = evaluate(range(K), range(N), score_fn, 0.1 * N * bench.prices.sum(), concurrency=4, **options(bench))
    assert result.stop_reason == "budget" and 2 <= peak[0] <= 4


def test_stop_at_signal_stops_where_the_simulator_saw_the_signal(bench):
    simulated = simulate(bench, GittinsPolicy(B, 1e-2), bench.prices, GaussianPrior(), budget_fraction=1.0, seed=0)
    stop_step = simulated.summary["stop_step"]
    assert stop_step is not None
    live = evaluate(
        range(K), range(N), MatrixScorer(bench.scores), 1e9, stop_at_signal=True, **options(bench, lam=1e-2)
    )
    assert live.stop_reason == "policy" and live.stop_signal
    assert len(live.trace["step"]) == stop_step
    np.testing.assert_array_equal(live.trace["arm"], simulated.trace["arm"][:stop_step])


def test_a_budget_beyond_the_exhaustive_cost_evaluates_every_cell(bench):
    result = evaluate(range(K), range(N), MatrixScorer(bench.scores), 1e9, concurrency=3, **options(bench))
    assert result.stop_reason == "exhausted"
    assert result.status.n_seen.tolist() == [N] * K
    assert result.recommendation.arm == int(np.argmax(bench.row_means))
    assert result.spent == pytest.approx(N * bench.prices.sum())


def test_transient_failures_are_retried(bench):
    calls = []

    def flaky(arm, examples):
        calls.append(arm)
        if len(calls) % 3 != 0:
            raise ConnectionError("try again")
        return bench.scores[arm, examples]

    result = evaluate(range(K), range(N), flaky, 0.05 * N * bench.prices.sum(), max_retries=2, **options(bench))
    assert result.stop_reason == "budget" and result.error is None
    assert len(calls) == 3 * len(result.trace["step"])


def test_a_retry_held_back_by_the_calls_in_flight_is_made_once_they_are_charged(caplog):
    """Arm 0 fails at once while arm 1's dear call is in flight: its retry waits for that call's charge."""
    calls = []

    async def score_fn(arm, examples):
        calls.append(arm)
        if arm == 0 and calls.count(0) == 1:
            raise TransientError("503", cost=0.0)
        if arm == 1:
            await asyncio.sleep(0.3)  # in flight when arm 0 would retry
            return [1.0] * len(examples), 0.5  # far below its expected cost
        return [0.0] * len(examples)

    result = evaluate([0, 1], range(4), score_fn, 10.0, costs=[1.0, 10.0], policy=UniformPolicy(2),
                      concurrency=2, retry_backoff=0.001, progress=False)
    assert any("retry held back" in record.getMessage() for record in caplog.records)
    assert result.stop_reason == "exhausted" and result.status.n_seen.tolist() == [4, 4]
    assert calls.count(0) == 3 and result.spent == pytest.approx(2 * 2.0 + 2 * 0.5)


def test_persistent_failure_stops_cleanly_keeping_every_told_score(bench, tmp_path):
    attempts, down = [], [False]

    def failing_after_ten(arm, examples):
        attempts.append(arm)
        if len(attempts) > 10 and down[0]:
            raise TimeoutError("endpoint down")
        return bench.scores[arm, examples]

    down[0] = True

    store = tmp_path / "run.sqlite"
    result = evaluate(range(K), range(N), failing_after_ten, 1e9, max_retries=3, store=store, **options(bench))
    assert result.stop_reason == "error" and isinstance(result.error, TimeoutError)
    assert len(attempts) == 10 + 4  # ten good calls, then one call tried 1 + max_retries times
    assert len(stored_cells(store)) == 10 * B == int(result.status.n_seen.sum())
    with sqlite3.connect(store) as db:
        assert db.execute("SELECT COUNT(*) FROM requests WHERE closed_seq IS NULL").fetchone()[0] == 1
    # Resuming (the same scorer, its endpoint back) re-issues the failed request first, and goes on.
    down[0] = False
    resumed = evaluate(range(K), range(N), failing_after_ten, 1e9, store=store, **options(bench))
    assert resumed.stop_reason == "exhausted" and len(stored_cells(store)) == K * N


def test_invalid_scores_from_score_fn_stop_the_run(bench):
    result = evaluate(range(K), range(N), lambda arm, examples: [2.0] * len(examples), 1e9, **options(bench))
    assert result.stop_reason == "error" and isinstance(result.error, ValueError)
    assert "in [0, 1]" in str(result.error) and result.status.n_seen.sum() == 0
    # The call was made, so it is in the ledger, charged as expected (it reported no cost).
    arm = int(result.error_where.split()[1])
    assert result.attempts == {"scored": 0, "failed": 1, "lost": 0}
    assert result.spent == result.charged_as_expected == pytest.approx(B * bench.prices[arm])


def test_non_retryable_errors_stop_at_once(bench):
    calls = []

    def rejected(arm, examples):
        calls.append(arm)
        raise NonRetryableError("401 unauthorized")

    result = evaluate(range(K), range(N), rejected, 1e9, max_retries=3, **options(bench))
    assert result.stop_reason == "error" and isinstance(result.error, NonRetryableError) and len(calls) == 1


def test_a_data_error_is_not_retried_and_names_the_arm_and_examples(bench):
    calls = []

    def missing_field(arm, examples):
        calls.append(arm)
        return [{}["answer"] for _ in examples]

    result = evaluate(range(K), range(N), missing_field, 1e9, max_retries=3, **options(bench))
    assert result.stop_reason == "error" and isinstance(result.error, KeyError) and len(calls) == 1
    assert result.error_message.startswith(f"arm {calls[0]} ({calls[0]}), examples [")
    assert result.error_message.endswith("KeyError: 'answer'")


def test_malformed_results_are_not_retried(bench):
    calls = []

    def no_cost(arm, examples):
        calls.append(arm)
        return bench.scores[arm, examples], None

    result = evaluate(range(K), range(N), no_cost, 1e9, max_retries=3, **options(bench))
    assert result.stop_reason == "error" and isinstance(result.error, TypeError) and len(calls) == 1


def test_resumed_run_counts_earlier_spend_toward_the_budget(bench, tmp_path):
    store, budget = tmp_path / "run.sqlite", 0.3 * N * bench.prices.sum()
    scorer = MatrixScorer(bench.scores)
    whole = evaluate(range(K), range(N), scorer, budget, **options(bench))
    first = evaluate(range(K), range(N), scorer, budget / 2, store=store, **options(bench))
    second = evaluate(range(K), range(N), scorer, budget, store=store, **options(bench))
    assert first.spent < second.spent == whole.spent
    np.testing.assert_array_equal(second.trace["arm"], whole.trace["arm"])
    with pytest.raises(ValueError, match="dataset: the examples differ from the store's"):
        evaluate(range(K), range(1, N + 1), scorer, budget, store=store, **options(bench))


def test_bad_driver_arguments(bench):
    scorer = MatrixScorer(bench.scores)
    with pytest.raises(ValueError, match="budget_usd must be positive"):
        evaluate(range(K), range(N), scorer, 0.0, **options(bench))
    with pytest.raises(ValueError, match="concurrency must be a positive integer"):
        evaluate(range(K), range(N), scorer, 1.0, concurrency=0, **options(bench))


def test_ctrl_c_stops_cleanly_after_telling_the_requests_in_flight(tmp_path):
    store = tmp_path / "run.sqlite"
    script = textwrap.dedent(
        f"""
        import signal, sys, time
        import numpy as np
        from gittinseval import GittinsPolicy
        from gittinseval.live import evaluate
        # As in a terminal: a shell without job control starts background jobs (this
        # suite, say) with SIGINT ignored, and the child would inherit that.
        signal.signal(signal.SIGINT, signal.default_int_handler)
        scores = (np.random.default_rng(0).uniform(size=(20, 400)) < 0.5).astype(float)
        def slow(arm, examples):
            time.sleep(0.02)
            return scores[arm, examples]
        def told(request, values, cost):
            print("told", flush=True)
        result = evaluate(range(20), range(400), slow, 1e9, concurrency=4, store={str(store)!r},
                          costs="unit", policy=GittinsPolicy(4), progress=False, on_tell=told)
        print("reason", result.stop_reason, int(result.status.n_seen.sum()), flush=True)
        """
    )
    process = subprocess.Popen([sys.executable, "-c", script], stdout=subprocess.PIPE, text=True)
    for _ in range(10):
        assert process.stdout.readline().strip() == "told"
    process.send_signal(signal.SIGINT)
    lines = process.stdout.read().split()
    assert process.wait(timeout=60) == 0
    assert lines[-3] == "reason" and lines[-2] == "interrupted"
    with sqlite3.connect(store) as db:
        assert db.execute("SELECT COUNT(*) FROM requests WHERE closed_seq IS NULL").fetchone()[0] == 0
        assert db.execute("SELECT COUNT(*) FROM cells").fetchone()[0] == int(lines[-1])


def divide_scores(examples):
    return [1.0 / (example - example) for example in examples]  # raises ZeroDivisionError


def broken_score_fn(arm, examples):
    return divide_scores(examples)


async def broken_async_score_fn(arm, examples):
    return divide_scores(examples)


@pytest.mark.parametrize("score_fn", [broken_score_fn, broken_async_score_fn], ids=["thread", "async"])
def test_an_exception_in_score_fn_is_logged_with_its_traceback_and_names_the_function_and_line(caplog, score_fn):
    result = evaluate(range(2), range(8), score_fn, 1.0, costs="unit", policy=UniformPolicy(2), progress=False)
    line = divide_scores.__code__.co_firstlineno + 1
    raised_at = f", in divide_scores (tests/live/test_driver.py:{line}): ZeroDivisionError: float division by zero"
    assert result.stop_reason == "error" and result.failure.endswith(raised_at)
    [record] = [record for record in caplog.records if record.levelname == "ERROR"]
    assert record.exc_info[1] is result.error and "stopping with everything scored so far kept" in record.getMessage()
    assert "score_fn" in caplog.text and f'test_driver.py", line {line}, in divide_scores' in caplog.text


def test_the_progress_bar_shows_the_true_spend_past_the_budget(bench, capsys):
    """The last batches cross the budget: the bar is full and its text says what was spent."""
    budget = 0.1 * N * bench.prices.sum()
    result = evaluate(range(K), range(N), MatrixScorer(bench.scores), budget, **options(bench, progress=True))
    assert result.spent > budget
    assert f"${result.spent:.4g}/${budget:.4g}" in capsys.readouterr().err


def test_the_ledger_line_counts_one_scoring_call_in_the_singular():
    result = evaluate(["a", "b"], range(4), lambda arm, batch: [1.0] * len(batch), 1.0, costs=[1.0, 1.0],
                      policy=UniformPolicy(4), progress=False)
    assert result.ledger_line().startswith("spent $4 of a budget of $1 on 1 scoring call (1 scored, 0 failed, 0 lost)")


def test_a_second_cancellation_abandons_the_calls_in_flight_charged_as_the_resume_charges_them(tmp_path):
    """Ctrl-C as the driver sees it (a cancellation of its task): the first waits for the calls in flight,
    the second abandons them at once, settled as lost and charged as expected then: the stop line counts them
    as the resume does, which sends their requests again and charges them nothing more."""
    store = tmp_path / "run.sqlite"
    hanging = [True]

    async def score_fn(arm, batch):
        deadline = time.monotonic() + 10  # a driver that does not abandon it fails the test, not hangs it
        while hanging[0] and time.monotonic() < deadline:
            await asyncio.sleep(0.01)
        return [1.0] * len(batch)

    def run():
        task = LiveTask(["a", "b"], range(8), score_fn, [1.0, 1.0])
        config = LiveConfig(budget_usd=100.0, policy=UniformPolicy(2), concurrency=2, store=store, progress=False)
        return evaluate_async(task, config)

    async def interrupt_twice():
        interrupted = asyncio.ensure_future(run())
        await asyncio.sleep(0.2)
        interrupted.cancel()
        await asyncio.sleep(0.1)
        assert not interrupted.done()  # waiting for the calls in flight
        interrupted.cancel()
        return await asyncio.wait_for(interrupted, timeout=5)

    result = asyncio.run(interrupt_twice())
    assert result.stop_reason == "interrupted" and result.recommendation is None
    # Two calls of two examples at $1 each: lost, $4 charged as expected, in the stop line as in the resume.
    assert result.attempts == {"scored": 0, "failed": 0, "lost": 2} and result.spent == result.charged_as_expected == 4
    stop_line = "spent $4 of a budget of $100 on 2 scoring calls (0 scored, 0 failed, 2 lost)"
    assert result.ledger_line().startswith(stop_line)
    with sqlite3.connect(store) as db:
        assert db.execute("SELECT COUNT(*) FROM attempts WHERE finished_seq IS NULL").fetchone()[0] == 0
        assert db.execute("SELECT SUM(charged) FROM attempts WHERE outcome = 'lost'").fetchone()[0] == 4
    hanging[0] = False
    resumed = asyncio.run(run())
    assert resumed.stop_reason == "exhausted" and resumed.attempts == {"scored": 8, "failed": 0, "lost": 2}
    assert resumed.spent == 16 + result.spent and resumed.charged_as_expected == result.charged_as_expected


def test_the_certificate_of_a_live_run_is_the_simulator_s_on_the_same_scores(bench):
    budget = 0.2 * N * bench.prices.sum()
    # A live run states the anytime statement by default; the simulator when asked.
    simulated = simulate(bench, GittinsPolicy(B, 1e-3), bench.prices, GaussianPrior(0.6, 0.03), budget_fraction=0.2,
                         settings=RunSettings(certificate=CertificateSettings(anytime=True)))
    live = evaluate(range(K), range(N), MatrixScorer(bench.scores), budget, prior=GaussianPrior(0.6, 0.03),
                    **options(bench))
    np.testing.assert_array_equal(live.trace["arm"], simulated.trace["arm"])
    expected = {key: value for key, value in simulated.summary["certificate"].items() if key != "true_mean"}
    assert live.summary()["certificate"] == expected
    # Per arm in the status table: the certificate's intervals and P(best).  The exact lattice sums count a tie
    # for the best as best for each arm in it, so they sum to 1 or more (exactly 1 without ties).
    assert live.certificate.model == "eb" and live.status.prob_best.sum() >= 1.0 - 1e-9
    assert live.status.lower[live.certificate.arm] == live.certificate.lower


def test_the_confidence_stop_ends_the_run_where_the_simulator_records_it(bench):
    stop = {"prob_eps_best": 0.7, "eps": 0.05}
    simulated = simulate(bench, GittinsPolicy(B, 1e-3), bench.prices, GaussianPrior(), budget_fraction=1.0,
                         settings=RunSettings(stop_when=ConfidenceStop(**stop)))
    step = simulated.summary["confidence_stop"]["step"]
    assert step is not None and step < simulated.summary["n_steps"]
    live = evaluate(range(K), range(N), MatrixScorer(bench.scores), 1e9, stop_when=stop, certificate={"eps": 0.05},
                    **options(bench))
    assert live.stop_reason == "confidence" and live.summary()["stop_reason"] == "confidence"
    assert len(live.trace["step"]) == step
    assert live.certificate.prob_eps_best >= 0.7 and live.certificate.eps == 0.05
    # Without the stop the same run goes on.
    unstopped = evaluate(range(K), range(N), MatrixScorer(bench.scores), 1e9, **options(bench))
    assert unstopped.stop_reason == "exhausted" and len(unstopped.trace["step"]) > step


def test_the_certificate_settings_are_checked_when_the_config_is_built():
    with pytest.raises(ConfigError, match="certificate.level must be a number in"):
        LiveConfig(certificate={"level": 1.5})
    with pytest.raises(ConfigError, match=r"stop_when has unknown keys \['prob'\]"):
        LiveConfig(stop_when={"prob": 0.9})
