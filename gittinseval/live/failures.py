"""Failed scoring calls: what was scored and paid before the failure, and whether a retry can help."""

from __future__ import annotations

from collections.abc import Sequence

from gittinseval.live.usage import Usage

__all__ = ["NonRetryableError", "ScoringError", "TransientError", "is_transient"]


class ScoringError(Exception):
    """A scoring call that failed, with what it did before failing.

    Args:
        message: what went wrong, naming the endpoint or the field.
        scores: one entry per example of the batch: its score, or ``None`` where it
            was not scored; ``None``: nothing was scored.
        cost: the dollars charged by the calls known to be billed; ``None``: unknown,
            and the driver charges the whole batch at its expected cost.
        uncosted: calls beyond ``cost`` that may have been billed at a cost nobody
            reported (a timeout, a reply without usage); each is charged the expected
            cost of one example.
        example: the position in the batch of the example the failure is about, if one.
        usage: what each example of the batch was billed (:class:`~gittinseval.live.usage.Usage`),
            if known; its sum is the ``cost`` when no ``cost`` is given.
        retry_after: seconds the provider asked to wait before the call is sent again (a 429's
            ``Retry-After``), which the driver waits in place of its own backoff; ``None``: it did not say.
    """

    def __init__(
        self,
        message: str,
        *,
        scores: Sequence[float | None] | None = None,
        cost: float | None = None,
        uncosted: int = 0,
        example: int | None = None,
        usage: Usage | None = None,
        retry_after: float | None = None,
    ) -> None:
        super().__init__(message)
        self.retry_after = retry_after
        self.scores = None if scores is None else list(scores)
        self.cost = usage.cost if cost is None and usage is not None else cost
        self.uncosted = int(uncosted)
        self.example = example
        self.usage = usage


class TransientError(ScoringError):
    """A failure a retry may fix: a connection error, a timeout, HTTP 429 or 5xx."""


class NonRetryableError(ScoringError):
    """A failure a retry cannot fix (bad data, a rejected request, an unparseable or
    incomplete reply): the run stops at once, keeping what was scored."""


def is_transient(failure: BaseException) -> bool:
    """Whether a failure of a scoring call is worth retrying.

    Transient: :class:`TransientError`, and the standard library's ``ConnectionError``
    and ``TimeoutError`` raised by a user's ``score_fn``.  Everything else (a
    ``KeyError`` of a dataset line without a field, a ``ValueError``, a
    :class:`NonRetryableError`) is deterministic: sending the same request again
    would fail the same way, and would be paid for again.
    """
    if isinstance(failure, ScoringError):
        return isinstance(failure, TransientError)
    return isinstance(failure, ConnectionError | TimeoutError)
