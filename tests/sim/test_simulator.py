"""Simulator invariants: budget, regret, stopping record, determinism, output format."""

import gzip
import io
import json
from types import SimpleNamespace

import numpy as np
import pytest

import gittinseval.sim.simulator as simulator_module
from gittinseval import Benchmark, GaussianPrior, GittinsPolicy, Policy, Request, RunResult, simulate
from gittinseval.core.certificate import CertificateSettings, certify, posterior_from_statistics
from gittinseval.core.confidence_stop import ConfidenceStop
from gittinseval.core.posterior import FiniteBenchmarkPosterior
from gittinseval.core.session import RunSettings
from gittinseval.sim.simulator import TRACE_COLUMNS, TRACE_FILE, regret_at
from tests.conftest import binary_benchmark

GAUSSIAN = RunSettings(certificate=CertificateSettings(model="gaussian"))
"""The paper's surrogate as the run's certificate (the default is the empirical-Bayes model)."""


@pytest.fixture(scope="module")
def benchmark():
    return binary_benchmark(30, 64, seed=0, prices=(0.1, 0.5, 2.0))


def run(benchmark, seed=0, costs=None, budget=0.1, **policy_kwargs):
    costs = np.ones(benchmark.n_arms) if costs is None else costs
    policy = GittinsPolicy(**policy_kwargs)
    return simulate(benchmark, policy, costs, GaussianPrior(), budget_fraction=budget, seed=seed)


@pytest.mark.parametrize("cost_aware", [False, True])
def test_budget_is_checked_after_each_batch(benchmark, cost_aware):
    costs = benchmark.prices if cost_aware else np.ones(benchmark.n_arms)
    result = run(benchmark, costs=costs, batch_size=4)
    trace, summary = result.trace, result.summary
    batch_costs = trace["batch_size"] * costs[trace["arm"]]
    np.testing.assert_allclose(trace["cost"], np.cumsum(batch_costs))
    exhaustive = benchmark.n_examples * costs.sum()
    assert summary["exhaustive_cost"] == pytest.approx(exhaustive)
    budget = 0.1 * exhaustive
    assert trace["cost"][-1] >= budget > trace["cost"][-1] - batch_costs[-1]
    np.testing.assert_allclose(trace["cost_pct"], 100 * trace["cost"] / exhaustive)
    assert summary["total_cost"] == pytest.approx(trace["cost"][-1])


def test_regret_is_that_of_the_recommended_row(benchmark):
    result = run(benchmark, batch_size=4)
    means = benchmark.scores.mean(axis=1)
    np.testing.assert_allclose(result.trace["regret"], means.max() - means[result.trace["recommended"]])
    assert result.summary["final_regret"] == result.trace["regret"][-1]


def test_same_seed_same_trace_other_seed_other_trace(benchmark):
    first, again, other = run(benchmark, seed=3), run(benchmark, seed=3), run(benchmark, seed=4)
    for name in TRACE_COLUMNS:
        np.testing.assert_array_equal(first.trace[name], again.trace[name])
    assert not np.array_equal(first.trace["arm"][:50], other.trace["arm"][:50])


def test_run_goes_past_the_stopping_signal_and_records_it(benchmark):
    result = run(benchmark, budget=1.0, batch_size=8, lam=1e-3)
    summary = result.summary
    assert summary["stop_step"] is not None
    assert summary["stop_step"] < summary["n_steps"]
    assert summary["stop_cost_pct"] == result.trace["cost_pct"][summary["stop_step"] - 1]
    # With the full budget every arm is evaluated on every example.
    assert summary["total_cost"] == pytest.approx(summary["exhaustive_cost"])
    assert summary["final_regret"] == 0.0


def clocked(policy, clock):
    """``policy``, each batch it observes moving ``clock`` on by one second."""
    observe = policy.observe

    def observe_and_tick(request, scores):
        observe(request, scores)
        clock[0] += 1.0

    policy.observe = observe_and_tick
    return policy


def test_the_wall_time_at_the_stopping_signal_is_that_of_its_batch(benchmark, monkeypatch):
    """One second a batch: the signal's wall time is its step, the run's its number of steps."""
    clock = [100.0]
    monkeypatch.setattr(simulator_module, "time", SimpleNamespace(perf_counter=lambda: clock[0]))
    summary = simulate(benchmark, clocked(GittinsPolicy(batch_size=8, lam=1e-3), clock), np.ones(benchmark.n_arms),
                       GaussianPrior(), budget_fraction=1.0).summary
    assert summary["stop_step"] < summary["n_steps"]
    assert summary["stop_wall_time_s"] == summary["stop_step"] and summary["wall_time_s"] == summary["n_steps"]
    never = simulate(benchmark, clocked(GittinsPolicy(batch_size=8, lam=1e-9), clock), np.ones(benchmark.n_arms),
                     GaussianPrior(), budget_fraction=0.05).summary
    assert never["stop_step"] is None and never["stop_wall_time_s"] is None


def test_regret_at_takes_the_last_batch_within_the_budget():
    cost_pct = np.array([0.5, 0.9, 1.0, 1.7, 2.4, 6.0])
    regret = np.array([0.5, 0.4, 0.3, 0.2, 0.1, 0.0])
    assert regret_at(cost_pct, regret, 1) == 0.3
    assert regret_at(cost_pct, regret, 2) == 0.2
    assert regret_at(cost_pct, regret, 5) == 0.1
    assert regret_at(cost_pct, regret, 0.1) is None


class Scripted(Policy):
    """Evaluates ``(arm, batch size)`` in the order given and recommends the arms of ``recommended``."""

    name = label = "scripted"

    def __init__(self, batches, recommended):
        self.batches, self.recommended = batches, recommended

    def reset(self, problem, rng):
        self.step, self.taken = 0, np.zeros(problem.n_arms, dtype=int)

    def select(self):
        if self.step == len(self.batches):
            return None
        arm, size = self.batches[self.step]
        self.taken[arm] += size
        return Request(arm, np.arange(self.taken[arm] - size, self.taken[arm]))

    def observe(self, request, scores):
        self.step += 1

    def recommend(self):
        return self.recommended[self.step - 1]


def test_regret_at_a_cost_share_is_read_after_the_last_batch_at_or_below_it():
    # Unit cost, 3 arms x 100 examples: 1 % of the exhaustive cost is 3 cells, 2 % is 6.
    # The batches end at 1, 3 (exactly 1 %), 7 (just past 2 %) and 9 cells (exactly 3 %).
    scores = np.repeat(np.array([[1.0], [0.5], [0.0]]), 100, axis=1)
    bench = Benchmark("boundaries", scores)
    policy = Scripted([(0, 1), (1, 2), (2, 4), (0, 2)], recommended=[2, 1, 2, 0])
    result = simulate(bench, policy, np.ones(3), GaussianPrior(), budget_fraction=0.03)
    np.testing.assert_allclose(result.trace["cost_pct"], [1 / 3, 1.0, 7 / 3, 3.0])
    np.testing.assert_array_equal(result.trace["regret"], [1.0, 0.5, 1.0, 0.0])
    summary = result.summary
    assert summary["regret_at_1pct"] == 0.5  # the batch ending exactly at 1 % counts
    assert summary["regret_at_2pct"] == 0.5  # the batch ending at 2.33 % does not count at 2 %
    assert regret_at(result.trace["cost_pct"], result.trace["regret"], 3) == 0.0
    # Rounding of the running cost sum does not move a batch across the boundary; 1e-7 does.
    assert regret_at(np.array([0.5, 1.0 + 4e-16]), np.array([0.7, 0.2]), 1) == 0.2
    assert regret_at(np.array([0.5, 1.0 + 1e-7]), np.array([0.7, 0.2]), 1) == 0.7


def test_summary_and_trace_round_trip(benchmark, tmp_path):
    result = run(benchmark, batch_size=4)
    result.save(tmp_path)
    header = gzip.decompress((tmp_path / TRACE_FILE).read_bytes()).decode().splitlines()[0]
    assert header == "step,arm,batch_size,cost,cost_pct,recommended,regret"
    summary = json.loads((tmp_path / "summary.json").read_text())
    required = {
        "benchmark", "policy", "seed", "prior_mean", "prior_var", "batch_size", "lam", "kappa",
        "cost_mode", "budget_fraction", "exhaustive_cost", "total_cost", "stop_cost_pct",
        "final_regret", "regret_at_1pct", "regret_at_2pct", "regret_at_5pct", "wall_time_s",
    }
    assert required <= summary.keys()
    loaded = RunResult.load(tmp_path)
    for name in TRACE_COLUMNS:
        np.testing.assert_allclose(loaded.trace[name], result.trace[name], rtol=1e-9)


def test_the_arm_population_is_that_of_the_matrix_row_means(benchmark):
    summary = run(benchmark, batch_size=4).summary
    # Written out as a sum over cells, not through Benchmark.row_means.
    means = [sum(row) / len(row) for row in benchmark.scores.tolist()]
    centre = sum(means) / len(means)
    assert summary["arm_population"]["mean"] == pytest.approx(centre, rel=1e-12)
    spread = sum((m - centre) ** 2 for m in means) / len(means)
    assert summary["arm_population"]["var"] == pytest.approx(spread, rel=1e-9)


def test_the_same_run_saves_the_same_bytes(benchmark, tmp_path):
    run(benchmark, batch_size=4).save(tmp_path / "a")
    run(benchmark, batch_size=4).save(tmp_path / "b")
    assert (tmp_path / "a" / TRACE_FILE).read_bytes() == (tmp_path / "b" / TRACE_FILE).read_bytes()


def test_the_trace_text_is_that_of_np_savetxt(benchmark, tmp_path):
    result = run(benchmark, batch_size=4)
    result.save(tmp_path)
    expected = io.StringIO()
    table = np.column_stack([result.trace[name].astype(np.float64) for name in TRACE_COLUMNS])
    formats = ["%d", "%d", "%d", "%.10g", "%.10g", "%d", "%.10g"]
    np.savetxt(expected, table, delimiter=",", fmt=formats, header=",".join(TRACE_COLUMNS), comments="")
    assert gzip.decompress((tmp_path / TRACE_FILE).read_bytes()).decode() == expected.getvalue()


def test_runs_saved_with_an_uncompressed_trace_still_load(benchmark, tmp_path):
    result = run(benchmark, batch_size=4)
    result.save(tmp_path)
    trace_csv = gzip.decompress((tmp_path / TRACE_FILE).read_bytes())
    (tmp_path / TRACE_FILE).unlink()
    (tmp_path / "trace.csv").write_bytes(trace_csv)
    loaded = RunResult.load(tmp_path)
    np.testing.assert_array_equal(loaded.trace["arm"], result.trace["arm"])
    np.testing.assert_allclose(loaded.trace["regret"], result.trace["regret"], rtol=1e-9)


def test_a_run_without_its_trace_is_a_named_error(benchmark, tmp_path):
    run(benchmark, batch_size=4).save(tmp_path)
    (tmp_path / TRACE_FILE).unlink()
    with pytest.raises(FileNotFoundError, match="no trace.csv.gz"):
        RunResult.load(tmp_path)


class RepeatingPolicy(Policy):
    """A faulty policy that asks for the same cells again."""

    def reset(self, problem, rng):
        pass

    def select(self):
        return Request(0, np.array([0, 1]))

    def observe(self, request, scores):
        pass

    def recommend(self):
        return 0


def test_a_policy_cannot_evaluate_a_cell_twice(benchmark):
    with pytest.raises(ValueError, match="examples of arm 0 twice"):
        simulate(benchmark, RepeatingPolicy(), np.ones(benchmark.n_arms), GaussianPrior())


def test_a_request_cannot_name_one_example_twice(benchmark):
    class Doubling(RepeatingPolicy):
        def select(self):
            return Request(0, np.array([3, 1, 3]))

    with pytest.raises(ValueError, match="examples of arm 0 twice"):
        simulate(benchmark, Doubling(), np.ones(benchmark.n_arms), GaussianPrior())


@pytest.mark.parametrize("budget", [0.0, 1.5, -0.1])
def test_budget_fraction_must_be_in_unit_interval(benchmark, budget):
    with pytest.raises(ValueError, match=r"budget must be a number in \(0, 1\]"):
        run(benchmark, budget=budget)


def test_costs_must_be_positive(benchmark):
    costs = np.ones(benchmark.n_arms)
    costs[4] = 0.0
    with pytest.raises(ValueError, match="costs must be positive and finite; bad arms \\[4\\]"):
        run(benchmark, costs=costs)


def test_a_one_arm_benchmark_is_refused():
    # The live CLI refuses one arm too: one arm is its own recommendation, at zero regret.
    one_arm = Benchmark("mine", np.ones((1, 20)))
    with pytest.raises(ValueError, match="benchmark 'mine' has one arm: there is nothing to compare"):
        run(one_arm)



class RecordingGittins(GittinsPolicy):
    """GittinsEval that keeps every batch it observed, and the sum and count of its scores per arm."""

    def reset(self, problem, rng):
        super().reset(problem, rng)
        self.sums, self.counts, self.batches = np.zeros(problem.n_arms), np.zeros(problem.n_arms, dtype=int), []

    def observe(self, request, scores):
        super().observe(request, scores)
        self.sums[request.arm] += np.sum(scores)
        self.counts[request.arm] += len(scores)
        self.batches.append((request.arm, np.array(scores)))


def test_the_summary_certifies_the_final_recommendation_with_the_run_prior(benchmark):
    policy, prior = RecordingGittins(batch_size=4), GaussianPrior(0.4, 0.02)
    summary = simulate(benchmark, policy, np.ones(benchmark.n_arms), prior, budget_fraction=0.3, seed=1,
                       settings=GAUSSIAN).summary
    arm = summary["final_recommended"]
    expected = certify(posterior_from_statistics(policy.sums, policy.counts, 64, 0.4, 0.02), arm)
    assert summary["certificate"] == {**expected.as_dict(), "true_mean": float(benchmark.row_means[arm])}
    other_prior = certify(posterior_from_statistics(policy.sums, policy.counts, 64, 0.5, 0.04), arm)
    assert {**other_prior.as_dict(), "true_mean": float(benchmark.row_means[arm])} != summary["certificate"]
    assert summary["confidence_stop"] is None


def test_checkpoint_certificates_certify_the_data_up_to_each_reported_share_and_the_stop(benchmark):
    policy, prior = RecordingGittins(batch_size=4, lam=1e-3), GaussianPrior(0.4, 0.02)
    result = simulate(benchmark, policy, np.ones(benchmark.n_arms), prior, budget_fraction=0.3, seed=1,
                      checkpoint_certificates=True, settings=GAUSSIAN)
    summary, trace = result.summary, result.trace
    assert set(summary["certificates"]) == {"1pct", "2pct", "5pct", "10pct", "stop"}
    assert summary["stop_step"] is not None
    positions = {f"{p}pct": np.flatnonzero(trace["cost_pct"] <= p + 1e-9) for p in (1, 2, 5, 10)}
    positions = {name: found[-1] if found.size else None for name, found in positions.items()}
    positions["stop"] = summary["stop_step"] - 1
    for name, position in positions.items():
        # Independently: the sums and counts of the batches the policy observed up to that position.
        sums, counts = np.zeros(benchmark.n_arms), np.zeros(benchmark.n_arms, dtype=int)
        for arm, scores in policy.batches[: position + 1]:
            sums[arm] += scores.sum()
            counts[arm] += scores.size
        arm = trace["recommended"][position]
        expected = certify(posterior_from_statistics(sums, counts, 64, 0.4, 0.02), arm).as_dict()
        true_mean = float(benchmark.row_means[arm])
        regret = float(benchmark.row_means.max() - true_mean)
        assert summary["certificates"][name] == {**expected, "true_mean": true_mean, "regret": regret}
    # Without the flag the summary has no checkpoints, and the final certificate is the same.
    plain = simulate(benchmark, GittinsPolicy(batch_size=4, lam=1e-3), np.ones(benchmark.n_arms), prior,
                     budget_fraction=0.3, seed=1, settings=GAUSSIAN)
    assert "certificates" not in plain.summary and plain.summary["certificate"] == summary["certificate"]


class RequestRecordingGittins(GittinsPolicy):
    """GittinsEval that keeps every request it observed (arm and example ids)."""

    def reset(self, problem, rng):
        super().reset(problem, rng)
        self.requests = []

    def observe(self, request, scores):
        super().observe(request, scores)
        self.requests.append((request.arm, np.array(request.examples)))


def test_arm_spend_is_what_each_arm_was_charged_up_to_each_reported_share(benchmark):
    rng = np.random.default_rng(5)
    cell_costs = benchmark.prices[:, None] * rng.uniform(0.2, 1.8, size=benchmark.scores.shape)
    cell_costs *= (benchmark.n_examples * benchmark.prices / cell_costs.sum(axis=1))[:, None]
    policy = RequestRecordingGittins(batch_size=4, lam=1e-4)
    result = simulate(benchmark, policy, benchmark.prices, GaussianPrior(), budget_fraction=0.12, seed=2,
                      cell_costs=cell_costs, record_arm_spend=True)
    exhaustive = benchmark.n_examples * benchmark.prices.sum()
    # Brute force: walk the requests, charging each cell its own cost, and close each share's
    # account after the last batch whose cumulative cost is at most that share.
    expected = {}
    spent, by_arm = 0.0, np.zeros(benchmark.n_arms)
    for arm, examples in policy.requests:
        batch = sum(cell_costs[arm, j] for j in examples)
        for percent in (1, 2, 5, 10):
            if 100 * (spent + batch) / exhaustive > percent + 1e-9 and percent not in expected:
                expected[percent] = by_arm.copy()
        spent += batch
        by_arm[arm] += batch
    assert sorted(expected) == [1, 2, 5, 10]  # the run goes past 10 %, so every share closed
    for percent, spend in expected.items():
        np.testing.assert_allclose(result.summary["arm_spend"][f"{percent}pct"], spend, rtol=1e-12, atol=1e-15)
    assert len(result.summary["arm_spend"]["10pct"]) == benchmark.n_arms
    # Each arm's price is recorded beside its spend, whatever the costs charged.
    assert result.summary["arm_prices"] == benchmark.prices.tolist()
    without = simulate(benchmark, GittinsPolicy(batch_size=4, lam=1e-4), benchmark.prices, GaussianPrior(),
                       budget_fraction=0.12, seed=2, cell_costs=cell_costs)
    assert "arm_spend" not in without.summary
    np.testing.assert_array_equal(without.trace["arm"], result.trace["arm"])


def test_the_certificate_takes_its_settings_and_a_complete_arm_is_known_exactly():
    bench = binary_benchmark(6, 40, seed=2)
    settings = CertificateSettings(level=0.8, eps=0.05, samples=512, model="gaussian")
    result = simulate(bench, GittinsPolicy(batch_size=8), np.ones(6), GaussianPrior(), budget_fraction=1.0,
                      settings=RunSettings(certificate=settings))
    cert = result.summary["certificate"]
    assert (cert["level"], cert["eps"], cert["n_samples"]) == (0.8, 0.05, 512)
    # A full budget sees every cell: the recommended arm's mean is known, its interval the point.
    assert cert["lower"] == cert["upper"] == cert["mean"] == pytest.approx(cert["true_mean"])


def test_the_run_goes_past_the_confidence_stop_and_records_where_it_fired(benchmark):
    stop = ConfidenceStop(prob_eps_best=0.6, eps=0.05)
    policy = RecordingGittins(batch_size=4)
    result = simulate(benchmark, policy, np.ones(benchmark.n_arms), GaussianPrior(), budget_fraction=0.5,
                      settings=RunSettings(stop_when=stop, certificate=GAUSSIAN.certificate))
    record, trace = result.summary["confidence_stop"], result.trace
    step = record["step"]
    assert step is not None and step < result.summary["n_steps"]
    assert (record["prob_eps_best"], record["eps"]) == (0.6, 0.05)
    assert record["cost_pct"] == trace["cost_pct"][step - 1] and record["regret"] == trace["regret"][step - 1]
    assert record["cost"] == trace["cost"][step - 1]
    # The run ends at the budget regardless, with the trace of a run without the stop.
    plain = simulate(benchmark, GittinsPolicy(batch_size=4), np.ones(benchmark.n_arms), GaussianPrior(),
                     budget_fraction=0.5)
    np.testing.assert_array_equal(plain.trace["arm"], trace["arm"])
    # Independently: the stop is first reached at that step, on the posterior of the batches up to it.
    posterior = FiniteBenchmarkPosterior(benchmark.n_arms, 64, 0.5, 0.04, 0.25)
    first = None
    for i, (arm, scores) in enumerate(policy.batches):
        posterior.update(arm, scores)
        if stop.reached(posterior, trace["recommended"][i]):
            first = i + 1
            break
    assert first == step


@pytest.fixture(scope="module")
def priced_example():
    """The bundled 8 x 200 example: accuracies 0.365-0.800 at 0.15, 0.60, 2.50 and 10.00 USD per 1M tokens."""
    from gittinseval.data import load_matrix
    from gittinseval.data._files import data_file

    return load_matrix(data_file("examples/scores.csv"), costs=data_file("examples/prices.csv"))


def test_the_default_objective_is_the_run_of_today(benchmark):
    from gittinseval.core.objective import Objective

    before = run(benchmark, batch_size=4)
    policy = GittinsPolicy(batch_size=4)
    after = simulate(benchmark, policy, np.ones(benchmark.n_arms), GaussianPrior(),
                     settings=RunSettings(objective=Objective()))
    for name in TRACE_COLUMNS:
        assert np.array_equal(before.trace[name], after.trace[name]), name
    assert "objective" not in after.summary


def test_value_recommends_for_a_policy_that_ignores_offsets_from_the_posterior(priced_example):
    from gittinseval.baselines.uniform import UniformPolicy
    from gittinseval.core.certificate import posterior_from_statistics
    from gittinseval.core.objective import Objective

    objective = Objective("value", mu=0.05)
    offsets = -0.05 * priced_example.prices
    prior = GaussianPrior()
    result = simulate(priced_example, UniformPolicy(batch_size=8), priced_example.prices, prior,
                      budget_fraction=1.0, settings=RunSettings(objective=objective))
    trace = result.trace
    # Replay the trace's cells: the recommendation after each batch is the value LCB's argmax.
    scores, order = priced_example.scores, UniformPolicy(batch_size=8)
    order.reset(_problem_of(priced_example), np.random.default_rng(0))
    score_sum, n_seen = np.zeros(8), np.zeros(8, dtype=np.int64)
    for step, arm in enumerate(trace["arm"]):
        request = order.select()
        assert request.arm == arm
        order.observe(request, scores[arm, request.examples])
        score_sum[arm] += scores[arm, request.examples].sum()
        n_seen[arm] += request.size
        posterior = posterior_from_statistics(score_sum, n_seen, 200, prior.mean, prior.var)
        assert trace["recommended"][step] == np.argmax(posterior.mean + offsets - np.sqrt(posterior.variance))
    values = priced_example.row_means + offsets
    np.testing.assert_allclose(trace["regret"], values.max() - values[trace["recommended"]])
    assert result.summary["final_recommended"] == 5 and result.summary["final_regret"] == 0


def _problem_of(benchmark):
    from gittinseval.core.protocol import EvaluationProblem

    return EvaluationProblem(n_examples=benchmark.n_examples, costs=benchmark.prices, budget=1.0, binary=True)


@pytest.mark.parametrize(("eps", "budget", "expected", "qualified"), [(0.05, 1.0, 5, True), (0.01, 1.0, 7, True),
                                                                       (0.05, 0.02, None, False)])
def test_cheapest_within_recommends_the_cheapest_near_best_arm(priced_example, eps, budget, expected, qualified):
    from gittinseval.core.objective import Objective

    settings = dict(budget_fraction=budget, seed=1)
    policy = GittinsPolicy(batch_size=8)
    accuracy = simulate(priced_example, policy, priced_example.prices, GaussianPrior(), **settings)
    result = simulate(priced_example, policy, priced_example.prices, GaussianPrior(),
                      settings=RunSettings(objective=Objective("cheapest_within", eps=eps, delta=0.05)), **settings)
    assert result.summary["objective"] == {"name": "cheapest_within", "eps": eps, "delta": 0.05,
                                           "qualified": qualified}
    # At the full budget every mean is known: large/steps (0.755) is within 0.05 of xlarge/steps (0.800), 4x cheaper.
    # Early on no arm qualifies, and the recommendation is the accuracy one.
    wanted = accuracy.summary["final_recommended"] if expected is None else expected
    assert result.summary["final_recommended"] == wanted
    assert np.array_equal(result.trace["arm"], accuracy.trace["arm"])


def test_under_value_the_certificate_is_of_the_value_the_run_recommends_by(priced_example):
    from gittinseval.core.objective import Objective, shifted_posterior

    objective = Objective(name="value", mu=0.05)
    policy = RecordingGittins(batch_size=4)
    summary = simulate(priced_example, policy, priced_example.prices, GaussianPrior(), budget_fraction=0.2,
                       settings=RunSettings(objective=objective)).summary
    arm, offsets = summary["final_recommended"], objective.offsets(priced_example.prices, priced_example.n_arms)
    accuracy = posterior_from_statistics(policy.sums, policy.counts, priced_example.n_examples, 0.5, 0.04)
    # Under value the certificate is the gaussian one, whatever certificate.model says: only it shifts.
    expected = certify(shifted_posterior(accuracy, offsets), arm)
    true_value = float(priced_example.row_means[arm] + offsets[arm])
    assert summary["certificate"] == {**expected.as_dict(), "true_mean": true_value}
    assert summary["certificate"]["mean"] == pytest.approx(accuracy.mean[arm] + offsets[arm])
