"""The ledger of a live run: every scoring call, what it was charged, and the run's spend.

A driver that makes the scoring calls records each one in the store's ``attempts`` table
before it is sent (:meth:`Ledger.start`) and completes the row after (:meth:`Ledger.settle`).
With ``e`` the expected cost of a call of ``m`` examples, ``r`` the cost it reported (if
any) and ``u`` its examples of unknown cost, the call is charged

- ``r`` when it scored every example it asked for (``e`` when it reported nothing);
- ``r + u e / m`` when it failed, of which ``u e / m`` is charged as expected;
- ``e`` when it failed without reporting a cost, or was lost (the process ended with it
  in flight), all of it charged as expected: it may have been billed.

:attr:`Ledger.spent` is the sum of every charge, over every session of the store, and
:attr:`Ledger.charged_as_expected` the part charged at the expected cost.  :attr:`Ledger.spent_by_arm`
splits the spend by arm, which a run groups by the arms' providers (``LiveResult.spent_by_provider``).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field, replace

import numpy as np

from gittinseval.core.protocol import Request
from gittinseval.live.run_store import AttemptOutcome, RunStore
from gittinseval.live.usage import Usage

__all__ = ["Attempt", "Ledger", "OpenRequest"]


@dataclass(frozen=True)
class Attempt:
    """A scoring call in flight: the examples ``[m]`` of an outstanding request not yet scored, and
    their expected cost; ``id`` is its row in the store's ledger."""

    id: int
    request: Request
    examples: np.ndarray = field(repr=False)
    expected: float = 0.0

    def outcome(self, request_id: int, usage: Usage | None = None) -> AttemptOutcome:
        """The call's row of the ledger, to be settled; ``usage``: what each of its examples was billed."""
        if usage is not None and len(usage) != self.examples.size:
            raise ValueError(
                f"arm {self.request.arm}: the call's usage covers {len(usage)} examples, it asked for "
                f"{self.examples.size}"
            )
        return AttemptOutcome(self.id, request_id, self.request.arm, self.examples, self.expected, usage=usage)


@dataclass
class OpenRequest:
    """An outstanding request: its row in the store, the cells scored so far and what its calls cost."""

    id: int
    request: Request
    scored: dict[int, float] = field(default_factory=dict)
    charged: float = 0.0
    listed: float = 0.0
    """What its calls would have been charged had the response cache served none of its examples (their
    ``list_cost``): what the learned costs learn from."""

    @property
    def complete(self) -> bool:
        """Whether every example of the request is scored."""
        return len(self.scored) == self.request.size

    def unscored(self) -> np.ndarray:
        """``[size]`` mask of the request's examples not yet scored."""
        return np.array([int(e) not in self.scored for e in self.request.examples], dtype=bool)

    def scores(self) -> np.ndarray:
        """The ``[size]`` scores of a complete request, in the order of its examples."""
        return np.array([self.scored[int(e)] for e in self.request.examples])


class Ledger:
    """The scoring calls of a run and their charges, in memory and in the ``attempts`` table of ``store``.

    Args:
        store: the run's store; every call is written to it before memory changes.
        costs: ``[K]`` expected dollars per example of each arm; ``None``: unknown, estimated
            by the mean charge per scored example so far.
    """

    def __init__(self, store: RunStore, costs: np.ndarray | None) -> None:
        self.store = store
        self.costs = costs
        self.spent = 0.0
        self.charged_as_expected = 0.0
        self.calls_charged_as_expected = 0
        """The finished calls charged as expected in whole or part."""
        self.spent_by_arm: dict[int, float] = {}
        """:attr:`spent` by arm (an arm without a charge has none)."""
        self.counts = {"scored": 0, "failed": 0, "lost": 0}
        self._n_scored = 0
        self._in_flight: dict[int, Attempt] = {}

    def expected(self, arm: int, n_examples: int) -> float:
        """Expected cost of ``n_examples`` of an arm: ``n * costs[arm]``; with ``costs=None``, ``n``
        times the mean charge per scored example so far (0 before any)."""
        if self.costs is not None:
            return n_examples * float(self.costs[arm])
        return n_examples * (self.spent / self._n_scored if self._n_scored else 0.0)

    @property
    def in_flight(self) -> list[Attempt]:
        """The scoring calls in flight (started and not finished), oldest first."""
        return list(self._in_flight.values())

    @property
    def expected_in_flight(self) -> float:
        """The expected cost of the scoring calls in flight (started and not finished)."""
        return sum(attempt.expected for attempt in self._in_flight.values())

    def has_in_flight(self, entry: OpenRequest) -> bool:
        """Whether a scoring call of the request is in flight."""
        return any(attempt.request is entry.request for attempt in self._in_flight.values())

    def check_in_flight(self, attempt: Attempt) -> None:
        if attempt.id not in self._in_flight:
            raise ValueError(f"attempt {attempt.id} is not in flight")

    def start(self, entry: OpenRequest) -> Attempt:
        """Record a scoring call about to be sent for the examples of ``entry`` not yet scored."""
        examples = entry.request.examples[entry.unscored()].astype(np.int64)
        expected = self.expected(entry.request.arm, examples.size)
        attempt = Attempt(self.store.start_attempt(entry.id, examples, expected), entry.request, examples, expected)
        self._in_flight[attempt.id] = attempt
        return attempt

    def valid_cost(self, arm: int, cost: float | None) -> float | None:
        """A call's reported ``cost`` checked: finite and non-negative, or ``None`` when the arm has an
        expected cost to charge instead."""
        if cost is None:
            if self.costs is None:
                raise ValueError(
                    f"arm {arm}: no cost for this request: score_fn returned scores only and no costs were given; "
                    "return (scores, dollars) from score_fn, pass costs= (expected dollars per example), "
                    "or costs='unit' to count examples"
                )
            return None
        if not (math.isfinite(cost) and cost >= 0):
            raise ValueError(f"arm {arm}: cost must be finite and non-negative, got {cost!r}")
        return float(cost)

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
        """Charge a finished call of ``entry`` (see the module docstring) and keep its ``scored`` cells, in the
        store then in memory; a call that scores the rest of the request closes it as told in the same
        transaction.  An ``attempt`` of id ``-1`` was never started (a tell: one call recorded at once).
        Returns the call's charge."""
        if outcome == "scored":
            charged, as_expected = (attempt.expected if reported is None else reported), 0.0
        elif reported is None:
            charged = as_expected = attempt.expected
        else:
            as_expected = uncosted * attempt.expected / max(attempt.examples.size, 1)
            charged = reported + as_expected
        # A reply the response cache served is charged $0 and listed at its price: an arm is not free for it.
        listed = charged + (0.0 if attempt.usage is None else attempt.usage.list_cost - attempt.usage.cost)
        record = replace(
            attempt,
            outcome=outcome,
            scored=scored,
            reported_cost=reported,
            charged=charged,
            charged_as_expected=as_expected,
            error=error,
            list_cost=listed,
        )
        complete = len(entry.scored) + len(scored) == entry.request.size
        told_cost = entry.charged + charged if complete else None
        record = replace(record, id=self.store.finish_attempt(record, told_cost))
        self._in_flight.pop(record.id, None)
        self.count(entry, record)
        return charged

    def count(self, entry: OpenRequest, attempt: AttemptOutcome) -> None:
        """A finished call's charge and cells, as recorded (live, or replayed from the store)."""
        if entry.id != attempt.request:
            raise ValueError(f"store {self.store.path}: attempt {attempt.id} is not of arm {attempt.arm}'s request")
        self.spent += attempt.charged
        self.spent_by_arm[attempt.arm] = self.spent_by_arm.get(attempt.arm, 0.0) + attempt.charged
        self.charged_as_expected += attempt.charged_as_expected
        self.calls_charged_as_expected += attempt.charged_as_expected > 0
        self.counts[attempt.outcome] += 1
        self._n_scored += len(attempt.scored)
        entry.scored.update(attempt.scored)
        entry.charged += attempt.charged
        entry.listed += attempt.charged if attempt.list_cost is None else attempt.list_cost
