"""Reopening a store: its events replayed through the public policy protocol, in the order they happened.

A store records every issue, scoring call, tell and cancel of a run (:mod:`gittinseval.live.run_store`).
Replayed on a policy reset and seeded as the run's was, they restore the policy, the posterior, the
stopping signal, the future example order and the ledger.  Each stored request must be the one the
policy selects again, else the store is refused: it was edited, or written by another version of the
policy or of numpy.  The calls that were in flight when the last session ended may have been answered
and billed, so they are settled as lost, at their expected cost.

Every event is applied by the same state change of the :class:`~gittinseval.live.evaluator.Evaluator`
that applied it live, after the store had recorded it, so that a replayed run is the run recorded.
"""

from __future__ import annotations

from pathlib import Path
from typing import Protocol

import numpy as np

from gittinseval.core.protocol import Policy, Request
from gittinseval.live.ledger import Ledger, OpenRequest
from gittinseval.live.run_store import AttemptOutcome, RunStore, StoredRequest

__all__ = ["replay"]

LOST = "the run ended before the outcome of this call was recorded"
"""The error recorded for a call whose outcome a session never recorded."""


class RecordedRun(Protocol):
    """The state changes of an :class:`~gittinseval.live.evaluator.Evaluator` that replay applies.

    Declared here rather than imported, so that the evaluator, which replays its store
    when it opens one, and this module do not import each other.
    """

    store: RunStore
    ledger: Ledger
    policy: Policy
    _outstanding: dict[int, OpenRequest]

    def _select(self) -> Request | None: ...

    def _open(self, request_id: int, request: Request) -> None: ...

    def _close(self, arm: int) -> OpenRequest: ...

    def _record(self, request: Request, scores: np.ndarray, charged: float) -> None: ...

    def _settle(self, entry: OpenRequest, attempt: AttemptOutcome, outcome: str, scored: dict[int, float],
                reported: float | None, uncosted: int, error: str | None) -> float: ...


def replay(evaluator: RecordedRun) -> None:
    """Bring a freshly reset ``evaluator`` to the state its store records."""
    store = evaluator.store
    for event in store.events():
        stored = event.request
        if event.kind == "issue":
            evaluator._open(stored.id, _reselected(evaluator._select(), stored, store.path))
        elif event.kind == "attempt":
            evaluator.ledger.count(evaluator._outstanding[stored.arm], stored)
        elif event.kind == "tell":
            evaluator._record(evaluator._close(stored.arm).request, stored.scores, stored.cost)
        else:
            evaluator.policy.cancel(evaluator._close(stored.arm).request)
    for lost in store.open_attempts():
        evaluator._settle(evaluator._outstanding[lost.arm], lost, "lost", {}, None, 0, LOST)


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
