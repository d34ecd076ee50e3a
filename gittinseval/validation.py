"""Checks of configured values that name the setting and its allowed range."""

from __future__ import annotations

import math
from typing import Any

__all__ = ["ConfigError", "fraction_in_unit_interval", "non_negative_int"]


class ConfigError(ValueError):
    """A configured value outside its allowed range; the message names the key."""


def fraction_in_unit_interval(key: str, value: Any) -> float:
    """``value`` as a float in ``(0, 1]``, else a :class:`ConfigError` naming ``key``."""
    try:
        number = float(value)
    except (TypeError, ValueError):
        raise ConfigError(f"{key} must be a number in (0, 1], got {value!r}") from None
    if not (math.isfinite(number) and 0 < number <= 1):
        raise ConfigError(f"{key} must be a number in (0, 1], got {value!r}")
    return number


def non_negative_int(key: str, value: Any) -> int:
    """``value`` as a non-negative int, else a :class:`ConfigError` naming ``key``."""
    if isinstance(value, bool) or not isinstance(value, int | str):
        raise ConfigError(f"{key} must be a non-negative integer, got {value!r}")
    try:
        number = int(value)
    except ValueError:
        raise ConfigError(f"{key} must be a non-negative integer, got {value!r}") from None
    if number < 0:
        raise ConfigError(f"{key} must be a non-negative integer, got {value!r}")
    return number
