"""The state a live run's events change, driven directly: open, settle, tell, cancel, hand out again, against a
real store, ledger and session (no evaluator).  Its replay from a reopened store: test_replay.py."""

import numpy as np
import pytest

from gittinseval.baselines.sysrs import SySRsPolicy
from gittinseval.core.gittins import GittinsPolicy
from gittinseval.core.protocol import EvaluationProblem
from gittinseval.core.session import RunSession
from gittinseval.live.ledger import Ledger
from gittinseval.live.run_state import RunState
from gittinseval.live.run_store import RunStore

K, N = 3, 24
COSTS = np.array([0.5, 0.25, 1.0])
"""Expected dollars per example of each arm."""
DOLLARS_PER_RAW_UNIT = 1e-3
SCORES = (np.random.default_rng(5).random((K, N)) < np.array([[0.3], [0.6], [0.8]])).astype(float)


def fresh_state(store, policy=None, seed=1):
    """A run's state on ``store`` (defined if new) with a reset policy, before any event."""
    if store.load_definition() is None:
        store.define({"format": 3}, ["a", "b", "c"], COSTS)
    problem = EvaluationProblem(n_examples=N, costs=COSTS / DOLLARS_PER_RAW_UNIT, budget=1e9, binary=True)
    session = RunSession(GittinsPolicy(batch_size=4) if policy is None else policy, problem, seed=seed)
    return RunState(session, Ledger(store, COSTS), DOLLARS_PER_RAW_UNIT)


def issue(store, state):
    """The policy's next request, recorded in the store then opened."""
    request = state.select()
    state.open(store.issue(request.arm, request.examples), request)
    return request


def call(state, request, n_scored=None, outcome="scored", reported=None):
    """A scoring call of the request's unscored cells that scores the first ``n_scored`` of them (all by
    default) with the matrix's scores; returns its charge."""
    entry = state.entry_for(request)
    attempt = state.ledger.start(entry)
    kept = attempt.examples[: attempt.examples.size if n_scored is None else n_scored]
    scored = {int(e): float(SCORES[request.arm, e]) for e in kept}
    error = None if outcome == "scored" else "a failure"
    return state.settle(entry, attempt.outcome(entry.id), outcome, scored, reported, 0, error)


def test_a_request_is_told_once_its_last_cell_is_scored_with_every_call_charged():
    store = RunStore(None)
    state = fresh_state(store)
    observed = []
    observe = state.session.observe
    state.session.observe = lambda request, scores, charge: observed.append(charge) or observe(request, scores, charge)
    first = issue(store, state)
    second = issue(store, state)  # a concurrent policy is asked with the busy arm
    assert second.arm != first.arm
    assert [(r.arm, r.examples.tolist()) for r in state.outstanding] == [
        (first.arm, first.examples.tolist()),
        (second.arm, second.examples.tolist()),
    ]

    size, arm = first.size, first.arm
    assert call(state, first, n_scored=2, outcome="failed", reported=0.1) == pytest.approx(0.1)
    entry = state.requests[arm]
    assert sorted(entry.scored) == sorted(first.examples[:2].tolist()) and entry.unscored().sum() == size - 2
    assert state.session.observed.n_seen[arm] == 0 and state.trace()["step"].size == 0  # not told yet
    rest = state.ledger.start(state.entry_for(first))
    assert rest.examples.tolist() == first.examples[2:].tolist()  # the next call asks only the unscored cells
    scored = {int(e): float(SCORES[arm, e]) for e in rest.examples}
    charge = state.settle(entry, rest.outcome(entry.id), "scored", scored, None, 0, None)
    assert charge == pytest.approx((size - 2) * COSTS[arm])  # reported nothing: its expected cost

    assert arm not in state.requests and state.outstanding == [second]
    cells = state.session.observed
    assert cells.n_seen[arm] == size and cells.seen[arm, first.examples].all()
    np.testing.assert_array_equal(cells.values[arm, first.examples], SCORES[arm, first.examples])
    # Observed once, charged every call, in the policy's raw unit.
    assert observed == [pytest.approx((0.1 + charge) / DOLLARS_PER_RAW_UNIT)]
    trace = state.trace()
    assert trace["arm"].tolist() == [arm] and trace["batch_size"].tolist() == [size]
    assert trace["cost"].tolist() == [pytest.approx(0.1 + charge)] == [pytest.approx(state.ledger.spent)]
    assert trace["recommended"].tolist() == [state.session.recommended]


def test_a_cell_is_never_recorded_twice():
    store = RunStore(None)
    state = fresh_state(store)
    request = issue(store, state)
    in_flight = state.ledger.start(state.entry_for(request))
    with pytest.raises(ValueError, match="a scoring call of this request is in flight"):
        state.entry_for(request)  # no second call, tell or cancel of it meanwhile
    assert state.entry_in_flight(in_flight) is state.requests[request.arm]
    entry = state.requests[request.arm]
    scored = {int(e): float(SCORES[request.arm, e]) for e in in_flight.examples}
    state.settle(entry, in_flight.outcome(entry.id), "scored", scored, None, 0, None)

    with pytest.raises(ValueError, match=r"examples \[.*\] were already told"):
        state.entry_for(request)
    with pytest.raises(ValueError, match="is not in flight"):
        state.entry_in_flight(in_flight)
    with pytest.raises(KeyError):
        state.tell(request.arm, SCORES[request.arm, request.examples], 1.0)
    with pytest.raises(ValueError, match="seen already"):
        state.session.observe(request, SCORES[request.arm, request.examples], 1.0)
    assert state.session.observed.n_seen.sum() == request.size and state.trace()["step"].size == 1
    # The policy never asks for a told cell again.
    while (following := state.select()) is not None and following.arm != request.arm:
        state.open(store.issue(following.arm, following.examples), following)
        call(state, following)
    assert following is None or not np.isin(following.examples, request.examples).any()
    with pytest.raises(ValueError, match=r"outside \[0, 3\)"):
        state.entry_for(type(request)(K, request.examples))


def test_without_concurrency_nothing_is_selected_while_a_request_is_out():
    store = RunStore(None)
    state = fresh_state(store, SySRsPolicy(batch_size=4))
    request = issue(store, state)
    assert state.select() is None
    call(state, request)
    assert state.select() is not None


def test_a_request_handed_out_again_is_queued_once_and_leaves_the_queue_when_closed():
    store = RunStore(None)
    state = fresh_state(store)
    first, second = issue(store, state), issue(store, state)
    unscored = first.size * COSTS[first.arm] + second.size * COSTS[second.arm]
    assert state.expected_handed_out == pytest.approx(unscored)
    state.hand_out_again(second.arm)
    state.hand_out_again(first.arm)
    state.hand_out_again(second.arm)
    assert state.reissue == [second.arm, first.arm]
    assert state.expected_handed_out == 0.0  # both are waiting to be handed out again
    assert state.next_reissued() is second and state.reissue == [first.arm]
    assert state.expected_handed_out == pytest.approx(second.size * COSTS[second.arm])
    state.cancel(first.arm)
    assert state.reissue == [] and state.next_reissued() is None and state.outstanding == [second]
    with pytest.raises(KeyError):
        state.hand_out_again(first.arm)
    again = state.select()  # cancelled: the policy may ask for the same examples again
    assert again.arm == first.arm and again.examples.tolist() == first.examples.tolist()
