"""The end of a live run: what it recommends, how sure it is, what it spent and why it stopped."""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from gittinseval.core.certificate import Certificate
from gittinseval.live.status import ArmStatus, Recommendation

__all__ = ["LiveResult"]


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
    (:meth:`Evaluator.certificate`).
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

    @property
    def error_message(self) -> str | None:
        """The error that stopped the run, in one line that names the arm and the example."""
        if self.error is None:
            return None
        what = f"{type(self.error).__name__}: {self.error}"
        return f"{self.error_where}: {what}" if self.error_where else what

    @property
    def failure(self) -> str | None:
        """Why the run has no recommendation (nothing was scored), else ``None``."""
        if self.recommendation is not None:
            return None
        failed = self.error is not None
        cause = f"the scoring calls failed: {self.error_message}" if failed else f"stopped ({self.stop_reason})"
        return f"no recommendation: nothing was scored; {cause}"

    def ledger_line(self) -> str:
        """What was spent, on how many calls, and how much of it is charged as expected (cost unknown)."""
        money = "" if self.status_unit == "unit" else "$"
        budget = "no budget" if self.budget_usd is None else f"a budget of {money}{self.budget_usd:.6g}"
        calls = ", ".join(f"{count} {outcome}" for outcome, count in self.attempts.items())
        n_calls = sum(self.attempts.values())
        return (
            f"spent {money}{self.spent:.6g} of {budget} on {n_calls} scoring call{'' if n_calls == 1 else 's'} "
            f"({calls}); "
            f"charged as expected (calls of unknown cost): {money}{self.charged_as_expected:.6g}"
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
            "stop_reason": self.stop_reason,
            "stop_signal": self.stop_signal,
            "n_requests": len(self.trace["step"]),
            "n_cells": int(self.status.n_scored.sum()),
            "store": None if self.store is None else str(self.store),
            "error": self.error_message,
            "failure": self.failure,
            "warnings": self.warnings,
            "diagnostics": self.diagnostics,
        }
