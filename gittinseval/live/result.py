"""The end of a live run: what it recommends, how sure it is, what it spent and why it stopped."""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from gittinseval.core.certificate import Certificate
from gittinseval.live.status import ArmStatus, Recommendation

__all__ = ["LiveResult", "describe_failure"]


def describe_failure(failure: BaseException, where: str | None) -> str:
    """A failed scoring call in one line: ``<where>: <class>: <message>``, ``where`` naming its arm and examples."""
    what = f"{type(failure).__name__}: {failure}"
    return f"{where}: {what}" if where else what


@dataclass
class LiveResult:
    """End of a live run.

    ``stop_reason`` is a :class:`~gittinseval.core.confidence_stop.StopReason` value:
    ``"budget"``, ``"policy"`` (the policy's stopping signal, with ``stop_at_signal``),
    ``"confidence"`` (the confidence stop ``stop_when``), ``"exhausted"`` (the policy
    has nothing more to ask: every example told, or its schedule done); or
    ``"interrupted"`` (Ctrl-C) or ``"error"`` (a scoring call failed deterministically,
    or transiently after its retries, or returned
    invalid scores or cost; the exception is in ``error``, the arm and examples
    of the call in ``error_where``).  ``spent`` is the store's ledger: every
    scoring call that may have reached the provider, over every session, of which
    ``charged_as_expected`` was charged at its expected cost because its cost is
    unknown.  ``recommendation`` is ``None`` when nothing was scored;
    :attr:`failure` then says why.  ``certificate`` says how sure the run is of it
    (:meth:`Evaluator.certificate`).  :attr:`stop_line` says why the run stopped, with
    the failures that stopped it: a run that failed until the budget was spent (timeouts
    charged as expected, say) stops at the budget, not on an error.
    """

    recommendation: Recommendation | None
    spent: float
    budget_usd: float | None
    stop_reason: str
    stop_signal: bool
    trace: dict[str, np.ndarray] = field(repr=False)
    status: ArmStatus = field(repr=False)
    charged_as_expected: float = 0.0
    attempts: dict[str, int] = field(default_factory=dict)
    """Scoring calls by outcome (``scored``, ``failed``, ``lost``), over every session of the store."""
    status_unit: str = "dollars"
    """The money of ``spent``: ``"dollars"``, or ``"unit"`` (examples) under unit costs."""
    store: Path | None = None
    error: BaseException | None = None
    error_where: str | None = None
    warnings: list[str] = field(default_factory=list)
    """Scores all 0 or all 1 (:meth:`Evaluator.score_warnings`): check the grading."""
    diagnostics: dict[str, Any] = field(default_factory=dict)
    """The policy's own facts about the run (:meth:`Policy.diagnostics`), e.g. EB's prior."""
    certificate: Certificate | None = None
    last_failure: str | None = None
    """The last scoring call of this session that failed (:func:`describe_failure`: its arm and examples, the
    failure's class and message), whether it was retried, held back by the budget or stopped the run."""
    calls_charged_as_expected: int = 0
    """The scoring calls charged as expected in whole or part (of ``charged_as_expected``), over every session."""
    limit_wait: float = 0.0
    """Seconds of this session during which a call waited for a provider's rate limit: before it was sent, or
    after a 429 as long as the provider asked (concurrent waits count once)."""
    spent_by_provider: dict[str, float] = field(default_factory=dict)
    """``spent`` by the provider of the arms (a chat task's: its ``base_url``), over every session; empty when
    the scorer names no providers."""

    @property
    def error_message(self) -> str | None:
        """The error that stopped the run, in one line that names the arm and the example."""
        return None if self.error is None else describe_failure(self.error, self.error_where)

    @property
    def unknown_costs(self) -> str | None:
        """At a budget stop with calls of unknown cost (timed out, lost, replies without usage), how many were
        charged as expected and how much: the budget may have been spent on them, not on scores; else ``None``."""
        if self.stop_reason != "budget" or self.charged_as_expected <= 0:
            return None
        money = "" if self.status_unit == "unit" else "$"
        n_calls = self.calls_charged_as_expected
        return (
            f"{n_calls} call{'' if n_calls == 1 else 's'} of unknown cost (timed out, lost or without usage) "
            f"charged as expected: {money}{self.charged_as_expected:.6g} of the {money}{self.spent:.6g} spent"
        )

    @property
    def stop_line(self) -> str:
        """``stopped (<reason>)``, with what spent the budget when calls of unknown cost did
        (:attr:`unknown_costs`) and, unless an error stopped the run (:attr:`error_message` says it), the last
        failed call (:attr:`last_failure`)."""
        clauses = [f"stopped ({self.stop_reason})", self.unknown_costs]
        if self.last_failure is not None and self.error is None:
            clauses.append(f"the last failed call: {self.last_failure}")
        return "; ".join(clause for clause in clauses if clause)

    @property
    def failure(self) -> str | None:
        """Why the run has no recommendation (nothing was scored), else ``None``: the error that stopped it, or
        its :attr:`stop_line`."""
        if self.recommendation is not None:
            return None
        cause = self.stop_line if self.error is None else f"the scoring calls failed: {self.error_message}"
        return f"no recommendation: nothing was scored; {cause}"

    def ledger_line(self) -> str:
        """What was spent, on how many calls, and how much of it is charged as expected (cost unknown); the spend
        per provider when there are several, and the time waited for rate limits when there was any."""
        money = "" if self.status_unit == "unit" else "$"
        budget = "no budget" if self.budget_usd is None else f"a budget of {money}{self.budget_usd:.6g}"
        calls = ", ".join(f"{count} {outcome}" for outcome, count in self.attempts.items())
        n_calls = sum(self.attempts.values())
        by_provider = ", ".join(f"{name} {money}{spent:.6g}" for name, spent in self.spent_by_provider.items())
        return (
            f"spent {money}{self.spent:.6g} of {budget} on {n_calls} scoring call{'' if n_calls == 1 else 's'} "
            f"({calls}); "
            f"charged as expected (calls of unknown cost): {money}{self.charged_as_expected:.6g}"
            + (f"; by provider: {by_provider}" if len(self.spent_by_provider) > 1 else "")
            + (f"; waited {self.limit_wait:.3g} s for rate limits" if self.limit_wait > 0 else "")
        )

    def summary(self) -> dict[str, Any]:
        rec = self.recommendation
        return {
            "recommended": None if rec is None else rec.arm,
            "recommended_name": None if rec is None else rec.name,
            "recommended_label": None if rec is None else rec.label,
            "recommended_mean": None if rec is None else rec.mean,
            "recommended_sd": None if rec is None else math.sqrt(rec.variance),
            "recommended_lcb": None if rec is None else rec.lcb,
            "recommended_value": None if rec is None else rec.value,
            "recommended_value_lcb": None if rec is None else rec.value_lcb,
            "certificate": None if self.certificate is None else self.certificate.as_dict(),
            "spent": self.spent,
            "charged_as_expected": self.charged_as_expected,
            "budget_usd": self.budget_usd,
            "attempts": self.attempts,
            "spent_by_provider": self.spent_by_provider,
            "limit_wait_seconds": self.limit_wait,
            "stop_reason": self.stop_reason,
            "stop_signal": self.stop_signal,
            "n_requests": len(self.trace["step"]),
            "n_cells": int(self.status.n_scored.sum()),
            "store": None if self.store is None else str(self.store),
            "error": self.error_message,
            "last_failure": self.last_failure,
            "calls_charged_as_expected": self.calls_charged_as_expected,
            "failure": self.failure,
            "warnings": self.warnings,
            "diagnostics": self.diagnostics,
        }
