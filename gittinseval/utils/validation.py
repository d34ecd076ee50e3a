"""Checks of configured values that name the setting and its allowed range."""

from __future__ import annotations

import math
import os
from pathlib import Path
from typing import Any

import numpy as np

from gittinseval.utils.errors import UsageError

__all__ = [
    "ConfigError",
    "boolean",
    "positive_finite_values",
    "fraction_in_unit_interval",
    "non_negative_float",
    "non_negative_int",
    "positive_float",
    "positive_int",
    "writable_folder",
]


class ConfigError(UsageError, ValueError):
    """A configured value outside its allowed range; the message names the key."""


def boolean(key: str, value: Any) -> bool:
    """``value`` if it is ``True`` or ``False``, else a :class:`ConfigError` naming ``key`` (a string such as
    ``"false"`` would otherwise be true)."""
    if not isinstance(value, bool | np.bool_):
        raise ConfigError(f"{key} must be true or false, got {value!r}")
    return bool(value)


def fraction_in_unit_interval(key: str, value: Any) -> float:
    """``value`` as a float in ``(0, 1]``, else a :class:`ConfigError` naming ``key``."""
    try:
        number = float(value)
    except (TypeError, ValueError):
        raise ConfigError(f"{key} must be a number in (0, 1], got {value!r}") from None
    if not (math.isfinite(number) and 0 < number <= 1):
        raise ConfigError(f"{key} must be a number in (0, 1], got {value!r}")
    return number


def _integer_at_least(key: str, value: Any, minimum: int, words: str) -> int:
    # Integral floats (8.0) pass: YAML and arithmetic in configs produce them.
    if isinstance(value, bool):
        raise ConfigError(f"{key} must be {words}, got {value!r}")
    try:
        number = float(value)
    except (TypeError, ValueError):
        raise ConfigError(f"{key} must be {words}, got {value!r}") from None
    if not (number.is_integer() and number >= minimum):
        raise ConfigError(f"{key} must be {words}, got {value!r}")
    return int(number)


def non_negative_int(key: str, value: Any) -> int:
    """``value`` as an int ``>= 0``, else a :class:`ConfigError` naming ``key``."""
    return _integer_at_least(key, value, 0, "a non-negative integer")


def positive_int(key: str, value: Any) -> int:
    """``value`` as an int ``>= 1``, else a :class:`ConfigError` naming ``key``."""
    return _integer_at_least(key, value, 1, "a positive integer")


def _finite_real(key: str, value: Any, words: str) -> float:
    if isinstance(value, bool):
        raise ConfigError(f"{key} must be {words}, got {value!r}")
    try:
        number = float(value)
    except (TypeError, ValueError):
        raise ConfigError(f"{key} must be {words}, got {value!r}") from None
    if not math.isfinite(number):
        raise ConfigError(f"{key} must be {words}, got {value!r}")
    return number


def positive_float(key: str, value: Any) -> float:
    """``value`` as a finite float ``> 0``, else a :class:`ConfigError` naming ``key``."""
    number = _finite_real(key, value, "positive and finite")
    if number <= 0:
        raise ConfigError(f"{key} must be positive and finite, got {value!r}")
    return number


def non_negative_float(key: str, value: Any) -> float:
    """``value`` as a finite float ``>= 0``, else a :class:`ConfigError` naming ``key``."""
    number = _finite_real(key, value, "non-negative and finite")
    if number < 0:
        raise ConfigError(f"{key} must be non-negative and finite, got {value!r}")
    return number


def positive_finite_values(values: Any, name: str, item: str = "entries") -> np.ndarray:
    """``values`` as a float64 array whose entries are all positive and finite.

    Otherwise a ``ValueError`` naming ``name`` and the first bad positions (``item``:
    what a position is, e.g. "arms").  Costs and prices of every layer go through
    this one check.
    """
    array = np.asarray(values, dtype=np.float64)
    bad = np.flatnonzero(~(np.isfinite(array) & (array > 0)))
    if bad.size:
        more = " ..." if bad.size > 20 else ""
        raise ValueError(
            f"{name} must be positive and finite; bad {item} {bad[:20].tolist()}{more} "
            f"with values {array.reshape(-1)[bad[:5]].tolist()}"
        )
    return array


def writable_folder(key: str, given: Any, folder: str | Path | None = None) -> Path:
    """``folder`` (default: ``given``, an output folder) if it is a folder that can be written or created, else a
    :class:`ConfigError` naming ``key`` (``--out``), what was ``given`` and why.

    Checked before any work, and without creating anything: the apps would otherwise fail at their
    first write, after the work, with the operating system's traceback.
    """
    path = Path(given if folder is None else folder)
    existing = next(part for part in (path.absolute(), *path.absolute().parents) if part.exists())
    # The usual cause, a file where a folder should be, is named as such: mkdir's own words
    # ("File exists", "Not a directory") leave the user to guess which part of the path is meant.
    if not existing.is_dir():
        reason = f"{existing} is a file"
    elif not os.access(existing, os.W_OK | os.X_OK):
        reason = f"{existing} is not writable"
    else:
        return path
    raise ConfigError(f"{key} {given}: cannot write the folder {path}: {reason}; choose another {key}")
