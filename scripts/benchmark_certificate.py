"""Time of the certificate and of the confidence stop at K = 1500 arms (a benchmark, not a test).

    python scripts/benchmark_certificate.py [--repeats 11] [--subject professional_law] [--run-subject anatomy]

Two measurements, each printed with the machine's load average (other jobs slow it down):

1. **One certificate and one stop check.**  States of an MMLU subject (1500 configurations, unit
   cost): GittinsEval's runs at 0.5 %, 2 % and 10 % of the exhaustive cost.  For each posterior
   model (``gaussian``, the paper's surrogate, and ``eb``, the default) the median and the range of
   the time of one certificate of the recommended arm, and of one confidence-stop check
   ``P(within 0.01) >= 0.95`` by a fresh checker (no cached ceiling: the slowest case).
2. **A run with the confidence stop checked after every batch.**  GittinsEval-G on a subject,
   unit cost, to 10 % of the exhaustive cost: the wall time without a stop and with
   ``stop_when`` under each model and in the anytime mode (the run goes on to the budget, so
   every batch is checked), each the median of ``--run-repeats`` runs, and the ratio to the run
   without.  The issue's targets: a certificate in at most 5 ms, a run with the stop at most 1.25x.
"""

from __future__ import annotations

import argparse
import os
import statistics
import time

from gittinseval import GaussianPrior, GittinsPolicy, UnitCost, simulate
from gittinseval.core.certificate import CertificateSettings, posterior_from_statistics
from gittinseval.core.certifiers import certifier_for
from gittinseval.core.confidence_stop import ConfidenceStop
from gittinseval.core.observations import ObservedCells
from gittinseval.core.session import RunSettings
from gittinseval.data import load_mmlu

STOP = ConfidenceStop(prob_eps_best=0.95, eps=0.01)


def milliseconds(function, repeats: int) -> list[float]:
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        function()
        times.append(1e3 * (time.perf_counter() - start))
    return times


def load() -> str:
    return "load average " + ", ".join(f"{value:.2f}" for value in os.getloadavg())


def states(benchmark, prior: GaussianPrior) -> dict[str, tuple[ObservedCells, int]]:
    """The observed cells and the recommendation of GittinsEval-G's runs at three shares of the budget."""
    found = {}
    for fraction in (0.005, 0.02, 0.10):
        policy = GittinsPolicy()
        result = simulate(benchmark, policy, UnitCost()(benchmark), prior, budget_fraction=fraction, seed=0)
        observed = ObservedCells(benchmark.n_arms, benchmark.n_examples, binary=True, features=benchmark.features)
        posterior = policy.posterior
        observed.score_sum[:] = posterior.score_sum
        observed.n_seen[:] = posterior.n_seen
        found[f"GittinsEval at {100 * fraction:g} %"] = (observed, result.summary["final_recommended"])
    return found


def one_certificate(args: argparse.Namespace) -> None:
    benchmark = load_mmlu(args.subject)
    prior = GaussianPrior()
    print(f"1. One certificate and one stop check: mmlu/{args.subject}, K = {benchmark.n_arms}, "
          f"N = {benchmark.n_examples} ({load()})")
    for name, (observed, arm) in states(benchmark, prior).items():
        posterior = posterior_from_statistics(
            observed.score_sum, observed.n_seen, observed.n_examples, prior.mean, prior.var
        )
        for model in ("gaussian", "eb"):
            settings = CertificateSettings(model=model)
            state = (posterior, observed, arm)
            certify_times = milliseconds(lambda s=settings, x=state: certifier_for(s).certify(*x), args.repeats)
            stop_times = milliseconds(lambda s=settings, x=state: certifier_for(s).stop_reached(STOP, *x), args.repeats)
            certificate = certifier_for(settings).certify(*state)
            print(
                f"  {name:<20} {model:<8} certify median {statistics.median(certify_times):7.1f} ms "
                f"(min {min(certify_times):6.1f}, max {max(certify_times):7.1f}); stop check median "
                f"{statistics.median(stop_times):7.2f} ms; {certificate.format()}"
            )


def run_with_stops(args: argparse.Namespace) -> None:
    benchmark = load_mmlu(args.run_subject)
    costs = UnitCost()(benchmark)
    print(f"2. A run of GittinsEval-G to 10 % with the stop checked after every batch: mmlu/{args.run_subject} "
          f"({load()})")
    variants = {
        "no stop": RunSettings(),
        "gaussian stop": RunSettings(certificate=CertificateSettings(model="gaussian"), stop_when=STOP),
        "eb stop": RunSettings(certificate=CertificateSettings(model="eb"), stop_when=STOP),
        "anytime stop": RunSettings(stop_when=ConfidenceStop(prob_eps_best=0.95, eps=0.01, mode="anytime")),
    }
    baseline = None
    for name, settings in variants.items():
        walls = []
        for _ in range(args.run_repeats):
            result = simulate(benchmark, GittinsPolicy(), costs, GaussianPrior(), budget_fraction=0.1, seed=0,
                              settings=settings)
            walls.append(result.summary["wall_time_s"])
        wall = statistics.median(walls)
        baseline = wall if baseline is None else baseline
        steps = result.summary["n_steps"]
        print(f"  {name:<14} median {wall:7.2f} s over {args.run_repeats} runs ({steps} batches; "
              f"{1e3 * wall / steps:.3f} ms per batch): {wall / baseline:5.2f}x the run without a stop")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=11, help="timed calls of each certificate and check")
    parser.add_argument("--subject", default="professional_law", help="MMLU subject of the certificate states")
    parser.add_argument("--run-subject", default="anatomy", help="MMLU subject of the runs with a stop")
    parser.add_argument("--run-repeats", type=int, default=3, help="runs of each variant")
    args = parser.parse_args()
    one_certificate(args)
    run_with_stops(args)


if __name__ == "__main__":
    main()
