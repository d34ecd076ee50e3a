"""Ask/tell Evaluator: the simulator's trajectory, outstanding requests, rejected tells, the store."""

import math
import sqlite3
from dataclasses import replace

import numpy as np
import pytest

from gittinseval import GaussianPrior, GittinsPolicy, simulate
from gittinseval.baselines.ucbe import UCBEPolicy
from gittinseval.core.objective import Objective
from gittinseval.core.protocol import PosteriorReport
from gittinseval.core.session import RunSettings
from gittinseval.live import Evaluator, LiveConfig, LiveTask, MatrixScorer, ScoringError, evaluate
from gittinseval.live.replay import unbilled_calls
from gittinseval.utils.validation import ConfigError
from tests.conftest import binary_benchmark

K, N, B = 12, 40, 4


@pytest.fixture(scope="module")
def bench():
    return binary_benchmark(K, N, seed=1)


def task_of(bench, arms=range(K), n_examples=N, costs=None):
    """A task whose costs are in the policy's unit already (1e6 tokens per example)."""
    return LiveTask(arms, range(n_examples), costs=bench.prices if costs is None else costs, tokens_per_example=1e6)


def make(bench, store=None, lam=1e-3, kappa=1.0, seed=5):
    config = LiveConfig(policy=GittinsPolicy(B, lam, kappa), prior=GaussianPrior(0.5, 0.04), store=store, seed=seed)
    return Evaluator(task_of(bench), config)


def run_to(evaluator, bench, n_requests):
    for _ in range(n_requests):
        request = evaluator.ask()
        evaluator.tell(request, bench.scores[request.arm, request.examples])


@pytest.mark.parametrize("seed", [0, 7])
def test_live_run_at_concurrency_one_is_the_simulators_run(bench, seed):
    budget_fraction = 0.3
    simulated = simulate(
        bench,
        GittinsPolicy(B, 1e-3),
        bench.prices,
        GaussianPrior(0.5, 0.04),
        budget_fraction=budget_fraction,
        seed=seed,
    )
    live = evaluate(
        range(K),
        range(N),
        MatrixScorer(bench.scores),
        budget_fraction * N * bench.prices.sum(),
        costs=bench.prices,
        prior=GaussianPrior(0.5, 0.04),
        policy=GittinsPolicy(B, 1e-3),
        tokens_per_example=1e6,
        seed=seed,
        concurrency=1,
        progress=False,
    )
    assert live.stop_reason == "budget"
    for column in ("arm", "batch_size", "recommended"):
        np.testing.assert_array_equal(live.trace[column], simulated.trace[column])
    np.testing.assert_array_equal(live.trace["cost"], simulated.trace["cost"])
    assert live.recommendation.arm == simulated.summary["final_recommended"]


def test_busy_arms_are_skipped_in_index_order(bench):
    evaluator = make(bench)
    run_to(evaluator, bench, 15)
    policy = evaluator.policy
    # Independent ranking: unfinished arms by index, ties by the run's priority.
    ranked = sorted(np.flatnonzero(~policy.posterior.completed), key=lambda k: (-policy.index[k], policy.priority[k]))
    asked = [evaluator.ask() for _ in range(4)]
    assert [r.arm for r in asked] == ranked[:4]
    assert evaluator.n_outstanding == 4
    # Telling one frees its arm; the next ask re-ranks on the updated posterior.
    evaluator.tell(asked[0], bench.scores[asked[0].arm, asked[0].examples])
    busy = {r.arm for r in asked[1:]}
    ranked = sorted(
        (k for k in np.flatnonzero(~policy.posterior.completed) if k not in busy),
        key=lambda k: (-policy.index[k], policy.priority[k]),
    )
    assert evaluator.ask().arm == ranked[0]


def test_ask_never_hands_out_an_example_twice(bench):
    evaluator = make(bench)
    seen = set()
    while not evaluator.finished:
        outstanding = []
        while (request := evaluator.ask()) is not None:
            outstanding.append(request)
        # Every unfinished arm is busy, each with one request.
        assert len(outstanding) == evaluator.n_outstanding == int((~evaluator.policy.posterior.completed).sum())
        for request in outstanding[::2] or outstanding:
            cells = {(request.arm, int(e)) for e in request.examples}
            assert not cells & seen
            seen |= cells
            evaluator.tell(request, bench.scores[request.arm, request.examples])
        # The untold ones are handed out again only after they are told.
        for request in outstanding[1::2]:
            cells = {(request.arm, int(e)) for e in request.examples}
            assert not cells & seen
            seen |= cells
            evaluator.tell(request, bench.scores[request.arm, request.examples])
    assert len(seen) == K * N and evaluator.ask() is None


def test_recommendation_and_status_match_the_closed_form_posterior(bench):
    evaluator = make(bench, kappa=0.7)
    run_to(evaluator, bench, 30)
    status = evaluator.status()
    prior_mean, prior_var, cell_var = 0.5, 0.04, 0.25
    seen = status.n_seen
    sums = np.array([bench.scores[k, evaluator.policy.order.order[k, : seen[k]]].sum() for k in range(K)])
    # All of an arm's scores at once: conjugate normal update with n observations.
    latent_var = 1 / (1 / prior_var + seen / cell_var)
    latent_mean = latent_var * (prior_mean / prior_var + sums / cell_var)
    unseen = N - seen
    mean = (sums + unseen * latent_mean) / N
    variance = (unseen**2 * latent_var + unseen * cell_var) / N**2
    np.testing.assert_allclose(status.mean, mean, rtol=1e-12)
    np.testing.assert_allclose(status.variance, variance, rtol=1e-12)
    np.testing.assert_allclose(status.lcb, mean - 0.7 * np.sqrt(variance), rtol=1e-12)
    with np.errstate(invalid="ignore"):
        np.testing.assert_allclose(status.sample_mean, np.where(seen > 0, sums / seen, np.nan))
    rec = evaluator.recommend()
    assert rec.lcb == pytest.approx(status.lcb.max()) and rec.name == str(rec.arm)
    assert rec.mean == pytest.approx(mean[rec.arm]) and rec.variance == pytest.approx(variance[rec.arm])
    assert rec.lcb == pytest.approx(rec.mean - 0.7 * math.sqrt(rec.variance))
    assert "lcb" in status.format(top=3) and len(status.format(top=3).splitlines()) == 4


class WideUCBE(UCBEPolicy):
    """UCB-E reported with its own working variance and LCB width."""

    def posterior_report(self):
        return PosteriorReport(cell_var=0.1, kappa=2.0)


@pytest.mark.parametrize(
    ("make_policy", "cell_var", "kappa"),
    [
        (lambda: UCBEPolicy(B), 0.25, 1.0),
        (lambda: WideUCBE(B), 0.1, 2.0),
        (lambda: GittinsPolicy(B, cell_var=0.2, kappa=0.5), 0.2, 0.5),
    ],
    ids=["default", "own-report", "gittins"],
)
def test_the_reported_posterior_is_the_policys(bench, make_policy, cell_var, kappa):
    """M, V and the LCB use the cell variance and kappa of the policy's posterior_report(), for any policy."""
    evaluator = Evaluator(task_of(bench), LiveConfig(policy=make_policy(), prior=GaussianPrior(0.5, 0.04)))
    run_to(evaluator, bench, 20)
    status = evaluator.status()
    seen = status.n_seen
    sums = np.nan_to_num(status.sample_mean) * seen
    latent_var = 1 / (1 / 0.04 + seen / cell_var)
    latent_mean = latent_var * (0.5 / 0.04 + sums / cell_var)
    mean = (sums + (N - seen) * latent_mean) / N
    variance = ((N - seen) ** 2 * latent_var + (N - seen) * cell_var) / N**2
    np.testing.assert_allclose(status.mean, mean, rtol=1e-12)
    np.testing.assert_allclose(status.variance, variance, rtol=1e-12)
    np.testing.assert_allclose(status.lcb, mean - kappa * np.sqrt(variance), rtol=1e-12)


@pytest.mark.parametrize(
    "scores, message",
    [
        (lambda n: np.full(n, 1.5), r"in \[0, 1\]"),
        (lambda n: np.r_[np.nan, np.zeros(n - 1)], r"in \[0, 1\]"),
        (lambda n: np.full(n, -0.1), r"in \[0, 1\]"),
        (lambda n: np.zeros(n + 1), "expected 4 scores"),
    ],
)
def test_bad_scores_are_rejected_and_change_nothing(bench, scores, message):
    evaluator = make(bench)
    request = evaluator.ask()
    with pytest.raises(ValueError, match=message):
        evaluator.tell(request, scores(request.size))
    assert evaluator.spent == 0 and evaluator.n_outstanding == 1 and len(evaluator.trace()["step"]) == 0
    evaluator.tell(request, np.zeros(request.size))
    assert evaluator.spent == pytest.approx(request.size * bench.prices[request.arm])


def test_tells_of_unknown_or_told_requests_are_rejected(bench):
    from gittinseval import Request

    evaluator = make(bench)
    request = evaluator.ask()
    never = Request((request.arm + 1) % K, np.arange(B))
    with pytest.raises(ValueError, match="no outstanding request"):
        evaluator.tell(never, np.zeros(B))
    with pytest.raises(ValueError, match="no outstanding request"):
        evaluator.tell(Request(request.arm, request.examples[::-1]), np.zeros(B))
    with pytest.raises(ValueError, match="outside"):
        evaluator.tell(Request(K, np.arange(B)), np.zeros(B))
    with pytest.raises(ValueError, match="cost must be finite and non-negative"):
        evaluator.tell(request, np.zeros(B), cost=-1.0)
    evaluator.tell(request, np.ones(B), cost=0.25)
    assert evaluator.spent == 0.25
    with pytest.raises(ValueError, match="already told"):
        evaluator.tell(request, np.ones(B))


def test_bad_definitions_are_rejected(bench):
    with pytest.raises(ValueError, match="distinct"):
        Evaluator(LiveTask(["a", "a"], range(N)))
    with pytest.raises(ValueError, match="11 prices for 12 arms; give one price per arm"):
        Evaluator(LiveTask(range(K), range(N), costs=np.ones(K - 1)))
    with pytest.raises(ValueError, match="costs must be positive"):
        Evaluator(LiveTask(range(K), range(N), costs=np.r_[0.0, np.ones(K - 1)]))


def test_reopened_store_continues_exactly_like_an_uninterrupted_run(bench, tmp_path):
    uninterrupted = make(bench)
    run_to(uninterrupted, bench, 60)

    first = make(bench, store=tmp_path / "run.sqlite")
    run_to(first, bench, 25)
    pending = first.ask()  # issued, never told
    state = (first.spent, first.status(), first.stop_signal, first.policy.order.n_taken.copy())
    first.close()

    second = Evaluator.from_store(tmp_path / "run.sqlite")
    assert second.spent == state[0] and second.stop_signal == state[2]
    np.testing.assert_array_equal(second.policy.index, first.policy.index)
    for name in ("n_seen", "mean", "variance", "lcb"):
        np.testing.assert_array_equal(getattr(second.status(), name), getattr(state[1], name))
    np.testing.assert_array_equal(second.policy.order.n_taken, state[3])
    reissued = second.ask()
    assert reissued.arm == pending.arm and np.array_equal(reissued.examples, pending.examples)
    second.tell(reissued, bench.scores[reissued.arm, reissued.examples])
    run_to(second, bench, 60 - 26)
    for column, values in uninterrupted.trace().items():
        np.testing.assert_array_equal(second.trace()[column], values)
    second.close()

    with sqlite3.connect(tmp_path / "run.sqlite") as db:
        cells = db.execute("SELECT arm, example, score FROM cells").fetchall()
        assert db.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
        assert db.execute("SELECT COUNT(*) FROM requests WHERE closed_seq IS NULL").fetchone()[0] == 0
    assert len(cells) == int(uninterrupted.status().n_seen.sum())
    assert all(bench.scores[arm, example] == score for arm, example, score in cells)


def test_store_with_other_arms_or_settings_is_refused_with_the_differences(bench, tmp_path):
    path = tmp_path / "run.sqlite"
    make(bench, store=path).close()
    with pytest.raises(ValueError, match=r"policy\.lam: store has 0\.001, given 0\.01") as info:
        make(bench, store=path, lam=1e-2, seed=6)
    assert "seed: store has 5, given 6" in str(info.value)
    same = LiveConfig(policy=GittinsPolicy(B, 1e-3), store=path, seed=5)
    with pytest.raises(ValueError, match="arm 3: store has '3', given 'x'"):
        Evaluator(task_of(bench, arms=[*map(str, range(3)), "x", *map(str, range(4, K))]), same)
    other_costs = bench.prices.copy()
    other_costs[2] *= 2
    with pytest.raises(ValueError, match="cost of arm 2"):
        Evaluator(task_of(bench, costs=other_costs), same)
    with pytest.raises(ValueError, match="n_examples: store has 40, given 41"):
        Evaluator(task_of(bench, n_examples=N + 1), same)
    refused = "policy: store has 'gittinseval.core.gittins.GittinsPolicy', given 'baselines"
    with pytest.raises(ValueError, match=refused):
        Evaluator(task_of(bench), replace(same, policy=UCBEPolicy(B)))
    # A refused open leaves the store usable.
    assert Evaluator.from_store(path).spent == 0


def test_every_untold_request_is_reissued_oldest_first(bench, tmp_path):
    path = tmp_path / "run.sqlite"
    first = make(bench, store=path)
    run_to(first, bench, 10)
    pending = [first.ask() for _ in range(3)]
    first.tell(pending[1], bench.scores[pending[1].arm, pending[1].examples])
    first.close()
    second = make(bench, store=path)
    assert second.n_outstanding == 2
    for expected in (pending[0], pending[2]):
        again = second.ask()
        assert again.arm == expected.arm and np.array_equal(again.examples, expected.examples)
    fresh = second.ask()
    assert fresh.arm not in {pending[0].arm, pending[2].arm}
    with sqlite3.connect(path) as db:
        assert db.execute("SELECT COUNT(*) FROM requests WHERE closed_seq IS NULL").fetchone()[0] == 3
    second.close()


def test_prior_must_be_gaussian(bench):
    from gittinseval import BenchmarkPrior

    with pytest.raises(ValueError, match="resolve a BenchmarkPrior first"):
        Evaluator(LiveTask(range(K), range(N)), LiveConfig(prior=BenchmarkPrior()))


def test_cancel_of_a_request_with_scored_paid_cells_is_refused_and_the_table_shows_them(bench, tmp_path):
    """A call that failed part-way keeps its scored cells, paid for: the request cannot be cancelled (the
    policy would ask them again and they would be paid twice), and the arms' table counts them as seen."""
    evaluator = make(bench, store=tmp_path / "run.sqlite")
    request = evaluator.ask()
    attempt = evaluator.start_attempt(request)
    kept = [1.0, None, 0.0, None]
    evaluator.fail_attempt(attempt, ScoringError("timeout", scores=kept, cost=0.5, uncosted=2))
    with pytest.raises(ValueError, match=f"arm {request.arm}: 2 examples of this request are scored and paid for"):
        evaluator.cancel(request)
    assert evaluator.n_outstanding == 1 and evaluator.spent == pytest.approx(0.5 + 2 * bench.prices[request.arm])
    status = evaluator.status()
    assert status.n_scored[request.arm] == 2 and status.scored_mean[request.arm] == 0.5
    assert status.n_seen[request.arm] == 0 and status.n_scored.sum() == 2
    evaluator.close()
    with sqlite3.connect(tmp_path / "run.sqlite") as db:
        assert db.execute("SELECT outcome FROM requests").fetchall() == [(None,)]
        assert db.execute("SELECT COUNT(*) FROM cells").fetchone()[0] == 2


@pytest.mark.parametrize("held_out", [1, 3])
def test_ask_returns_nothing_once_spent_plus_the_requests_out_reach_the_budget(bench, tmp_path, held_out):
    """The driver's rule in an ask/tell loop: no request once spent plus the expected cost of the requests
    handed out and not told reaches budget_usd, ``held_out`` requests out at once; a reopened store keeps it."""
    budget = 0.2 * N * bench.prices.sum()
    config = LiveConfig(budget_usd=budget, policy=GittinsPolicy(B, 1e-3), store=tmp_path / "run.sqlite", seed=5)
    evaluator = Evaluator(task_of(bench), config)
    largest = B * bench.prices.max()
    while True:
        out = [evaluator.ask() for _ in range(held_out)]
        asked = [request for request in out if request is not None]
        expected = sum(request.size * bench.prices[request.arm] for request in asked)
        assert evaluator.spent + expected < budget + largest  # the last request out may cross it
        for request in asked:
            evaluator.tell(request, bench.scores[request.arm, request.examples])
        if len(asked) < held_out:
            break
    assert budget <= evaluator.spent < budget + held_out * largest and evaluator.ask() is None
    evaluator.close()
    reopened = Evaluator.from_store(tmp_path / "run.sqlite")
    assert reopened.budget_usd == pytest.approx(budget, rel=1e-12) and reopened.ask() is None
    reopened.close()


@pytest.mark.parametrize("make_policy", [lambda: GittinsPolicy(B, 1e-3), lambda: UCBEPolicy(batch_size=B)])
@pytest.mark.parametrize("objective", [Objective("value", mu=0.1), Objective("cheapest_within", eps=0.1, delta=0.5)])
def test_a_live_run_under_an_objective_is_the_simulators_run(bench, make_policy, objective):
    """Live, an arm's deployment price is its expected dollars per example: here the benchmark's prices."""
    budget_fraction = 0.3
    simulated = simulate(bench, make_policy(), bench.prices, GaussianPrior(0.5, 0.04),
                         budget_fraction=budget_fraction, seed=3, settings=RunSettings(objective=objective))
    accuracy = simulate(bench, make_policy(), bench.prices, GaussianPrior(0.5, 0.04),
                        budget_fraction=budget_fraction, seed=3)
    live = evaluate(range(K), range(N), MatrixScorer(bench.scores), budget_fraction * N * bench.prices.sum(),
                    costs=bench.prices, prior=GaussianPrior(0.5, 0.04), policy=make_policy(), tokens_per_example=1e6,
                    seed=3, concurrency=1, progress=False, objective=objective)
    for column in ("arm", "recommended"):
        np.testing.assert_array_equal(live.trace[column], simulated.trace[column])
    assert live.recommendation.arm == simulated.summary["final_recommended"]
    # The objective changed the recommendations somewhere along the run (value: also the allocation of GittinsEval).
    changed = not np.array_equal(simulated.trace["recommended"], accuracy.trace["recommended"])
    assert changed or (objective.name == "cheapest_within" and simulated.summary["objective"]["qualified"])


def test_a_price_objective_needs_expected_dollars(bench):
    config = LiveConfig(objective=Objective("value", mu=0.1))
    with pytest.raises(ConfigError, match="deployment price"):
        Evaluator(task_of(bench, costs="unit"), config)


def test_a_store_refuses_to_resume_under_another_objective(bench, tmp_path):
    store = tmp_path / "run.sqlite"
    policy = GittinsPolicy(B, 1e-3)
    with Evaluator(task_of(bench), LiveConfig(policy=policy, store=store)) as evaluator:
        run_to(evaluator, bench, 3)
    other = LiveConfig(policy=GittinsPolicy(B, 1e-3), store=store, objective=Objective("value", mu=0.1))
    with pytest.raises(ValueError, match="objective"):
        Evaluator(task_of(bench), other)


class WaitingInABatch:
    """A scorer whose every request waits in a batch, unbilled (``unbilled``), as a batch-mode chat scorer's may."""

    def __call__(self, arm, examples):
        raise AssertionError("never called: the caller scores")

    def unbilled(self, arm, examples):
        return len(examples)


def test_calls_abandoned_or_lost_are_charged_nothing_for_requests_no_batch_billed(bench, tmp_path):
    """A second Ctrl-C (abandon_calls) and a store reopened by from_store charge a lost call as a resume with the
    task does: $0 for the requests waiting in a batch (charged their batch price when collected), not as expected."""
    store = tmp_path / "run.sqlite"
    task = replace(task_of(bench), score_fn=WaitingInABatch())
    with Evaluator(task, LiveConfig(policy=GittinsPolicy(B, 1e-3), store=store)) as evaluator:
        evaluator.start_attempt(evaluator.ask())
        assert evaluator.abandon_calls() == 1 and evaluator.spent == 0
        evaluator.start_attempt(evaluator.ask())  # in flight when the session ends
    with Evaluator.from_store(store, unbilled_calls(task)) as reopened:
        assert reopened.spent == 0 and reopened.attempt_counts["lost"] == 2
