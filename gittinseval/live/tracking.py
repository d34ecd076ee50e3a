"""Log a live run to the configured ``logger`` as it goes (W&B, or nothing).

What is logged after every tell, against ``spent`` (dollars, or examples under
unit costs) as the step metric:

- ``recommended``: the policy's recommended arm;
- ``recommended_mean`` and ``recommended_lcb``: ``M`` and ``M - kappa sqrt(V)``
  of that arm under the run's finite-benchmark posterior (the same for every
  policy; for GittinsEval the score its recommendation maximises, for the
  other policies the posterior's view of the arm they chose);
- ``recommended_value`` and ``recommended_value_lcb``: under the ``value`` objective,
  the arm's value ``M - mu p`` and its LCB, which the run recommends by (the
  certificate's figures are then of the value);
- ``in_flight``: requests issued and not yet told;
- ``stop_signal``: 1 once the policy's stopping signal has fired;
- ``n_requests``: told requests so far;
- ``charged_as_expected``: the part of ``spent`` charged at the expected cost
  (scoring calls of unknown cost: lost in a crash, timed out, unreported usage);
- ``prob_best``, ``prob_eps_best``, ``interval_lower`` and ``interval_upper``: the
  recommended arm's certificate (:meth:`~gittinseval.live.Evaluator.certificate`), which
  the driver computes again at most once a second, so a value may be up to a second old.

The W&B run id is kept in the store, so a resumed run continues the same W&B
run.  Only the composed config and these figures are logged: never the
environment, API keys or request headers.
"""

from __future__ import annotations

import logging
import os
import secrets
from pathlib import Path
from typing import Any

from gittinseval.core.certificate import Certificate
from gittinseval.live.evaluator import Evaluator
from gittinseval.sim.loggers import NullLogger, WandbLogger

__all__ = ["LiveTracker", "start_tracking"]

log = logging.getLogger(__name__)

RUN_ID_KEY = "wandb_run_id"


class LiveTracker:
    """Sends each step of a live run to a W&B run (or nowhere when ``run`` is ``None``)."""

    def __init__(self, run: Any = None) -> None:
        self.run = run

    def log(self, evaluator: Evaluator, certificate: Certificate | None = None) -> None:
        """Log the run's figures now, with ``certificate``'s if one is given."""
        if self.run is None:
            return
        rec = evaluator.recommend()
        metrics = {
            "spent": evaluator.spent,
            "charged_as_expected": evaluator.charged_as_expected,
            "in_flight": evaluator.n_outstanding,
            "stop_signal": int(evaluator.stop_signal),
            "n_requests": len(evaluator.trace()["step"]),
        }
        if rec is not None:
            metrics.update(recommended=rec.arm, recommended_mean=rec.mean, recommended_lcb=rec.lcb)
            if rec.value is not None:
                metrics.update(recommended_value=rec.value, recommended_value_lcb=rec.value_lcb)
            self.run.summary["recommended_label"] = rec.label
        if certificate is not None:
            metrics.update(
                prob_best=certificate.prob_best,
                prob_eps_best=certificate.prob_eps_best,
                interval_lower=certificate.lower,
                interval_upper=certificate.upper,
            )
        self.run.log(metrics)

    def finish(self, summary: dict[str, Any]) -> None:
        if self.run is None:
            return
        self.run.summary.update({key: value for key, value in summary.items() if value is not None})
        self.run.finish()


def start_tracking(
    logger: Any, evaluator: Evaluator, config: dict[str, Any] | None, directory: str | Path
) -> LiveTracker:
    """A tracker for ``logger`` (a ``logger=`` group object, or ``None``).

    With a :class:`~gittinseval.sim.loggers.WandbLogger`, starts (or, when the store
    has one, resumes) the W&B run in ``directory``.
    """
    if logger is None or isinstance(logger, NullLogger):
        return LiveTracker()
    if not isinstance(logger, WandbLogger):
        raise ValueError(f"logger {type(logger).__name__} cannot log live runs; use logger=wandb or logger=none")
    run_id = evaluator.store.get_meta(RUN_ID_KEY)
    resuming = run_id is not None
    if not resuming:
        run_id = secrets.token_hex(8)
        evaluator.store.set_meta(RUN_ID_KEY, run_id)
    directory = Path(directory)
    directory.mkdir(parents=True, exist_ok=True)
    # W&B advertises Weave on stderr whenever the openai client is imported; a live run traces no LLM calls there.
    os.environ.setdefault("WANDB_DISABLE_WEAVE", "true")
    run = logger.start_run(directory, id=run_id, resume="allow", job_type="live", group=logger.group, config=config)
    run.define_metric("spent")
    metrics = (
        "recommended", "recommended_mean", "recommended_lcb", "recommended_value", "recommended_value_lcb",
        "in_flight", "stop_signal", "n_requests",
    )
    certificate = ("prob_best", "prob_eps_best", "interval_lower", "interval_upper")
    for metric in (*metrics, *certificate, "charged_as_expected"):
        run.define_metric(metric, step_metric="spent")
    log.info("%s W&B run %s in %s", "resuming" if resuming else "started", run_id, directory)
    return LiveTracker(run)
