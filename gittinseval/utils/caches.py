"""Caches that the runs of one process share, and a way to forget them all.

A sweep's worker process runs many jobs; a policy's precomputations that depend only on
the run's settings (GittinsEval's root tables, LRF's partner indices) are cached across
them, so only the first run of a setting pays for them.  A timing study wants every run
to pay, as a fresh process does: :func:`clear_run_shared_caches` forgets every cache made
with :func:`run_shared_cache` (data loading is not one of them: the paper's timing leaves
out benchmark construction).
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import TypeVar

__all__ = ["clear_run_shared_caches", "run_shared_cache"]

Function = TypeVar("Function", bound=Callable)

_CACHES: list[functools._lru_cache_wrapper] = []


def run_shared_cache(maxsize: int) -> Callable[[Function], Function]:
    """``functools.lru_cache(maxsize)``, registered for :func:`clear_run_shared_caches`."""

    def decorate(function: Function) -> Function:
        cached = functools.lru_cache(maxsize=maxsize)(function)
        _CACHES.append(cached)
        return cached

    return decorate


def clear_run_shared_caches() -> None:
    """Empty every cache of :func:`run_shared_cache` in this process (their statistics too)."""
    for cache in _CACHES:
        cache.cache_clear()
