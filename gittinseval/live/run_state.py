"""The state of a live run that its recorded events change: the requests outstanding, what their calls
were charged and scored, and what the run has observed.

A live run's store (:mod:`gittinseval.live.run_store`) records every issue, scoring call, tell and cancel
before anything in memory changes.  Each recorded event then changes a :class:`RunState` by one public
method, the same one whether the event happens live (the :class:`~gittinseval.live.evaluator.Evaluator`)
or is replayed from the store when it is reopened (:func:`~gittinseval.live.replay.replay`), so that a
reopened run is the run that was recorded:

=============  ==============================================================
event          state change
=============  ==============================================================
issue          :meth:`RunState.open`
scoring call   :meth:`RunState.settle` (live), :meth:`RunState.count` (replayed)
tell           :meth:`RunState.tell` (live: by the call that scores the rest)
cancel         :meth:`RunState.cancel`
=============  ==============================================================
"""

from __future__ import annotations

import numpy as np

from gittinseval.core.protocol import Request
from gittinseval.core.session import RunSession
from gittinseval.live.ledger import Attempt, Ledger, OpenRequest
from gittinseval.live.run_store import AttemptOutcome

__all__ = ["RunState"]

TraceRow = tuple[int, int, float, int, bool]
"""One told request: ``(arm, batch size, spend after it, arm recommended after it, stop signal after it)``."""


class RunState:
    """The requests outstanding of a live run, keyed by arm, and the state changes of its events.

    A request is outstanding from its issue until it is told or cancelled; an arm has at most one (a
    concurrent policy is asked with the arms that have one).  The cells a call scores are kept on the
    request (:class:`~gittinseval.live.ledger.OpenRequest`) until its last one is scored; then the
    request is told: the session observes its ``[size]`` scores once, with what all its calls were
    charged.  Each cell of an arm is thus observed at most once (the ledger asks only for the cells not
    yet scored, and :meth:`~gittinseval.core.observations.ObservedCells.add` refuses a cell seen already).

    Args:
        session: the run's policy, posterior and statements (:class:`~gittinseval.core.session.RunSession`).
        ledger: the run's scoring calls and their charges (:class:`~gittinseval.live.ledger.Ledger`).
        dollars_per_raw_unit: money per unit of the policy's raw cost: a told request charged ``d``
            dollars costs the policy ``d / dollars_per_raw_unit``.

    Attributes:
        requests: ``{arm: OpenRequest}``, the requests outstanding.
        reissue: the arms whose outstanding request :meth:`next_reissued` hands out again, in this order.
    """

    def __init__(self, session: RunSession, ledger: Ledger, dollars_per_raw_unit: float) -> None:
        self.session = session
        self.ledger = ledger
        self.dollars_per_raw_unit = float(dollars_per_raw_unit)
        self.requests: dict[int, OpenRequest] = {}
        self.reissue: list[int] = []
        self._trace: list[TraceRow] = []

    @property
    def outstanding(self) -> list[Request]:
        """The requests outstanding, oldest (lowest store row) first."""
        return [entry.request for entry in sorted(self.requests.values(), key=lambda entry: entry.id)]

    def entry_for(self, request: Request) -> OpenRequest:
        """The outstanding request that ``request`` (from :meth:`outstanding`, or an ask) is, with no scoring call
        in flight: a caller may start a call of it, tell it or cancel it.  Else a ``ValueError`` saying why: an
        arm out of range, examples told already, no such request, or a call of it in flight."""
        arm = int(request.arm)
        entry = self.requests.get(arm) if 0 <= arm < self.session.n_arms else None
        if entry is None or not np.array_equal(entry.request.examples, request.examples):
            raise ValueError(self._describe_unknown(request))
        if self.ledger.has_in_flight(entry):
            raise ValueError(f"arm {arm}: a scoring call of this request is in flight; finish or fail it first")
        return entry

    def entry_in_flight(self, attempt: Attempt) -> OpenRequest:
        """The outstanding request of a scoring call in flight (else a ``ValueError``)."""
        self.ledger.check_in_flight(attempt)
        return self.requests[attempt.request.arm]

    def _describe_unknown(self, request: Request) -> str:
        n_arms, arm = self.session.n_arms, int(request.arm)
        if not 0 <= arm < n_arms:
            return f"request for arm {arm}, outside [0, {n_arms})"
        examples = np.asarray(request.examples)
        seen = self.session.seen
        if examples.size and np.isin(examples, np.arange(self.session.n_examples)).all() and seen[arm, examples].all():
            return f"arm {arm}: examples {examples[:5].tolist()} were already told"
        return (
            f"arm {arm}: no outstanding request for examples {examples[:5].tolist()}; tell() takes requests from ask()"
        )

    def select(self) -> Request | None:
        """The policy's next request: any while nothing is outstanding; else, for a concurrent policy, one of
        an arm without an outstanding request (``select(busy)``), and ``None`` for any other policy."""
        if not self.requests:
            return self.session.select()
        if not self.session.policy.concurrent:
            return None
        return self.session.select(frozenset(self.requests))

    def open(self, request_id: int, request: Request) -> None:
        """An issued request, row ``request_id`` of the store's ``requests``, becomes outstanding."""
        self.requests[request.arm] = OpenRequest(request_id, request)

    def count(self, attempt: AttemptOutcome) -> None:
        """A finished call replayed from the store: its charge and its scored cells go to its outstanding
        request (:meth:`~gittinseval.live.ledger.Ledger.count`)."""
        self.ledger.count(self.requests[attempt.arm], attempt)

    def settle(
        self,
        entry: OpenRequest,
        attempt: AttemptOutcome,
        outcome: str,
        scored: dict[int, float],
        reported: float | None,
        uncosted: int,
        error: str | None,
    ) -> float:
        """A finished call of ``entry``, charged and its ``scored`` cells kept, in the store then in memory
        (:meth:`~gittinseval.live.ledger.Ledger.settle`).  A call that scores the rest of its request tells it
        (:meth:`tell`, with the ``[size]`` scores of every call and the sum of their charges).  Returns the
        call's charge."""
        charged = self.ledger.settle(entry, attempt, outcome, scored, reported, uncosted, error)
        if entry.complete:
            self.tell(entry.request.arm, entry.scores(), entry.charged)
        return charged

    def tell(self, arm: int, scores: np.ndarray, charged: float) -> int:
        """The outstanding request of ``arm`` told: it is closed and the session observes its ``[size]``
        ``scores``, in the request's order, and its ``charged`` dollars (every call of it) in the policy's
        raw cost unit (:meth:`~gittinseval.core.session.RunSession.observe`), with its calls' cache hits at their
        list price (:attr:`~gittinseval.live.ledger.OpenRequest.listed`): the learned costs learn what the arm
        costs, not what the cache saved.  Returns the arm recommended after it; the request is a new row of
        :meth:`trace`."""
        entry = self._close(arm)
        request, listed = entry.request, charged + entry.listed - entry.charged
        recommended = self.session.observe(request, scores, listed / self.dollars_per_raw_unit)
        stop = bool(self.session.policy.stop_signal)
        self._trace.append((request.arm, request.size, self.ledger.spent, recommended, stop))
        return recommended

    def cancel(self, arm: int) -> Request:
        """The outstanding request of ``arm`` taken back: it is closed and the policy cancels it (it may ask
        for its examples again).  Returns the request."""
        request = self._close(arm).request
        self.session.policy.cancel(request)
        return request

    def _close(self, arm: int) -> OpenRequest:
        """The outstanding request of ``arm``, told or cancelled, off the books (and off :attr:`reissue`)."""
        entry = self.requests.pop(arm)
        if arm in self.reissue:
            self.reissue.remove(arm)
        return entry

    def hand_out_again(self, arm: int) -> None:
        """Have :meth:`next_reissued` return the outstanding request of ``arm`` (after those queued already)."""
        if arm not in self.requests:
            raise KeyError(f"arm {arm} has no outstanding request")
        if arm not in self.reissue:
            self.reissue.append(arm)

    def hand_out_all_again(self) -> None:
        """Queue every outstanding request to be handed out again, oldest first: on reopening a store, the
        requests issued and not told are asked again, each for the examples it has not scored."""
        for request in self.outstanding:
            self.hand_out_again(request.arm)

    def next_reissued(self) -> Request | None:
        """The first request queued by :meth:`hand_out_again`, taken off the queue (it stays outstanding), or
        ``None``."""
        return self.requests[self.reissue.pop(0)].request if self.reissue else None

    @property
    def expected_handed_out(self) -> float:
        """``sum_r expected(arm_r, unscored_r)`` over the outstanding requests ``r`` not queued to be handed
        out again: the expected cost of the examples they have not scored."""
        return sum(
            self.ledger.expected(arm, int(entry.unscored().sum()))
            for arm, entry in self.requests.items()
            if arm not in self.reissue
        )

    def trace(self) -> dict[str, np.ndarray]:
        """One entry per told request, in tell order (columns as in the simulator's trace).

        ``step`` (1-based), ``arm``, ``batch_size``, ``cost`` (cumulative spend),
        ``recommended`` (arm recommended after the tell) and ``stop_signal``, each of shape ``[n_told]``.
        """
        rows = self._trace
        return {
            "step": np.arange(1, len(rows) + 1),
            "arm": np.array([r[0] for r in rows], dtype=np.int64),
            "batch_size": np.array([r[1] for r in rows], dtype=np.int64),
            "cost": np.array([r[2] for r in rows], dtype=np.float64),
            "recommended": np.array([r[3] for r in rows], dtype=np.int64),
            "stop_signal": np.array([r[4] for r in rows], dtype=bool),
        }
