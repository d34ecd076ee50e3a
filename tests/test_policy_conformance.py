"""One contract for every policy of ``conf/policy/``: a new baseline's yaml is checked here
with no edit.  Each policy is built from its config with Hydra and run on a small binary
benchmark with configuration features (so the BO baselines run too)."""

import json

import numpy as np
import pytest
from hydra import compose, initialize_config_dir
from hydra.utils import instantiate

from gittinseval.cli import CONFIG_DIR
from gittinseval.data import Benchmark
from gittinseval.priors import GaussianPrior
from gittinseval.protocol import EvaluationProblem, Policy, Request
from gittinseval.simulator import simulate

POLICY_NAMES = sorted(p.stem for p in (CONFIG_DIR / "policy").glob("*.yaml"))
K, N = 12, 16
BUDGET_FRACTION = 0.3


def build(name: str) -> Policy:
    with initialize_config_dir(config_dir=str(CONFIG_DIR), version_base="1.3"):
        cfg = compose(config_name="config", overrides=[f"policy={name}", "prior=general"])
    if "batch_size" in cfg.policy:
        cfg.policy.batch_size = 2  # the paper's sizes (LRF: 32) exceed this benchmark's N
    return instantiate(cfg.policy)


@pytest.fixture(scope="module")
def bench() -> Benchmark:
    rng = np.random.default_rng(11)
    quality = np.linspace(0.2, 0.8, K)
    scores = (rng.uniform(size=(K, N)) < quality[:, None]).astype(float)
    features = np.stack([np.arange(K) // 4, np.arange(K) % 4], axis=1)
    return Benchmark("conformance", scores, prices=np.linspace(1.0, 3.0, K), features=features)


def run(policy: Policy, bench: Benchmark, seed: int = 0, prior: GaussianPrior | None = None):
    return simulate(bench, policy, bench.prices, prior or GaussianPrior(0.5, 0.04), budget_fraction=BUDGET_FRACTION,
                    seed=seed, cost_mode="aware")


@pytest.mark.parametrize("name", POLICY_NAMES)
def test_the_policy_is_named_after_its_config_and_declares_its_capabilities(name):
    policy = build(name)
    assert isinstance(policy, Policy) and policy.name == name
    assert isinstance(policy.uses_prior, bool) and isinstance(policy.concurrent, bool)
    assert policy.live_limitation is None or isinstance(policy.live_limitation, str)
    assert isinstance(policy.hyperparameters(), dict) and isinstance(policy.diagnostics(), dict)
    json.dumps(policy.hyperparameters())  # recorded in every summary.json


@pytest.mark.parametrize("name", POLICY_NAMES)
def test_a_run_stays_in_the_budget_and_recommends_a_valid_arm(name, bench):
    # The simulator itself rejects a request for an unknown arm or a seen or repeated example.
    result = run(build(name), bench)
    trace, budget = result.trace, result.summary["budget"]
    assert len(trace["step"]) > 0
    assert np.all((trace["recommended"] >= 0) & (trace["recommended"] < K))
    assert np.all(np.diff(trace["cost"]) > 0)
    # The budget is checked after each batch: only the last batch may cross it.
    assert len(trace["cost"]) < 2 or trace["cost"][-2] < budget
    assert result.summary["regret_at_1pct"] is None or 0 <= result.summary["regret_at_1pct"] <= 1


@pytest.mark.parametrize("name", POLICY_NAMES)
def test_the_same_seed_gives_the_same_trace(name, bench):
    first, second = run(build(name), bench, seed=3), run(build(name), bench, seed=3)
    for column in ("arm", "batch_size", "recommended", "cost"):
        np.testing.assert_array_equal(first.trace[column], second.trace[column])


@pytest.mark.parametrize("name", POLICY_NAMES)
def test_reset_starts_a_run_afresh(name, bench):
    """A policy object reused for a second run (after reset) runs exactly as a new one."""
    reused = build(name)
    run(reused, bench, seed=5)
    again, fresh = run(reused, bench, seed=2), run(build(name), bench, seed=2)
    for column in ("arm", "batch_size", "recommended", "cost"):
        np.testing.assert_array_equal(again.trace[column], fresh.trace[column])
    assert json.dumps(again.summary["diagnostics"]) == json.dumps(fresh.summary["diagnostics"])


@pytest.mark.parametrize("name", [n for n in POLICY_NAMES if not build(n).uses_prior])
def test_a_policy_that_uses_no_prior_ignores_it(name, bench):
    one = run(build(name), bench, seed=1, prior=GaussianPrior(0.5, 0.04))
    other = run(build(name), bench, seed=1, prior=GaussianPrior(0.9, 0.001))
    np.testing.assert_array_equal(one.trace["arm"], other.trace["arm"])
    np.testing.assert_array_equal(one.trace["recommended"], other.trace["recommended"])


@pytest.mark.parametrize("name", POLICY_NAMES)
def test_bad_scores_are_named_errors(name, bench):
    policy = build(name)
    policy.reset(EvaluationProblem(N, bench.prices, 0.5 * N * bench.prices.sum(), binary=True,
                                   features=bench.features), np.random.default_rng(0))
    request = policy.select()
    assert isinstance(request, Request)
    with pytest.raises(ValueError, match=rf"arm {request.arm}: scores must be finite and in \[0, 1\]"):
        policy.observe(request, np.full(request.size, np.nan))
    with pytest.raises(ValueError, match=rf"arm {request.arm}: expected {request.size} scores"):
        policy.observe(request, np.zeros(request.size + 1))


@pytest.mark.parametrize("name", [n for n in POLICY_NAMES if build(n).concurrent])
def test_a_concurrent_policy_never_selects_a_busy_arm(name, bench):
    policy = build(name)
    policy.reset(EvaluationProblem(N, bench.prices, N * bench.prices.sum(), binary=True, features=bench.features),
                 np.random.default_rng(0))
    busy: set[int] = set()
    for _ in range(K):
        request = policy.select(frozenset(busy))
        if request is None:
            break
        assert request.arm not in busy
        busy.add(request.arm)
    assert busy, "the policy selected nothing"
