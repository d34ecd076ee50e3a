"""Wording shared by the messages of the command-line apps."""

from __future__ import annotations

__all__ = ["count"]


def count(number: int, noun: str) -> str:
    """``number`` and ``noun``, with an ``s`` unless ``number`` is 1: ``count(1, "run") == "1 run"``."""
    return f"{number} {noun}{'' if number == 1 else 's'}"
