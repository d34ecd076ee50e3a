"""Accuracy of every stage's root against a fine plain grid (a benchmark, not a test).

    python scripts/benchmark_root_accuracy.py [--grid-points 1025] [--quick]

For each chain (N, B, v0) and cost per example, the reference is the plain-grid
program (``refine=False``) on 2^16 + 1 and 2^17 + 1 points, Richardson-extrapolated
(its error falls as the spacing squared).  Prints, per chain and cost, the largest
error of the default roots (``refine=True``) and of the paper's plain grid at the
same ``P``, in units of the target ``max(1e-6, 1 % of the stage cost)``, the stage
where it occurs, the reference's own change between its two resolutions in the
same units, and the number of stages over the target.  The full list takes a few
minutes on 2 cores; ``--quick`` keeps the short chains.
"""

from __future__ import annotations

import argparse
import itertools

import numpy as np

from gittinseval import root_schedule
from gittinseval.core.roots import EmpiricalTargetChain

CHAINS = [(60, 4), (200, 8), (500, 1), (1534, 8), (1534, 32)]
PRIOR_VARS = [0.04, 0.005]
COSTS = [1e-8, 1e-6, 1e-4, 1e-2]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--grid-points", type=int, default=1025,
                        help="P of the roots under test (default: %(default)s)")
    parser.add_argument("--quick", action="store_true", help="only the chains of at most 200 examples")
    args = parser.parse_args()
    chains = [chain for chain in CHAINS if not args.quick or chain[0] <= 200]
    print("  N    B  v0     cost    refined/target (stage)  plain/target (stage)  reference change  stages over")
    for (n_examples, batch_size), prior_var, cost in itertools.product(chains, PRIOR_VARS, COSTS):
        chain = EmpiricalTargetChain(n_examples, batch_size, prior_var)
        coarse, fine = (root_schedule(n_examples, batch_size, prior_var, cost, grid_points=2**k + 1, refine=False)
                        for k in (16, 17))
        reference = fine + (fine - coarse) / 3
        target = np.maximum(1e-6, 0.01 * cost * chain.batch_sizes)
        refined = np.abs(root_schedule(n_examples, batch_size, prior_var, cost, grid_points=args.grid_points)
                         - reference) / target
        plain = np.abs(root_schedule(n_examples, batch_size, prior_var, cost, grid_points=args.grid_points,
                                     refine=False) - reference) / target
        worst = int(refined.argmax())
        reference_change = np.abs(fine - coarse)[worst] / target[worst]
        print(f"{n_examples:5d} {batch_size:3d}  {prior_var:<6g} {cost:<7g} {refined.max():10.3f} ({worst:4d})"
              f"      {plain.max():10.1f} ({int(plain.argmax()):4d})   {reference_change:10.3f}"
              f"   {int((refined > 1).sum()):5d} of {chain.horizon}", flush=True)


if __name__ == "__main__":
    main()
