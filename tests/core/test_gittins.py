"""GittinsPolicy against a from-scratch replay of Algorithm 1."""

from pathlib import Path

import numpy as np
import pytest
from hydra import compose, initialize_config_dir
from hydra.utils import instantiate

from gittinseval import (
    EmpiricalPriorEstimator,
    EvaluationProblem,
    FiniteBenchmarkPosterior,
    GittinsPolicy,
    Request,
    root_schedule,
)
from gittinseval.cli.configs import CONFIG_DIR
from gittinseval.core.protocol import Policy, argmax_by_priority
from gittinseval.core.roots import interpolated_root_schedule
from gittinseval.sim.simulator import simulate


def make_problem(costs, n_examples, budget=None, prior_mean=0.5, prior_var=0.04):
    costs = np.asarray(costs, dtype=float)
    budget = n_examples * costs.sum() if budget is None else budget
    return EvaluationProblem(n_examples, costs, budget, prior_mean, prior_var, binary=False)


def reference_replay(scores, costs, policy, prior_mean, prior_var, batch, lam, kappa, cell_var=0.25):
    """Algorithm 1 recomputed from scratch after every batch (no incremental state).

    Uses the policy's own example order and tie-break priority, which are random
    draws of the run, and returns (arms, recommendations, first stop step).
    """
    n_arms, n_examples = scores.shape
    roots = {c: np.append(root_schedule(n_examples, batch, prior_var, lam * c, cell_var), 0.0) for c in set(costs)}
    n_seen = np.zeros(n_arms, dtype=int)
    arms, recommendations, stop = [], [], None
    order = policy.order.order
    priority = policy.priority
    while True:
        # Moments from the observed cells only (eq. finite-posterior-moments).
        means, variances, index = np.empty(n_arms), np.empty(n_arms), np.empty(n_arms)
        for k in range(n_arms):
            observed = scores[k, order[k, : n_seen[k]]]
            latent_var = 1 / (1 / prior_var + n_seen[k] / cell_var)
            latent_mean = latent_var * (prior_mean / prior_var + observed.sum() / cell_var)
            unseen = n_examples - n_seen[k]
            means[k] = (observed.sum() + unseen * latent_mean) / n_examples
            variances[k] = (unseen**2 * latent_var + unseen * cell_var) / n_examples**2
            stage = -(-n_seen[k] // batch)
            index[k] = means[k] - roots[costs[k]][stage]
        if arms:
            recommendations.append(argmax_by_priority(means - kappa * np.sqrt(variances), priority))
            done = n_seen == n_examples
            if stop is None and index[done].max(initial=-np.inf) >= index[~done].max(initial=-np.inf):
                stop = len(arms)
        if (n_seen == n_examples).all():
            break
        arm = argmax_by_priority(np.where(n_seen < n_examples, index, -np.inf), priority)
        arms.append(arm)
        n_seen[arm] += min(batch, n_examples - n_seen[arm])
    return arms, recommendations, stop


def run_policy(policy, scores, problem, seed):
    policy.reset(problem, np.random.default_rng(seed))
    arms, recommendations, stop = [], [], None
    while (request := policy.select()) is not None:
        policy.observe(request, scores[request.arm, request.examples])
        arms.append(request.arm)
        recommendations.append(policy.recommend())
        if stop is None and policy.stop_signal:
            stop = len(arms)
    return arms, recommendations, stop


@pytest.mark.parametrize("seed", [0, 1, 2])
@pytest.mark.parametrize("kappa", [0.0, 1.0])
def test_policy_matches_from_scratch_replay(seed, kappa):
    rng = np.random.default_rng(100 + seed)
    n_arms, n_examples, batch = 7, 23, 5  # partial last batch of 3
    scores = rng.beta(0.6, 0.6, size=(n_arms, n_examples)) * rng.uniform(0.5, 1, size=(n_arms, 1))
    costs = np.array([1.0, 2.0, 1.0, 0.5, 2.0, 0.5, 1.0])
    problem = make_problem(costs, n_examples, prior_mean=0.45, prior_var=0.03)
    policy = GittinsPolicy(batch_size=batch, lam=3e-3, kappa=kappa)
    arms, recommendations, stop = run_policy(policy, scores, problem, seed)
    ref_arms, ref_recommendations, ref_stop = reference_replay(
        scores, costs, policy, 0.45, 0.03, batch, 3e-3, kappa
    )
    assert arms == ref_arms
    assert recommendations == ref_recommendations
    assert stop == ref_stop
    assert stop is not None and stop < len(arms)  # the signal fires before the end
    assert len(arms) == n_arms * 5  # every arm completed in H = 5 batches
    # A completed arm's index is its full-row mean.
    np.testing.assert_allclose(policy.index, scores.mean(axis=1), atol=1e-12)


def test_stop_signal_fires_when_a_completed_arm_leads():
    scores = np.array([[1.0, 1.0, 1.0, 1.0], [0.0, 0.0, 0.0, 0.0], [0.5, 0.5, 0.5, 0.5]])
    policy = GittinsPolicy(batch_size=4, lam=0.1)
    problem = make_problem([1.0, 1.0, 1.0], 4)
    policy.reset(problem, np.random.default_rng(0))
    # Unfinished index: M - r_0 with r_0 > 0 at this cost; a completed arm at 1.0 leads.
    assert policy.roots[0, 0] > 0
    fired_after = None
    while (request := policy.select()) is not None:
        policy.observe(request, scores[request.arm, request.examples])
        if policy.stop_signal and fired_after is None:
            fired_after = request.arm
    assert fired_after == 0


def test_kappa_changes_recommendation_not_trajectory():
    rng = np.random.default_rng(5)
    scores = rng.uniform(size=(20, 40))
    problem = make_problem(np.ones(20), 40, budget=200)
    lcb = run_policy(GittinsPolicy(batch_size=4, kappa=1.0), scores, problem, 3)
    mean = run_policy(GittinsPolicy(batch_size=4, kappa=0.0), scores, problem, 3)
    assert lcb[0] == mean[0] and lcb[2] == mean[2]


def test_ties_are_broken_by_a_per_run_random_priority():
    problem = make_problem(np.ones(50), 10)
    firsts = set()
    for seed in range(10):
        policy = GittinsPolicy(batch_size=2)
        policy.reset(problem, np.random.default_rng(seed))
        firsts.add(policy.select().arm)
        assert policy.recommend() == int(np.argmin(policy.priority))
    assert len(firsts) > 5


def test_examples_are_distinct_per_arm_and_orders_differ_between_arms():
    problem = make_problem(np.ones(3), 12)
    policy = GittinsPolicy(batch_size=5)
    policy.reset(problem, np.random.default_rng(0))
    seen = {k: [] for k in range(3)}
    while (request := policy.select()) is not None:
        seen[request.arm].extend(request.examples.tolist())
        policy.observe(request, np.full(request.size, 0.5))
    for examples in seen.values():
        assert sorted(examples) == list(range(12))
    assert len({tuple(v) for v in seen.values()}) == 3


@pytest.mark.parametrize(
    "kwargs, message",
    [
        ({"batch_size": 0}, "batch_size"),
        ({"batch_size": 2.5}, "batch_size"),
        ({"lam": 0.0}, "lam must be positive"),
        ({"cell_var": -0.25}, "cell_var must be positive"),
        ({"kappa": float("inf")}, "kappa must be finite"),
        ({"kappa": -0.5}, "kappa must be finite and >= 0"),
    ],
)
def test_bad_hyperparameters(kwargs, message):
    with pytest.raises(ValueError, match=message):
        GittinsPolicy(**kwargs)


def test_batch_larger_than_benchmark_is_rejected():
    with pytest.raises(ValueError, match="batch_size \\(16\\) is larger than the number of examples N = 10"):
        GittinsPolicy(batch_size=16).reset(make_problem([1.0], 10), np.random.default_rng(0))


def test_request_is_a_plain_value():
    request = Request(3, np.array([1, 2]))
    assert request.size == 2 and request.arm == 3


def test_kappa_flips_the_recommendation_on_a_built_case():
    # Arm 0: 40 of 100 examples seen, mean 0.6 (certain); arm 1: 2 seen, both 1 (uncertain).
    # Textbook moments (prior N(0.5, 0.04), tau^2 = 1/4) put arm 1 ahead in posterior mean
    # and arm 0 ahead in M - sqrt(V).
    n_examples, prior_mean, prior_var, cell_var = 100, 0.5, 0.04, 0.25
    observed = {0: np.array([1.0] * 24 + [0.0] * 16), 1: np.array([1.0, 1.0])}

    def moments(scores):
        n = scores.size
        latent_var = 1 / (1 / prior_var + n / cell_var)
        latent_mean = latent_var * (prior_mean / prior_var + scores.sum() / cell_var)
        mean = (scores.sum() + (n_examples - n) * latent_mean) / n_examples
        var = ((n_examples - n) ** 2 * latent_var + (n_examples - n) * cell_var) / n_examples**2
        return mean, var

    (m0, v0), (m1, v1) = moments(observed[0]), moments(observed[1])
    assert m1 > m0 and m0 - np.sqrt(v0) > m1 - np.sqrt(v1)
    for kappa, expected in ((0.0, 1), (1.0, 0)):
        policy = GittinsPolicy(batch_size=2, kappa=kappa)
        policy.reset(make_problem([1.0, 1.0], n_examples), np.random.default_rng(0))
        for arm, scores in observed.items():
            for start in range(0, scores.size, 2):
                policy.observe(Request(arm, np.arange(start, start + 2)), scores[start : start + 2])
        assert policy.recommend() == expected


@pytest.mark.parametrize("completed_below", [False, True])
def test_stopping_signal_fires_on_an_exact_tie_with_the_best_open_arm(completed_below):
    # N = B = 2: one batch completes an arm, whose index is then its row mean.  The
    # open arm's index is M_0 - r_0 (M_0 its posterior mean before any score); the
    # completed arm is given exactly that mean, or the next float below it.
    lam = 0.1
    root = root_schedule(2, 2, 0.04, lam)[0]
    tie = FiniteBenchmarkPosterior(1, 2, 0.5, 0.04).mean[0] - root
    assert 0 < tie < 1
    mean = np.nextafter(tie, -np.inf) if completed_below else tie
    policy = GittinsPolicy(batch_size=2, lam=lam)
    policy.reset(make_problem([1.0, 1.0], 2), np.random.default_rng(0))
    policy.observe(Request(0, np.array([0, 1])), np.array([mean, mean]))
    assert policy.stop_signal is (not completed_below)


def run_eb_checking_each_refit(policy, scores, problem, seed):
    """Run GittinsEval-EB; after every batch recompute its prior, posterior, roots and indices from scratch."""
    n_arms, n_examples = scores.shape
    estimator = policy.prior_estimator
    policy.reset(problem, np.random.default_rng(seed))
    fits = 0
    while (request := policy.select()) is not None:
        policy.observe(request, scores[request.arm, request.examples])
        seen = policy.posterior.n_seen
        sums = np.array([scores[k, policy.order.order[k, : seen[k]]].sum() for k in range(n_arms)])
        if policy.n_prior_fits > fits:
            fits = policy.n_prior_fits
            mean, var = estimator.estimate(sums, seen, problem.prior_mean, problem.prior_var)
            assert (policy.prior_mean, policy.prior_var_estimate) == (mean, var)
            assert abs(np.log(policy.prior_var / var)) <= estimator.tolerance
        # The tables in use are root_schedule's at the v0 in use.
        batch, costs = policy.resolved_batch_size, policy.lam * np.unique(problem.costs)
        expected_roots = root_schedule(n_examples, batch, policy.prior_var, costs)
        np.testing.assert_array_equal(policy.roots[:, :-1], expected_roots)
        expected_roots = np.pad(expected_roots, ((0, 0), (0, 1)))  # a completed arm's root is 0
        # Posterior from the sufficient statistics under N(mu0, v0), as in reference_replay.
        latent_var = 1 / (1 / policy.prior_var + seen / 0.25)
        latent_mean = latent_var * (policy.prior_mean / policy.prior_var + sums / 0.25)
        unseen = n_examples - seen
        means = (sums + unseen * latent_mean) / n_examples
        variances = (unseen**2 * latent_var + unseen * 0.25) / n_examples**2
        index = means - expected_roots[policy.arm_table, -(-seen // batch)]
        recommend_score = means - policy.kappa * np.sqrt(variances)
        np.testing.assert_allclose(policy.index, index, rtol=0, atol=1e-12)
        np.testing.assert_allclose(policy.recommend_score, recommend_score, rtol=0, atol=1e-12)
        done = seen == n_examples
        open_best, done_best = index[~done].max(initial=-np.inf), index[done].max(initial=-np.inf)
        if done_best >= open_best + 1e-12:
            assert policy.stop_signal
    return policy


def test_empirical_prior_refits_use_root_schedule_at_the_new_variance():
    """Arms near 0.3 with sd 0.05: v0 falls from 0.04, so the tables are refreshed several times."""
    rng = np.random.default_rng(11)
    n_arms, n_examples = 40, 30
    quality = rng.normal(0.3, 0.05, n_arms)
    scores = (rng.uniform(size=(n_arms, n_examples)) < quality[:, None]).astype(float)
    costs = np.where(np.arange(n_arms) % 2, 1.0, 3.0)
    estimator = EmpiricalPriorEstimator(tolerance=0.2, refit_growth=0.1)
    policy = GittinsPolicy(batch_size=4, lam=1e-3, prior_estimator=estimator)
    problem = make_problem(costs, n_examples, budget=0.3 * n_examples * costs.sum())
    run_eb_checking_each_refit(policy, scores, problem, seed=0)
    diagnostics = policy.diagnostics()
    assert diagnostics["table_refreshes"] >= 3
    assert diagnostics["tables_computed"] <= diagnostics["table_refreshes"] + 1
    assert diagnostics["final_prior_var"] < 0.02
    assert 0.2 < diagnostics["final_prior_mean"] < 0.4


def test_empirical_prior_same_seed_same_trace():
    rng = np.random.default_rng(4)
    scores = (rng.uniform(size=(30, 24)) < rng.uniform(0.2, 0.5, (30, 1))).astype(float)
    problem = make_problem(np.ones(30), 24, budget=300)

    def trace(seed):
        policy = GittinsPolicy(batch_size=4, prior_estimator=EmpiricalPriorEstimator())
        return run_policy(policy, scores, problem, seed), policy.diagnostics()

    assert trace(3) == trace(3)
    assert trace(3)[0] != trace(4)[0]


@pytest.mark.parametrize("value", [1.0, 0.0, 0.5])
@pytest.mark.parametrize("prior_arms", [0.0, 5.0])
def test_empirical_prior_on_arms_that_all_score_the_same(value, prior_arms):
    """Zero between-arm variance: no NaN; without shrinkage v0 goes to the floor's grid point.

    The target is the empirical mean, whose unseen cells keep their working
    variance 1/4 however small v0 is, so the signal need not fire before the end.
    """
    n_arms, n_examples = 12, 16
    scores = np.full((n_arms, n_examples), value)
    estimator = EmpiricalPriorEstimator(var_floor=1e-4, prior_arms=prior_arms, refit_growth=0.0)
    policy = GittinsPolicy(batch_size=4, lam=1e-3, prior_estimator=estimator)
    problem = make_problem(np.ones(n_arms), n_examples)
    arms, recommendations, stop = run_policy(policy, scores, problem, seed=0)
    assert all(np.isfinite(a).all() for a in (policy.index, policy.recommend_score, policy.posterior.mean))
    diagnostics = policy.diagnostics()
    if prior_arms == 0:
        assert diagnostics["final_prior_var"] == estimator.grid_var(estimator.grid_index(1e-4, 0.04), 0.04)
        assert diagnostics["final_prior_mean"] == pytest.approx(value, abs=1e-9)
    else:  # the starting prior N(0.5, 0.04) still counts as 5 arms against 12
        assert min(value, 0.5) <= diagnostics["final_prior_mean"] <= max(value, 0.5)
    # Same stopping rule: it fires no later than with the fixed general prior.
    fixed_stop = run_policy(GittinsPolicy(batch_size=4, lam=1e-3), scores, problem, seed=0)[2]
    assert stop is not None and stop <= fixed_stop
    assert len(arms) == n_arms * 4 and len(recommendations) == len(arms)


def test_empirical_prior_label_hyperparameters_and_diagnostics():
    policy = GittinsPolicy(prior_estimator=EmpiricalPriorEstimator(tolerance=0.3))
    assert policy.display_label("empirical") == policy.display_label() == "GittinsEval-EB"
    assert GittinsPolicy().display_label("general") == "GittinsEval-G"
    assert policy.hyperparameters()["prior_estimator"] == {
        "_target_": "gittinseval.core.empirical_prior.EmpiricalPriorEstimator",
        "var_floor": 1e-4, "tolerance": 0.3, "prior_arms": 5.0, "refit_growth": 0.05,
    }
    fixed = GittinsPolicy(batch_size=2)
    fixed.reset(make_problem([1.0, 1.0], 4), np.random.default_rng(0))
    assert fixed.diagnostics() == {} and fixed.hyperparameters()["prior_estimator"] is None


# Traces recorded with the paper's simulated settings (plain-grid roots, 1 % budget): the
# busy-arm protocol, lambda's live units and later refactors must not move them.  A trace
# is compared step by step, not by a digest: the root tables come from ``torch.fft``, whose
# last bits differ between CPUs, and a relative change of 1e-15 in the roots flips the
# order of two arms whose indices tie to within rounding.  Such a step may go either way,
# and the replay then follows the recorded arm; any other difference fails.
PAPER_TRACES = Path(__file__).parents[1] / "fixtures" / "paper_traces.npz"
PAPER_SETTINGS = {"default": [], "unit": ["cost=unit"], "main": ["experiment=main", "prior=general", "seed=3"]}
TIE_TOLERANCE = 1e-9  # absolute, in score units; the indices are O(0.1-1)


class RecordedTraceFollower(Policy):
    """Runs ``inner`` (a GittinsPolicy) along a recorded trace of arms and recommendations.

    Where ``inner`` selects or recommends another arm than the recording, the two arms'
    indices (recommendation scores) must tie to within ``TIE_TOLERANCE``; the request is
    then taken back and the recorded arm selected instead (every other open arm busy).
    ``largest_gap`` is the largest such difference met.
    """

    name, label, concurrent = "gittins", "GittinsEval", True

    def __init__(self, inner: GittinsPolicy, arms: np.ndarray, recommended: np.ndarray):
        self.inner, self.arms, self.recommended = inner, arms, recommended
        self.largest_gap = 0.0
        self.ties_followed = 0

    def reset(self, problem, rng):
        self.inner.reset(problem, rng)
        self.step = 0

    def _tie(self, values: np.ndarray, chosen: int, recorded: int, what: str) -> None:
        self.ties_followed += 1
        gap = abs(float(values[chosen]) - float(values[recorded]))
        assert gap <= TIE_TOLERANCE, (
            f"step {self.step + 1}: {what} arm {chosen}, recorded arm {recorded}, {what} values differ by {gap:.3g}"
        )
        self.largest_gap = max(self.largest_gap, gap)

    def select(self, busy=frozenset()):
        assert self.step < len(self.arms), "the run is longer than the recorded trace"
        request, recorded = self.inner.select(), int(self.arms[self.step])
        if request.arm != recorded:
            self._tie(self.inner.open_index, request.arm, recorded, "selected")
            self.inner.cancel(request)
            request = self.inner.select(frozenset(range(self.inner.problem.n_arms)) - {recorded})
            assert request is not None and request.arm == recorded, f"step {self.step + 1}: arm {recorded} not open"
        return request

    def observe(self, request, scores):
        self.inner.observe(request, scores)

    def recommend(self):
        chosen, recorded = self.inner.recommend(), int(self.recommended[self.step])
        if chosen != recorded:
            self._tie(self.inner.recommend_score, chosen, recorded, "recommended")
        self.step += 1
        return recorded

    @property
    def stop_signal(self):
        return self.inner.stop_signal


def run_paper_setting(overrides: list[str], policy_for=lambda policy: policy, **changes):
    with initialize_config_dir(config_dir=str(CONFIG_DIR), version_base="1.3"):
        cfg = compose(config_name="config", overrides=[*overrides, "logger=none", "policy.refine_roots=false"])
    assert cfg.policy.lam == 1e-4
    cfg.policy.update(changes)
    bench = instantiate(cfg.benchmark)
    prior = instantiate(cfg.prior).resolve(bench)
    policy = policy_for(instantiate(cfg.policy))
    result = simulate(bench, policy, instantiate(cfg.cost)(bench), prior, budget_fraction=0.01, seed=int(cfg.seed))
    return result, policy


@pytest.mark.parametrize("setting", sorted(PAPER_SETTINGS))
def test_the_paper_settings_reproduce_their_recorded_traces(setting):
    """Default ``gittinseval``, ``cost=unit`` and ``experiment=main`` at 1% budget, lambda = 1e-4."""
    recorded = np.load(PAPER_TRACES)[setting]
    result, follower = run_paper_setting(
        PAPER_SETTINGS[setting], lambda policy: RecordedTraceFollower(policy, *recorded)
    )
    assert len(result.trace["arm"]) == len(recorded[0])
    assert follower.largest_gap <= TIE_TOLERANCE
    # Ties within rounding are rare (none on the machine that recorded the traces); a change
    # that brings many steps to the edge of a tie is no rounding difference either.
    assert follower.ties_followed <= len(recorded[0]) // 100


def test_the_recorded_trace_check_fails_on_a_real_change():
    """A 1 % change of lambda is no rounding difference: the replay must stop at a step that is not a tie."""
    recorded = np.load(PAPER_TRACES)["default"]
    with pytest.raises(AssertionError, match="differ by"):
        run_paper_setting([], lambda policy: RecordedTraceFollower(policy, *recorded), lam=1.01e-4)


def stage_tolerance(policy, arms):
    """``[len(arms)]`` the roots' own accuracy at each arm's current stage: 1e-6 or 1 % of its stage cost."""
    post = policy.posterior
    stage_size = np.minimum(policy.resolved_batch_size, policy.problem.n_examples - post.n_seen[arms])
    return np.maximum(1e-6, 0.01 * policy.lam * policy.arm_costs[arms] * stage_size)


def test_a_cost_refresh_gives_the_index_computed_from_scratch_at_the_new_costs():
    """After update_costs the index of every arm is that of a policy reset with the new costs and fed the same
    batches, within the roots' own accuracy (1e-6 or 1 % of the stage cost); unchanged arms keep theirs exactly."""
    rng = np.random.default_rng(5)
    n_examples, costs = 60, np.array([1.0, 2.0, 3.0, 2.0])
    scores = (rng.uniform(size=(4, n_examples)) < np.array([[0.4], [0.5], [0.6], [0.55]])).astype(float)
    policy = GittinsPolicy(batch_size=4, lam=1e-3)
    policy.reset(make_problem(costs, n_examples), np.random.default_rng(0))
    for _ in range(7):
        request = policy.select()
        policy.observe(request, scores[request.arm, request.examples])
    before = policy.index.copy()
    new_costs = np.array([1.0, 7.3, 0.4, 2.0])
    policy.update_costs(new_costs)

    fresh = GittinsPolicy(batch_size=4, lam=1e-3)
    fresh.reset(make_problem(new_costs, n_examples), np.random.default_rng(0))
    for arm in range(4):
        seen = policy.order.order[arm, : policy.posterior.n_seen[arm]]
        for batch in np.split(seen, np.arange(4, seen.size, 4)):
            if batch.size:
                fresh.observe(Request(arm, batch), scores[arm, batch])
    changed = np.array([1, 2])
    assert np.all(np.abs(policy.index[changed] - fresh.index[changed]) <= stage_tolerance(policy, changed))
    assert not np.allclose(policy.index[changed], before[changed], atol=1e-4)  # the refresh mattered
    assert policy.index[0] == before[0] and policy.index[3] == before[3]
    np.testing.assert_array_equal(policy.arm_table[[0, 3]] < policy.distinct_costs.size, True)
    assert policy.select().arm == argmax_by_priority(policy.open_index, policy.priority)


def test_learned_roots_follow_the_empirical_prior_to_its_new_tables():
    """With GittinsEval-EB, a table switch recomputes the learned arms' roots at the new prior variance."""
    n_arms, n_examples = 12, 16
    estimator = EmpiricalPriorEstimator(var_floor=1e-4, prior_arms=0.0, refit_growth=0.0)
    policy = GittinsPolicy(batch_size=4, lam=1e-3, prior_estimator=estimator)
    policy.reset(make_problem(np.ones(n_arms), n_examples), np.random.default_rng(0))
    learned = np.array([2, 5])
    policy.update_costs(np.where(np.isin(np.arange(n_arms), learned), 4.0, 1.0))
    prior_var = policy.prior_var
    while policy.n_table_refreshes == 0:
        request = policy.select()
        policy.observe(request, np.full(request.size, 0.5))
    assert policy.prior_var < prior_var
    expected = interpolated_root_schedule(n_examples, 4, policy.prior_var, np.array([4e-3, 4e-3]))
    np.testing.assert_array_equal(policy.roots[policy.arm_table[learned], :-1], expected)
    exact = root_schedule(n_examples, 4, policy.prior_var, 1e-3)
    np.testing.assert_array_equal(policy.roots[policy.arm_table[0], :-1], exact)


def test_update_costs_refuses_costs_that_are_not_one_positive_cost_per_arm():
    policy = GittinsPolicy(batch_size=4)
    policy.reset(make_problem([1.0, 2.0], 8), np.random.default_rng(0))
    with pytest.raises(ValueError, match="3 costs for 2 arms"):
        policy.update_costs(np.ones(3))
    with pytest.raises(ValueError, match="costs"):
        policy.update_costs(np.array([1.0, 0.0]))
