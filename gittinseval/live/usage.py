"""What a scoring call was billed for each example of its batch: dollars, input, output and reasoning tokens, and
whether the reply came from the response cache."""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

__all__ = ["Usage"]


@dataclass(frozen=True)
class Usage:
    """The bill of a scoring call of ``m`` examples, example by example, in the batch's order.

    A ``score_fn`` that knows what each example cost returns ``(scores, Usage(...))``
    instead of ``(scores, dollars)``, and a failed call raises a
    :class:`~gittinseval.live.ScoringError` with ``usage=``; the call is then charged
    :attr:`cost`, the sum of the examples' dollars, and the store keeps each example's
    bill (``gittinseval-live export`` writes it per cell).

    Attributes:
        dollars: ``[m]`` dollars billed for each example: 0 for one that was never billed
            (refused before it was sent), and for one whose bill is unknown (a timeout, a
            reply without usage), which the failure counts in ``uncosted`` instead.
        tokens_in: ``[m]`` input (prompt) tokens of each example, ``None`` where unknown.
        tokens_out: ``[m]`` output (completion) tokens of each example, ``None`` where unknown.
        tokens_reasoning: ``[m]`` hidden reasoning tokens of each example, ``None`` where unknown
            (the default: a ``score_fn`` that does not report them).  They are a part of
            ``tokens_out``, as OpenAI's ``usage.completion_tokens_details.reasoning_tokens`` are of
            ``completion_tokens``, billed once at the output price: never added to ``tokens_out`` or
            to ``dollars`` a second time.
        cached: ``[m]`` whether each example's reply came from the response cache
            (:mod:`gittinseval.live.response_cache`: billed nothing, ``dollars`` 0, its tokens those of the
            stored reply), ``None`` where unknown (the default: a ``score_fn`` without a cache).
        list_dollars: ``[m]`` what each example would have been billed had it been sent (a cache hit's: its
            stored tokens at its model's price), ``None`` where that is its ``dollars`` (the default).  The
            learned costs learn from it (:attr:`list_cost`), so that a reply served at $0 does not make its arm
            look free; the charge stays ``dollars``.
    """

    dollars: Sequence[float]
    tokens_in: Sequence[int | None]
    tokens_out: Sequence[int | None]
    tokens_reasoning: Sequence[int | None] | None = None
    cached: Sequence[bool | None] | None = None
    list_dollars: Sequence[float | None] | None = None

    def __post_init__(self) -> None:
        dollars = tuple(float(value) for value in self.dollars)
        if not all(math.isfinite(value) and value >= 0 for value in dollars):
            raise ValueError(f"usage: dollars must be finite and non-negative, got {list(dollars)[:5]}")
        object.__setattr__(self, "dollars", dollars)
        if self.tokens_reasoning is None:
            object.__setattr__(self, "tokens_reasoning", (None,) * len(dollars))
        for name in ("tokens_in", "tokens_out", "tokens_reasoning"):
            tokens = tuple(None if value is None else int(value) for value in getattr(self, name))
            if len(tokens) != len(dollars):
                raise ValueError(f"usage: {len(tokens)} {name} for {len(dollars)} examples")
            if any(value is not None and value < 0 for value in tokens):
                raise ValueError(f"usage: {name} must be non-negative, got {list(tokens)[:5]}")
            object.__setattr__(self, name, tokens)
        cached = (None,) * len(dollars) if self.cached is None else tuple(self.cached)
        if len(cached) != len(dollars) or any(flag not in (None, True, False) for flag in cached):
            raise ValueError(f"usage: cached must be {len(dollars)} booleans (or None), got {list(cached)[:5]}")
        object.__setattr__(self, "cached", tuple(None if flag is None else bool(flag) for flag in cached))
        listed = (None,) * len(dollars) if self.list_dollars is None else tuple(
            None if value is None else float(value) for value in self.list_dollars)
        if len(listed) != len(dollars) or not all(v is None or (math.isfinite(v) and v >= 0) for v in listed):
            raise ValueError(f"usage: list_dollars must be {len(dollars)} finite non-negative dollars (or None), got "
                             f"{list(listed)[:5]}")
        object.__setattr__(self, "list_dollars", listed)
        pairs = zip(self.tokens_reasoning, self.tokens_out, strict=True)
        if any(None not in pair and pair[0] > pair[1] for pair in pairs):
            # More reasoning than output tokens: tokens_out (and so the charge) leaves them out.
            raise ValueError(
                f"usage: tokens_reasoning are a part of tokens_out, got {list(self.tokens_reasoning)[:5]} reasoning "
                f"of {list(self.tokens_out)[:5]} output tokens"
            )

    def __len__(self) -> int:
        return len(self.dollars)

    @property
    def cost(self) -> float:
        """The call's dollars: the sum over its examples."""
        return sum(self.dollars)

    @property
    def list_cost(self) -> float:
        """The call's dollars had every example been billed: the sum of its ``list_dollars``, else ``dollars``."""
        return sum(d if listed is None else listed for d, listed in zip(self.dollars, self.list_dollars, strict=True))
