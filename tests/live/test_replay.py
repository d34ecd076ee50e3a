"""Reopening a store (gittinseval.live.replay): its events replayed through the run's state in the order they
happened, so that nothing scored or charged is lost, and a store the policy does not select again is refused."""

import numpy as np
import pytest

from gittinseval.core.gittins import GittinsPolicy
from gittinseval.live.ledger import Attempt
from gittinseval.live.replay import replay
from gittinseval.live.run_store import RunStore
from tests.live.test_run_state import call, fresh_state, issue


def test_nothing_scored_or_charged_is_lost_when_a_store_is_reopened(tmp_path):
    """A told request, a cancelled one, a call that failed part-way and one in flight when the session ended:
    the replayed state has every told cell observed once, every kept cell on its request, every charge
    (the call in flight at its expected cost, as lost), and the requests not told queued, oldest first."""
    path = tmp_path / "run.sqlite"
    store = RunStore(path)
    state = fresh_state(store)
    told = issue(store, state)
    call(state, told, reported=0.3)
    cancelled = issue(store, state)
    store.cancel(state.requests[cancelled.arm].id)
    state.cancel(cancelled.arm)
    failed = issue(store, state)
    call(state, failed, n_scored=1, outcome="failed", reported=0.05)
    in_flight = issue(store, state)
    lost: Attempt = state.ledger.start(state.entry_for(in_flight))
    spent, trace, observed = state.ledger.spent, state.trace(), state.session.observed
    kept = dict(state.requests[failed.arm].scored)
    store.close()  # the session ends with a call in flight

    reopened = RunStore(path)
    resumed = fresh_state(reopened)
    replay(reopened, resumed)
    assert [(r.arm, r.examples.tolist()) for r in resumed.outstanding] == [
        (failed.arm, failed.examples.tolist()),
        (in_flight.arm, in_flight.examples.tolist()),
    ]
    assert resumed.reissue == [failed.arm, in_flight.arm]
    assert resumed.requests[failed.arm].scored == kept and len(kept) == 1
    assert resumed.ledger.spent == pytest.approx(spent + lost.expected)
    assert resumed.ledger.charged_as_expected == pytest.approx(lost.expected)
    assert resumed.ledger.counts == {"scored": 1, "failed": 1, "lost": 1}
    for key in ("step", "arm", "batch_size", "cost", "recommended", "stop_signal"):
        np.testing.assert_array_equal(resumed.trace()[key], trace[key])
    np.testing.assert_array_equal(resumed.session.observed.seen, observed.seen)
    np.testing.assert_array_equal(resumed.session.observed.values, observed.values)
    assert reopened.open_attempts() == []  # the lost call is settled in the store too

    # Handed out again, each asks only for what it has not scored; then the policy goes on.
    assert resumed.next_reissued().arm == failed.arm
    assert resumed.ledger.start(resumed.entry_for(failed)).examples.tolist() == failed.examples[1:].tolist()
    assert resumed.next_reissued().arm == in_flight.arm and resumed.next_reissued() is None
    reopened.close()


def test_a_replay_refuses_a_store_the_policy_does_not_select_again(tmp_path):
    path = tmp_path / "run.sqlite"
    store = RunStore(path)
    state = fresh_state(store, seed=1)
    call(state, issue(store, state))
    store.close()
    reopened = RunStore(path)
    with pytest.raises(ValueError, match="replaying request 1, the policy selects arm"):
        replay(reopened, fresh_state(reopened, GittinsPolicy(batch_size=7), seed=1))
    reopened.close()
