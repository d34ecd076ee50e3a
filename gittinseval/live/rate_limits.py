"""A provider's rate limits: kept before each request, read from a 429, and the time a run waits for them.

A provider caps the requests and the tokens it serves per minute (``rpm``, ``tpm``).
:class:`RateLimiter` keeps both before each request, with aiolimiter's leaky buckets;
:func:`retry_after` reads from a 429's headers how long the provider asks the client to wait
before it sends the request again; :class:`WaitClock` measures the wall time a run spent
waiting for either.
"""

from __future__ import annotations

import contextlib
import email.utils
import math
import re
import time
from collections.abc import Iterator, Mapping
from datetime import UTC, datetime

from aiolimiter import AsyncLimiter

__all__ = ["BURST_SECONDS", "RateLimiter", "WaitClock", "per_minute", "reset_seconds", "retry_after"]

BURST_SECONDS = 1.0
"""A limit lets one second's worth of requests (or tokens) go at once, then keeps its steady rate.  Providers
may enforce a per-minute limit over each second (OpenAI's and Anthropic's rate-limit guides say so), so a
minute's worth sent at once could come back as 429s."""

_DURATION = re.compile(r"(?:\d+(?:\.\d+)?(?:ms|h|m|s))+")
_DURATION_PART = re.compile(r"(\d+(?:\.\d+)?)(ms|h|m|s)")
_UNIT_SECONDS = {"h": 3600.0, "m": 60.0, "s": 1.0, "ms": 0.001}


def per_minute(setting: str, value: float | None) -> float | None:
    """``value`` of the limit ``setting`` (``rpm``, ``tpm``) as a float, ``None`` (no limit) as is; anything but
    a positive finite number is a ``ValueError`` that names the setting."""
    if value is None:
        return None
    try:
        number = float(value)
    except (TypeError, ValueError):
        number = math.nan
    if isinstance(value, bool) or not (math.isfinite(number) and number > 0):
        raise ValueError(f"{setting} must be a positive number per minute, or null for no limit, got {value!r}")
    return number


class RateLimiter:
    """The requests and tokens per minute of one provider, kept before each of its requests.

    Each limit is a leaky bucket (aiolimiter's ``AsyncLimiter``) that holds
    :data:`BURST_SECONDS` of its rate and drains at ``limit / 60`` per second: a request goes
    once one more request, and its expected tokens, fit in both buckets.  An amount larger
    than its bucket (a request of more tokens than a second's worth, any request under
    ``rpm < 60``) is taken a bucketful at a time, so it waits for the whole of it to drain
    at the steady rate.  A limiter's waiters belong to one event loop: make one per loop.

    Args:
        rpm: requests per minute; ``None``: no limit.
        tpm: tokens per minute; ``None``: no limit.
    """

    def __init__(self, rpm: float | None, tpm: float | None) -> None:
        self.rpm = per_minute("rpm", rpm)
        self.tpm = per_minute("tpm", tpm)
        self._buckets = [
            (AsyncLimiter(limit / 60 * BURST_SECONDS, BURST_SECONDS), unit)
            for limit, unit in ((self.rpm, "requests"), (self.tpm, "tokens"))
            if limit is not None
        ]

    async def acquire(self, tokens: float, clock: WaitClock) -> None:
        """Wait until one request of ``tokens`` expected tokens fits both limits, and count it in them; ``clock``
        measures the waits (not a request that fits at once)."""
        for bucket, unit in self._buckets:
            amount = 1.0 if unit == "requests" else float(tokens)
            while amount > 0:
                part = min(amount, bucket.max_rate)
                if bucket.has_capacity(part):
                    await bucket.acquire(part)
                else:
                    with clock.waiting():
                        await bucket.acquire(part)
                amount -= part


def retry_after(headers: Mapping[str, str] | None) -> float | None:
    """Seconds a 429 asks the client to wait before it sends the request again, from its headers.

    In order: ``retry-after-ms`` (milliseconds, as OpenAI sends it), ``Retry-After`` (seconds, or
    an HTTP date), else the longest ``x-ratelimit-reset-requests`` or ``x-ratelimit-reset-tokens``
    (:func:`reset_seconds`) of a limit that is exhausted (its ``x-ratelimit-remaining-*`` is 0 or
    not sent).  ``None`` when none of them says (a value that cannot be read counts as not sent).
    """
    if not headers:
        return None
    sent = {name.lower(): value.strip() for name, value in headers.items()}
    with contextlib.suppress(KeyError, ValueError):
        return _non_negative(float(sent["retry-after-ms"]) / 1000)
    if "retry-after" in sent:
        with contextlib.suppress(ValueError):
            return _non_negative(float(sent["retry-after"]))
        with contextlib.suppress(TypeError, ValueError):
            when = email.utils.parsedate_to_datetime(sent["retry-after"])
            return max(0.0, (when - datetime.now(UTC)).total_seconds())
    resets = [
        reset_seconds(sent.get(f"x-ratelimit-reset-{limit}", ""))
        for limit in ("requests", "tokens")
        if sent.get(f"x-ratelimit-remaining-{limit}", "0") in ("0", "0.0")
    ]
    return max((reset for reset in resets if reset is not None), default=None)


def reset_seconds(text: str) -> float | None:
    """A ``x-ratelimit-reset-*`` value in seconds: a duration such as ``1s``, ``6m0s``, ``20ms`` or ``1h2m3.5s``
    (as OpenAI writes it), or a plain number of seconds; ``None`` for anything else."""
    text = text.strip()
    with contextlib.suppress(ValueError):
        return _non_negative(float(text))
    if not _DURATION.fullmatch(text):
        return None
    return sum(float(number) * _UNIT_SECONDS[unit] for number, unit in _DURATION_PART.findall(text))


def _non_negative(seconds: float) -> float:
    if not (math.isfinite(seconds) and seconds >= 0):
        raise ValueError(f"not a wait: {seconds!r}")
    return seconds


class WaitClock:
    """The wall time during which at least one call waited for a rate limit (concurrent waits count once)."""

    def __init__(self) -> None:
        self._waiting = 0
        self._since = 0.0
        self._total = 0.0

    @contextlib.contextmanager
    def waiting(self) -> Iterator[None]:
        """A wait for a rate limit, from entering to leaving the block."""
        if self._waiting == 0:
            self._since = time.monotonic()
        self._waiting += 1
        try:
            yield
        finally:
            self._waiting -= 1
            if self._waiting == 0:
                self._total += time.monotonic() - self._since

    @property
    def seconds(self) -> float:
        """The wall time waited so far, the wait in progress included."""
        return self._total + (time.monotonic() - self._since if self._waiting else 0.0)
