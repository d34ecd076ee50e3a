"""The run session both drivers share: its bookkeeping against the pieces it composes, computed apart."""

import numpy as np
import pytest

from gittinseval.core.anytime import AnytimeCertifier
from gittinseval.core.certificate import CertificateSettings, certify, posterior_from_statistics
from gittinseval.core.confidence_stop import ConfidenceStop
from gittinseval.core.cost_learning import CostLearning
from gittinseval.core.gittins import GittinsPolicy
from gittinseval.core.objective import Objective
from gittinseval.core.protocol import EvaluationProblem
from gittinseval.core.session import RunSession, RunSettings

K, N = 5, 40


def _problem(costs=None, **options):
    costs = np.ones(K) if costs is None else costs
    return EvaluationProblem(n_examples=N, costs=costs, budget=float(N * costs.sum()), binary=True, **options)


def _scores(seed=0):
    rng = np.random.default_rng(seed)
    return (rng.random((K, N)) < np.linspace(0.3, 0.8, K)[:, None]).astype(float)


def _drive(session, scores, charges=None, n_batches=25):
    for _ in range(n_batches):
        request = session.select()
        if request is None:
            break
        charge = request.size if charges is None else charges[request.arm] * request.size
        session.observe(request, scores[request.arm, request.examples], charge)


def test_the_posterior_and_the_certificate_are_those_of_the_observed_statistics():
    scores = _scores()
    gaussian = RunSettings(certificate=CertificateSettings(model="gaussian"))
    session = RunSession(GittinsPolicy(batch_size=4), _problem(), seed=3, settings=gaussian)
    _drive(session, scores)
    observed = session.observed
    expected = posterior_from_statistics(observed.score_sum, observed.n_seen, N, 0.5, 0.04)
    np.testing.assert_allclose(session.posterior.mean, expected.mean, rtol=1e-12)
    np.testing.assert_allclose(session.posterior.variance, expected.variance, rtol=1e-12)
    np.testing.assert_array_equal(observed.values[observed.seen], scores[observed.seen])
    assert session.recommended == int(session.policy.recommend())
    certificate = session.certificate()
    reference = certify(expected, session.recommended)
    np.testing.assert_allclose(certificate.arm_prob_best, reference.arm_prob_best)
    assert certificate.anytime is None and certificate.model == "gaussian"


def test_learned_costs_reach_the_policy_before_it_observes_the_batch():
    guess = np.ones(K)
    true = np.array([4.0, 1.0, 1.0, 1.0, 1.0])
    learning = CostLearning(1.0, 0.1)
    settings = RunSettings(learn_costs=learning)
    session = RunSession(GittinsPolicy(batch_size=4), _problem(guess), seed=0, settings=settings, guessed_costs=True)
    events = []
    policy = session.policy
    observe, update_costs = policy.observe, policy.update_costs
    policy.observe = lambda request, values: (events.append(("observe", request.arm)), observe(request, values))
    policy.update_costs = lambda costs: (events.append(("update", costs.copy())), update_costs(costs))
    _drive(session, _scores(), charges=true)
    # The same charges through an estimator of its own: the re-plans come right before the batch that caused them.
    estimator = learning.start(guess)
    expected = []
    for kind, arm in [event for event in events if event[0] == "observe"]:
        size = 4
        if estimator.charge(arm, size, true[arm] * size):
            expected.append(("update", estimator.planned.copy()))
        expected.append((kind, arm))
    assert [kind for kind, _ in events] == [kind for kind, _ in expected]
    for (kind, got), (_, want) in zip(events, expected, strict=True):
        if kind == "update":
            np.testing.assert_allclose(got, want)
    assert session.learned_costs.n_refreshes == estimator.n_refreshes > 0
    # Known costs are not learned, whatever the settings say: the same charges leave the policy's costs alone.
    known = RunSession(GittinsPolicy(batch_size=4), _problem(guess), seed=0, settings=settings)
    known.policy.update_costs = lambda costs: pytest.fail("known costs were re-planned")
    _drive(known, _scores(), charges=true)
    assert known.learned_costs is None


def test_the_value_objective_certifies_the_shifted_targets():
    prices = np.linspace(1.0, 3.0, K)
    objective = Objective("value", mu=0.05)
    settings = RunSettings(objective=objective)
    offsets = objective.offsets(prices, K)
    session = RunSession(GittinsPolicy(batch_size=4), _problem(offsets=offsets), seed=1, settings=settings,
                         prices=prices)
    _drive(session, _scores())
    shifted = session.certified_posterior()
    np.testing.assert_allclose(shifted.mean, session.posterior.mean + offsets)
    np.testing.assert_allclose(shifted.variance, session.posterior.variance)
    np.testing.assert_allclose(session.certificate().arm_mean, shifted.mean)


def test_an_anytime_stop_is_the_confidence_sequences_statement():
    scores = _scores(2)
    stop = ConfidenceStop(prob_eps_best=0.9, eps=0.2, mode="anytime")
    session = RunSession(GittinsPolicy(batch_size=4), _problem(), seed=0, settings=RunSettings(stop_when=stop))
    # Its own confidence sequences, fed the same batches in the same order.
    reference = AnytimeCertifier(K, N, delta=0.1)
    fired = []
    for _ in range(60):
        request = session.select()
        if request is None:
            break
        batch = scores[request.arm, request.examples]
        session.observe(request, batch, request.size)
        reference.update(request.arm, batch)
        assert session.confident() == reference.reached(session.recommended, 0.2)
        fired.append(session.confident())
    assert session.anytime.delta == pytest.approx(0.1)
    assert any(fired) and not all(fired)  # the instance exercises both answers
    with pytest.raises(ValueError, match="needs confidence sequences at delta = 0.2"):
        session.confident(ConfidenceStop(prob_eps_best=0.8, eps=0.2, mode="anytime"))


def test_settings_from_a_config_and_their_defaults():
    settings = RunSettings.from_config({"stop_when": {"prob_eps_best": 0.9, "eps": 0.02}, "certificate": None})
    assert settings.stop_when == ConfidenceStop(0.9, 0.02) and settings.certificate == CertificateSettings()
    assert settings.learn_costs == CostLearning()
    defaults = RunSettings.defaults_as_config()
    assert RunSettings.from_config(defaults) == RunSettings()
    assert RunSettings.from_config({"learn_costs": None}).learn_costs is None  # null: the guess is kept
    learning = RunSettings.from_config({"learn_costs": {"pseudo_count": 3.0, "refresh_share": 0.0}}).learn_costs
    assert learning == CostLearning(pseudo_count=3.0, refresh_share=0.0)
    with pytest.raises(ValueError, match="stop_when.mode must be one of posterior, anytime"):
        RunSettings(stop_when={"mode": "sometimes"})
