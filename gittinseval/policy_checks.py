"""The contract every policy keeps, as checks a new policy gets for free.

In the spirit of scikit-learn's ``check_estimator``: :func:`check_policy` runs
every check of :data:`CHECKS` on a factory of fresh, identically configured
policies.  The repository's test suite runs them over every
``conf/policy/*.yaml`` and the example baseline of docs/baselines.md; a policy of
your own can be checked the same way::

    from gittinseval.policy_checks import check_policy
    check_policy(lambda: GreedyMean(batch_size=2))

Each check runs the policy on :func:`conformance_benchmark`, a small binary
benchmark with configuration features (so configuration-level BO runs too), and
raises an ``AssertionError`` naming what broke.  A check that does not apply
(the busy-arm contract of a policy that is not ``concurrent``; the live run of
one that cannot run live) only checks that the policy refuses it.
"""

from __future__ import annotations

import json
from collections.abc import Callable

import numpy as np

from gittinseval.core.params import build, target_of
from gittinseval.core.priors import GaussianPrior
from gittinseval.core.protocol import EvaluationProblem, Policy, Request
from gittinseval.data import Benchmark
from gittinseval.sim.simulator import RunResult, simulate

__all__ = ["CHECKS", "check_policy", "conformance_benchmark"]

PolicyFactory = Callable[[], Policy]

N_ARMS, N_EXAMPLES = 12, 16
BUDGET_FRACTION = 0.3
TRACE_COLUMNS = ("arm", "batch_size", "recommended", "cost")


def conformance_benchmark() -> Benchmark:
    """``12 x 16`` binary scores, arm qualities 0.2-0.8, prices 1-3, two categorical features."""
    rng = np.random.default_rng(11)
    quality = np.linspace(0.2, 0.8, N_ARMS)
    scores = (rng.uniform(size=(N_ARMS, N_EXAMPLES)) < quality[:, None]).astype(float)
    features = np.stack([np.arange(N_ARMS) // 4, np.arange(N_ARMS) % 4], axis=1)
    return Benchmark("conformance", scores, prices=np.linspace(1.0, 3.0, N_ARMS), features=features)


def _problem(bench: Benchmark, budget_fraction: float = BUDGET_FRACTION) -> EvaluationProblem:
    return EvaluationProblem(
        bench.n_examples, bench.prices, budget_fraction * bench.n_examples * bench.prices.sum(),
        binary=True, features=bench.features,
    )


def _run(policy: Policy, bench: Benchmark, seed: int = 0, prior: GaussianPrior | None = None) -> RunResult:
    return simulate(bench, policy, bench.prices, prior or GaussianPrior(0.5, 0.04),
                    budget_fraction=BUDGET_FRACTION, seed=seed, cost_mode="aware")


def _assert_same_trace(first: RunResult, second: RunResult, what: str) -> None:
    for column in TRACE_COLUMNS:
        if not np.array_equal(first.trace[column], second.trace[column]):
            raise AssertionError(f"{what}: the traces differ in column {column!r}")


def _scores_of(bench: Benchmark, request: Request) -> np.ndarray:
    return bench.scores[request.arm, request.examples]


def check_declarations(make: PolicyFactory, bench: Benchmark) -> None:
    """Names, capabilities and the recorded parameters are of the documented types."""
    policy = make()
    assert isinstance(policy, Policy), f"{type(policy).__name__} is not a gittinseval.core.protocol.Policy"
    assert isinstance(policy.name, str) and isinstance(policy.label, str), "name and label must be strings"
    assert isinstance(policy.uses_prior, bool) and isinstance(policy.concurrent, bool)
    assert policy.live_limitation is None or isinstance(policy.live_limitation, str)
    json.dumps(policy.get_params())  # recorded in every summary.json and live store
    assert isinstance(policy.diagnostics(), dict)


def check_rebuilt_from_its_params(make: PolicyFactory, bench: Benchmark) -> None:
    """The policy built from ``get_params()`` records the same parameters and runs the same trace."""
    policy = make()
    rebuilt = build(target_of(policy), policy.get_params())
    assert type(rebuilt) is type(policy), f"get_params() rebuilt a {type(rebuilt).__name__}"
    assert rebuilt.get_params() == policy.get_params(), "the rebuilt policy records other parameters"
    _assert_same_trace(_run(policy, bench, seed=4), _run(rebuilt, bench, seed=4), "rebuilt from get_params()")


def check_runs_within_the_budget(make: PolicyFactory, bench: Benchmark) -> None:
    """A simulated run requests valid cells, spends past the budget only on its last batch, recommends an arm."""
    result = _run(make(), bench)  # the simulator rejects unknown arms and seen or repeated examples
    trace, budget = result.trace, result.summary["budget"]
    assert len(trace["step"]) > 0, "the policy requested nothing"
    assert np.all((trace["recommended"] >= 0) & (trace["recommended"] < bench.n_arms)), "recommended a bad arm"
    assert np.all(np.diff(trace["cost"]) > 0)
    assert len(trace["cost"]) < 2 or trace["cost"][-2] < budget, "a batch was requested after the budget was spent"
    json.dumps(result.summary)


def check_same_seed_same_trace(make: PolicyFactory, bench: Benchmark) -> None:
    """Two runs with one seed are identical."""
    _assert_same_trace(_run(make(), bench, seed=3), _run(make(), bench, seed=3), "two runs with seed 3")


def check_reset_starts_afresh(make: PolicyFactory, bench: Benchmark) -> None:
    """A policy reused for a second run (after ``reset``) runs exactly as a new one."""
    reused = make()
    _run(reused, bench, seed=5)
    again, fresh = _run(reused, bench, seed=2), _run(make(), bench, seed=2)
    _assert_same_trace(again, fresh, "a reused policy")
    assert json.dumps(again.summary["diagnostics"]) == json.dumps(fresh.summary["diagnostics"])


def check_prior_use_is_declared(make: PolicyFactory, bench: Benchmark) -> None:
    """A policy with ``uses_prior = False`` runs the same under any prior."""
    if make().uses_prior:
        return
    one = _run(make(), bench, seed=1, prior=GaussianPrior(0.5, 0.04))
    other = _run(make(), bench, seed=1, prior=GaussianPrior(0.9, 0.001))
    _assert_same_trace(one, other, "uses_prior = False, two priors")


def check_busy_arms(make: PolicyFactory, bench: Benchmark) -> None:
    """A ``concurrent`` policy never selects an arm with a request in flight, observed out of order."""
    policy = make()
    if not policy.concurrent:
        return
    policy.reset(_problem(bench, 1.0), np.random.default_rng(3))
    in_flight: list[Request] = []
    seen = np.zeros(bench.scores.shape, dtype=bool)
    for step in range(10 * bench.n_arms):
        request = policy.select(frozenset(r.arm for r in in_flight))
        if request is None and not in_flight:
            break
        if request is not None:
            assert request.arm not in {r.arm for r in in_flight}, f"arm {request.arm} selected while busy"
            assert not seen[request.arm, request.examples].any(), f"arm {request.arm}: an example asked twice"
            seen[request.arm, request.examples] = True
            in_flight.append(request)
        if len(in_flight) >= 3 or request is None:
            done = in_flight.pop(0 if step % 3 == 0 else -1)
            policy.observe(done, _scores_of(bench, done))
    assert seen.any(), "the policy selected nothing"


def check_cancel(make: PolicyFactory, bench: Benchmark) -> None:
    """After ``cancel``, the policy is as if it had never selected the request (or it refuses to cancel)."""
    reference, cancelling = make(), make()
    for policy in (reference, cancelling):
        policy.reset(_problem(bench, 0.5), np.random.default_rng(11))
    if not cancelling.cancellable:
        request = cancelling.select()
        try:
            cancelling.cancel(request)
        except NotImplementedError:
            return
        raise AssertionError("a policy that is not cancellable took a request back")
    for step in range(60):
        if step % 3 == 0 and (taken_back := cancelling.select()) is not None:
            cancelling.cancel(taken_back)
        expected, request = reference.select(), cancelling.select()
        if expected is None:
            assert request is None, "the cancelling run asked for more than the reference run"
            return
        assert request is not None and request.arm == expected.arm, f"step {step}: another arm after cancel"
        assert np.array_equal(request.examples, expected.examples), f"step {step}: other examples after cancel"
        reference.observe(expected, _scores_of(bench, expected))
        cancelling.observe(request, _scores_of(bench, request))
        assert cancelling.recommend() == reference.recommend(), f"step {step}: another recommendation after cancel"


def check_live_run(make: PolicyFactory, bench: Benchmark) -> None:
    """A short ask/tell run of the live evaluator; bad scores are refused before the policy sees them."""
    from gittinseval.live import Evaluator, LiveConfig, LiveTask  # the live layer sits above the protocol

    policy = make()
    if policy.live_limitation is not None:
        try:
            Evaluator(LiveTask(bench.arm_names, range(bench.n_examples), costs="unit", binary=True),
                      LiveConfig(policy=policy))
        except ValueError:
            return
        raise AssertionError("a policy with a live_limitation was accepted for a live run")
    task = LiveTask(bench.arm_names, range(bench.n_examples), costs="unit", binary=True)
    budget = BUDGET_FRACTION * bench.scores.size
    with Evaluator(task, LiveConfig(budget_usd=budget, policy=policy, seed=1)) as evaluator:
        request = evaluator.ask()
        assert request is not None, "the policy asked for nothing live"
        try:
            evaluator.tell(request, np.full(request.size, np.nan))
        except ValueError as error:
            assert f"arm {request.arm}" in str(error), f"the error does not name the arm: {error}"
        else:
            raise AssertionError("NaN scores were accepted")
        told = 0
        while request is not None and evaluator.spent < budget:
            evaluator.tell(request, _scores_of(bench, request))
            told += 1
            request = evaluator.ask()
        recommendation = evaluator.recommend()
    assert told > 0 and recommendation is not None and 0 <= recommendation.arm < bench.n_arms


CHECKS = (
    check_declarations,
    check_rebuilt_from_its_params,
    check_runs_within_the_budget,
    check_same_seed_same_trace,
    check_reset_starts_afresh,
    check_prior_use_is_declared,
    check_busy_arms,
    check_cancel,
    check_live_run,
)
"""Every check, in the order :func:`check_policy` runs them: each ``check(make, bench)`` raises an
``AssertionError`` naming what broke."""


def check_policy(make: PolicyFactory) -> None:
    """Run every check of :data:`CHECKS` on fresh policies from ``make``; the first failure raises."""
    bench = conformance_benchmark()
    for check in CHECKS:
        check(make, bench)
