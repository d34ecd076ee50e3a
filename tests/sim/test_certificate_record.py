"""The certificates of several posterior models stated side by side from one simulated run
(gittinseval.sim.certificate_record), checked against an independent replay of the run."""

import numpy as np
import pytest

from gittinseval import GaussianPrior, GittinsPolicy, simulate
from gittinseval.core.certificate import CertificateSettings, certify, posterior_from_statistics
from gittinseval.core.certificate_models import EmpiricalBayesModel
from gittinseval.core.confidence_stop import ConfidenceStop
from gittinseval.core.observations import ObservedCells
from gittinseval.core.session import RunSettings
from gittinseval.sim.simulator import REPORT_PERCENTS
from tests.conftest import binary_benchmark
from tests.sim.test_simulator import RecordingGittins

STOP = ConfidenceStop(prob_eps_best=0.8, eps=0.05)


@pytest.fixture(scope="module")
def benchmark():
    return binary_benchmark(12, 64, seed=2)


@pytest.fixture(scope="module")
def compared(benchmark):
    policy = RecordingGittins(batch_size=4)
    settings = RunSettings(certificate=CertificateSettings(model="gaussian", anytime=True, delta=0.2), stop_when=STOP)
    result = simulate(
        benchmark, policy, np.ones(benchmark.n_arms), GaussianPrior(), budget_fraction=0.6, settings=settings,
        checkpoint_certificates=True, compare_certificates=("gaussian", "eb"),
    )
    return result, policy


def test_each_model_states_every_checkpoint_and_the_own_model_matches_the_run_certificates(compared):
    result, _ = compared
    summary = result.summary
    assert set(summary["model_certificates"]) == {"gaussian", "eb"}
    names = [f"{p}pct" for p in REPORT_PERCENTS] + ["stop"]
    for model, certificates in summary["model_certificates"].items():
        assert list(certificates) == names
        for name, certificate in certificates.items():
            if certificate is None:
                continue
            assert certificate["model"] == model
            assert certificate["arm"] == summary["certificates"][name]["arm"]
            assert certificate["anytime"] == summary["certificates"][name]["anytime"]
    # The run's own model is the gaussian one: its statements are the run's checkpoint certificates.
    for name, certificate in summary["certificates"].items():
        if certificate is not None:
            gaussian = summary["model_certificates"]["gaussian"][name]
            assert {key: gaussian[key] for key in certificate} == certificate


def test_the_checkpoint_statements_are_those_of_the_cells_seen_by_then(benchmark, compared):
    result, policy = compared
    trace, summary = result.trace, result.summary
    prior = GaussianPrior()
    matrix = benchmark.scores
    for name in ("2pct", "10pct"):
        certificate = summary["model_certificates"]["eb"][name]
        position = int(np.searchsorted(trace["cost_pct"], int(name[:-3]) + 1e-9, side="right")) - 1
        observed = ObservedCells(benchmark.n_arms, benchmark.n_examples, binary=True)
        seen = [set() for _ in range(benchmark.n_arms)]
        # Rebuild the cells from the policy's own record of its batches (the scores, not the examples):
        # the certificate depends on each arm's scores only through their sums, counts and squares.
        for arm, scores in policy.batches[: position + 1]:
            examples = [j for j in range(benchmark.n_examples) if j not in seen[arm]][: len(scores)]
            seen[arm].update(examples)
            observed.add(arm, np.array(examples), scores)
        arm = int(trace["recommended"][position])
        expected = EmpiricalBayesModel().certify(observed, arm, eps=0.01)
        assert certificate["prob_eps_best"] == pytest.approx(expected.prob_eps_best, abs=1e-9)
        assert certificate["lower"] == pytest.approx(expected.lower)
        assert certificate["upper"] == pytest.approx(expected.upper)
        assert certificate["lcb_arm"] == EmpiricalBayesModel().recommend(observed, policy.kappa)
        means = matrix.mean(axis=1)
        assert certificate["lcb_regret"] == pytest.approx(means.max() - means[certificate["lcb_arm"]])
        gaussian = summary["model_certificates"]["gaussian"][name]
        posterior = posterior_from_statistics(observed.score_sum, observed.n_seen, 64, prior.mean, prior.var, 0.25)
        assert gaussian["prob_eps_best"] == certify(posterior, arm).prob_eps_best
        # GittinsEval recommends by the same LCB of the same posterior.
        assert gaussian["lcb_arm"] == arm


def test_each_models_stop_fires_where_a_replay_of_the_run_first_reaches_it(compared):
    result, policy = compared
    trace, stops = result.trace, result.summary["model_stops"]
    assert set(stops) == {"gaussian", "eb", "anytime"}
    assert stops["gaussian"] == result.summary["confidence_stop"]
    observed = ObservedCells(12, 64, binary=True)
    seen = [0] * 12
    model = EmpiricalBayesModel()
    first = None
    for i, (arm, scores) in enumerate(policy.batches):
        observed.add(arm, np.arange(seen[arm], seen[arm] + len(scores)), scores)
        seen[arm] += len(scores)
        if model.prob_eps_best(observed, int(trace["recommended"][i]), STOP.eps) >= STOP.prob_eps_best:
            first = i + 1
            break
    assert first is not None, "the test's benchmark must make the eb stop fire"
    assert stops["eb"]["step"] == first and stops["eb"]["mode"] == "posterior"
    assert stops["eb"]["regret"] == trace["regret"][first - 1]
    assert stops["anytime"]["mode"] == "anytime"


def test_comparing_models_changes_nothing_the_run_did(benchmark, compared):
    result, _ = compared
    plain = simulate(benchmark, GittinsPolicy(batch_size=4), np.ones(benchmark.n_arms), GaussianPrior(),
                     budget_fraction=0.6)
    np.testing.assert_array_equal(plain.trace["arm"], result.trace["arm"])
    np.testing.assert_array_equal(plain.trace["recommended"], result.trace["recommended"])


@pytest.mark.parametrize("compare", [("gaussian", "gaussian"), ("student",)])
def test_a_bad_model_list_is_refused_by_name(benchmark, compare):
    with pytest.raises(ValueError, match="compare_certificates"):
        simulate(benchmark, GittinsPolicy(), np.ones(benchmark.n_arms), GaussianPrior(), compare_certificates=compare)
