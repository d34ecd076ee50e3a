"""What a simulated run states about its recommendation, at its checkpoints and under several models.

A simulation knows the true full-benchmark means, so it can check what a live run could only
state: whether the certificate's interval covered the recommended arm's mean, whether the arm was
eps-best, and whether a confidence stop fired on a wrong arm.  :class:`CertificateRecord` follows
one run's :class:`~gittinseval.core.session.RunSession` batch by batch and keeps

- the anytime statement after each batch (when the session keeps confidence sequences);
- for each compared posterior model (``compare_certificates``; :mod:`gittinseval.core.certifiers`),
  the first batch at which the run's confidence stop would have fired under it, checked with the
  model's own certifier after every batch (the run itself never ends there), and the same for the
  anytime statement at the stop's ``delta``;

and afterwards states the certificate of the recommendation after any batch, under the run's own
model or a compared one, from the cells observed up to that batch
(:meth:`~gittinseval.core.observations.ObservedCells.up_to`): a certificate is a function of the cells
alone, so it is the one the run would have stated then.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace
from typing import Any

import numpy as np

from gittinseval.core.anytime import EpsBestStatement
from gittinseval.core.certificate import CERTIFICATE_MODELS, posterior_from_statistics
from gittinseval.core.certifiers import Certifier, certifier_for
from gittinseval.core.confidence_stop import ConfidenceStop
from gittinseval.core.objective import shifted_posterior
from gittinseval.core.observations import ObservedCells
from gittinseval.core.posterior import FiniteBenchmarkPosterior
from gittinseval.core.priors import GaussianPrior
from gittinseval.core.session import RunSession

__all__ = ["ANYTIME", "CertificateRecord", "stop_record"]

ANYTIME = "anytime"
"""The key of the anytime statement's stop among the compared models' stops."""


class CertificateRecord:
    """The checkpoint certificates and per-model confidence stops of one simulated run.

    Args:
        session: the run's session (before its first batch).
        prior: the run's prior (the Gaussian surrogate's, with the session's cell variance).
        compare: posterior models to state side by side (each of
            :data:`~gittinseval.core.certificate.CERTIFICATE_MODELS`, once); under the ``value`` objective
            only ``gaussian``, the one posterior that shifts to the value.
    """

    def __init__(self, session: RunSession, prior: GaussianPrior, compare: Sequence[str] = ()) -> None:
        compare = tuple(compare)
        unknown = [model for model in compare if model not in CERTIFICATE_MODELS]
        if unknown or len(set(compare)) != len(compare):
            raise ValueError(
                f"compare_certificates must name each of {', '.join(CERTIFICATE_MODELS)} at most once, "
                f"got {list(compare)}"
            )
        if session.value_offsets is not None and set(compare) - {"gaussian"}:
            raise ValueError(
                "compare_certificates: under the value objective only the gaussian certificate is of the value"
            )
        self.session = session
        self.prior = prior
        self.compare = compare
        settings = session.settings
        stop = settings.stop_when
        self._stop = None if stop is None else replace(stop, mode="posterior")
        self._stop_certifiers: dict[str, Certifier] = (
            {} if stop is None else {model: certifier_for(settings.certificate, model) for model in compare}
        )
        self._anytime_stop = (
            stop is not None
            and session.anytime is not None
            and bool(np.isclose(session.anytime.delta, 1.0 - stop.prob_eps_best))
        )
        self.stop_steps: dict[str, int | None] = dict.fromkeys(self._stop_certifiers)
        if self._anytime_stop:
            self.stop_steps[ANYTIME] = None
        self.statements: list[EpsBestStatement] = []
        self._state_cache: tuple[int, tuple[FiniteBenchmarkPosterior, ObservedCells]] | None = None

    def after_batch(self) -> None:
        """Record what the session states after the batch it just observed."""
        session = self.session
        step = session.n_batches
        if session.anytime is not None:
            self.statements.append(session.anytime_statement())
        stop = self._stop
        if stop is None:
            return
        arm = session.recommended
        for model, certifier in self._stop_certifiers.items():
            if self.stop_steps[model] is None and certifier.stop_reached(
                stop, session.certified_posterior(), session.observed, arm
            ):
                self.stop_steps[model] = step
        if self._anytime_stop and self.stop_steps[ANYTIME] is None and session.anytime.reached(arm, stop.eps):
            self.stop_steps[ANYTIME] = step

    def certificates(
        self,
        positions: dict[str, int | None],
        recommended: np.ndarray,
        true_means: np.ndarray,
        model: str | None = None,
    ) -> dict[str, dict[str, Any] | None]:
        """The certificate after each named batch position (0-based; ``None``: no such batch) under ``model``
        (default: the session's own certifier's), with the recommended arm's ``true_mean`` and ``regret``
        (``true_means``: ``[K]`` the means the regret is of) and, with confidence sequences, the anytime
        statement after that batch.  Under a named ``model`` each also has ``lcb_arm`` and ``lcb_regret``:
        the arm that model's posterior recommends by the LCB rule (the policy's ``kappa``) and its regret,
        to compare the recommendation rules on the same runs."""
        session = self.session
        certifier = certifier_for(session.settings.certificate, model or session.certifier.model)
        best = float(true_means.max())
        stated: dict[str, dict[str, Any] | None] = {}
        for name, position in positions.items():
            if position is None:
                stated[name] = None
                continue
            arm = int(recommended[position])
            certificate = self.certificate_after(position, arm, certifier)
            stated[name] = {**certificate, "true_mean": float(true_means[arm]), "regret": best - float(true_means[arm])}
            if model is not None:
                lcb_arm = certifier.recommend(*self._state_after(position), session.kappa)
                stated[name] |= {"lcb_arm": lcb_arm, "lcb_regret": best - float(true_means[lcb_arm])}
        return stated

    def certificate_after(self, position: int, arm: int, certifier: Certifier | None = None) -> dict[str, Any]:
        """The values of the certificate of ``arm`` (the recommendation then) after batch ``position``
        (0-based), under ``certifier`` (default: the session's), with the anytime statement then when the
        run keeps one."""
        certifier = self.session.certifier if certifier is None else certifier
        posterior, observed = self._state_after(position)
        values = certifier.certify(posterior, observed, arm).as_dict()
        if self.statements:
            values["anytime"] = self.statements[position].as_dict()
        return values

    def _state_after(self, position: int) -> tuple[FiniteBenchmarkPosterior, ObservedCells]:
        """The certified posterior (the Gaussian surrogate's) and the observed cells after batch ``position``,
        cached for the last position asked."""
        cached = self._state_cache
        if cached is not None and cached[0] == position:
            return cached[1]
        session = self.session
        observed = session.observed.up_to(position + 1)
        posterior = posterior_from_statistics(
            observed.score_sum, observed.n_seen, observed.n_examples, self.prior.mean, self.prior.var, session.cell_var
        )
        if session.value_offsets is not None:
            posterior = shifted_posterior(posterior, session.value_offsets)
        self._state_cache = (position, (posterior, observed))
        return posterior, observed


def stop_record(
    stop: ConfidenceStop | None, step: int | None, spend: np.ndarray, cost_pct: np.ndarray, regret: np.ndarray
) -> dict[str, Any] | None:
    """Where a confidence stop fired: its settings and the step, cost and regret then (``None``: no stop set)."""
    if stop is None:
        return None
    fired = step is not None
    return {
        "prob_eps_best": stop.prob_eps_best,
        "eps": stop.eps,
        "mode": stop.mode,
        "step": step,
        "cost": float(spend[step - 1]) if fired else None,
        "cost_pct": float(cost_pct[step - 1]) if fired else None,
        "regret": float(regret[step - 1]) if fired else None,
    }
