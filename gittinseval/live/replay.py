"""Reopening a store: its events replayed through the public policy protocol, in the order they happened.

A store records every issue, scoring call, tell and cancel of a run (:mod:`gittinseval.live.run_store`).
Replayed on a policy reset and seeded as the run's was, they restore the policy, the posterior, the
stopping signal, the future example order and the ledger.  Each stored request must be the one the
policy selects again, else the store is refused: it was edited, or written by another version of the
policy or of numpy.  The calls that were in flight when the last session ended may have been answered
and billed, so they are settled as lost, at their expected cost; but for the examples whose requests the
scorer knows no batch billed (:meth:`~gittinseval.live.tasks.chat.OpenAIChatScorer.unbilled`, batch mode:
never submitted, or waiting in a batch it will poll again): they are charged nothing then, and their batch
price by the call that collects them, so that a run resumed after a kill pays each batch line once.

Every event is applied by the same public state change of the :class:`~gittinseval.live.run_state.RunState`
that applied it live, after the store had recorded it, so that a replayed run is the run recorded.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import numpy as np

from gittinseval.core.protocol import Request
from gittinseval.live.run_state import RunState
from gittinseval.live.run_store import AttemptOutcome, RunStore, StoredRequest
from gittinseval.live.task import LiveTask

__all__ = ["UnbilledCalls", "replay", "settle_lost", "unbilled_calls"]

UnbilledCalls = Callable[[int, np.ndarray], int]
"""``unbilled(arm, examples)``: how many of the examples' requests of the arm a scorer knows were not billed to a
call (in batch mode: never in a batch, or waiting in one it will collect)."""

LOST = "the run ended before the outcome of this call was recorded"
"""The error recorded for a call whose outcome a session never recorded."""


def unbilled_calls(task: LiveTask) -> UnbilledCalls | None:
    """The :data:`UnbilledCalls` of a task whose scorer has an ``unbilled(arm, examples)`` method (the chat
    scorer), on the task's arms and examples; ``None`` for any other."""
    count = getattr(task.score_fn, "unbilled", None)
    if count is None:
        return None
    arms, examples = list(task.arms), list(task.examples)
    return lambda arm, ids: count(arms[arm], [examples[int(e)] for e in ids])


def replay(store: RunStore, state: RunState, unbilled: UnbilledCalls | None = None) -> None:
    """Bring a fresh ``state`` (its session's policy just reset) to the state ``store`` records.

    Every event is applied in store order (issue: :meth:`~RunState.open` of the request the policy selects
    again; finished call: :meth:`~RunState.count`; tell: :meth:`~RunState.tell`; cancel:
    :meth:`~RunState.cancel`); every call still in flight is settled as lost (in the store too: charged as expected
    but for its examples that ``unbilled`` counts, charged nothing), and the
    requests left outstanding are queued to be handed out again, oldest first, each for the examples it
    has not scored: nothing scored or charged is lost, nor asked for twice.
    """
    for event in store.events():
        stored = event.request
        if event.kind == "issue":
            state.open(stored.id, _reselected(state.select(), stored, store.path))
        elif event.kind == "attempt":
            state.count(stored)
        elif event.kind == "tell":
            state.tell(stored.arm, stored.scores, stored.cost)
        else:
            state.cancel(stored.arm)
    for lost in store.open_attempts():
        settle_lost(state, lost, unbilled, LOST)
    state.hand_out_all_again()


def settle_lost(state: RunState, lost: AttemptOutcome, unbilled: UnbilledCalls | None, error: str) -> float:
    """Settle the call ``lost`` (its outcome unknown) with ``error``: charged as expected but for its examples that
    ``unbilled`` counts, charged nothing (their batch price is charged by the call that collects them).  Returns
    its charge."""
    free = 0 if unbilled is None else min(unbilled(lost.arm, lost.examples), lost.examples.size)
    if free:
        error = f"{error}; {free} of its requests were not billed (batch mode: not sent, or waiting in a batch)"
        return state.settle(state.requests[lost.arm], lost, "lost", {}, 0.0, lost.examples.size - free, error)
    return state.settle(state.requests[lost.arm], lost, "lost", {}, None, 0, error)


def _reselected(request: Request | None, stored: StoredRequest, path: Path | None) -> Request:
    """The policy's selection ``request``, which must be the ``stored`` one."""
    if request is None or request.arm != stored.arm or not np.array_equal(request.examples, stored.examples):
        got = "nothing" if request is None else f"arm {request.arm}, examples {request.examples[:5].tolist()}"
        raise ValueError(
            f"store {path}: replaying request {stored.id}, the policy selects {got} where the "
            f"store has arm {stored.arm}, examples {stored.examples[:5].tolist()} (was the store edited, or "
            "written by another version of the policy or numpy?); to start afresh, keep it and add fork=NEW_STORE"
        )
    return request
