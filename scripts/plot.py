"""Draw the regret figure of a sweep.

    python scripts/plot.py outputs/multirun/<date> [--out fig.png]

Aggregates every run (``summary.json`` + ``trace.csv``) under the directory per
policy label as in the paper: 350-point grid over the observed cost range, no
extrapolation, mean ± 1 standard error, dashed lines at the mean stopping cost.
"""

from __future__ import annotations

import argparse

from gittinseval.plotting import plot_sweep


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("sweep_dir", help="a Hydra multirun directory (or any directory of runs)")
    parser.add_argument("--out", default=None, help="PNG to write (default: <sweep_dir>/regret.png)")
    args = parser.parse_args()
    figures, curves = plot_sweep(args.sweep_dir, args.out)
    for curve in curves:
        stop = "no signal" if curve.stop_pct is None else f"mean stop {curve.stop_pct:.3g}%"
        print(f"{curve.label:<28} runs={curve.n_runs:<4} final mean regret={curve.mean[-1]:.4g}  {stop}")
    for figure in figures:
        print(f"wrote {figure}")


if __name__ == "__main__":
    main()
