"""Time of the certificate and of the confidence stop at K = 1500 arms (a benchmark, not a test).

    python scripts/benchmark_certificate.py [--repeats 21]

States of professional_law (1500 x 1534, unit cost, the general prior): the start of a run
(no scores: every arm at the prior, none can be left out, the slowest case) and GittinsEval's
runs at 0.5 %, 2 % and 10 % of the exhaustive cost.  For each: the median and the range of
the time of :func:`~gittinseval.core.certificate.certify` (default 4096 draws) and of
:meth:`~gittinseval.core.certificate.ConfidenceStop.reached` (0.95, eps 0.01), the number
of arms with ``P(eps-best) > 0`` (the others were left out), and the recommended arm's
certificate.  The first call also draws the cached normals; its time is printed apart.
"""

from __future__ import annotations

import argparse
import statistics
import time

import numpy as np

from gittinseval import GaussianPrior, GittinsPolicy, UnitCost, simulate
from gittinseval.core.certificate import DEFAULT_SAMPLES, certify, posterior_from_statistics
from gittinseval.core.confidence_stop import ConfidenceStop
from gittinseval.data import load_mmlu


def milliseconds(function, repeats: int) -> list[float]:
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        function()
        times.append(1e3 * (time.perf_counter() - start))
    return times


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=21, help="timed calls of each measurement")
    args = parser.parse_args()
    benchmark = load_mmlu("professional_law")
    prior = GaussianPrior()
    n_arms, n_examples = benchmark.scores.shape
    states = {"start (no scores)": (np.zeros(n_arms), np.zeros(n_arms, dtype=np.int64), 0)}
    for fraction in (0.005, 0.02, 0.10):
        policy = GittinsPolicy()
        result = simulate(benchmark, policy, UnitCost()(benchmark), prior, budget_fraction=fraction, seed=0)
        # The run's observed statistics; a record of its cells by any driver gives the same.
        observed = policy.posterior
        states[f"GittinsEval at {100 * fraction:g} %"] = (
            observed.score_sum.copy(),
            observed.n_seen.copy(),
            result.summary["final_recommended"],
        )

    stop = ConfidenceStop(prob_eps_best=0.95, eps=0.01)
    print(
        f"K = {n_arms}, N = {n_examples}, S = {DEFAULT_SAMPLES} draws: SE of a probability <= "
        f"{0.5 / np.sqrt(DEFAULT_SAMPLES):.4f}"
    )
    for name, (score_sum, n_seen, recommended) in states.items():
        posterior = posterior_from_statistics(score_sum, n_seen, n_examples, prior.mean, prior.var)
        first = milliseconds(lambda p=posterior, a=recommended: certify(p, a), 1)[0]
        times = milliseconds(lambda p=posterior, a=recommended: certify(p, a), args.repeats)
        stop_times = milliseconds(lambda p=posterior, a=recommended: stop.reached(p, a), args.repeats)
        cert = certify(posterior, recommended)
        print(
            f"{name:<22} certify median {statistics.median(times):6.1f} ms (min {min(times):5.1f}, "
            f"max {max(times):6.1f}; first call {first:6.1f}); "
            f"stop check median {statistics.median(stop_times):6.2f} ms; "
            f"{np.count_nonzero(cert.arm_prob_eps_best)} arms with P(eps-best) > 0"
        )
        print(f"{'':<22} arm {recommended}: {cert.format()} (SE {cert.prob_best_se:.4f}, {cert.prob_eps_best_se:.4f})")


if __name__ == "__main__":
    main()
