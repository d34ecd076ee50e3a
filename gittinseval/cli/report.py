"""The ``gittinseval-report`` command: figures and markdown tables of sweeps and results stores
(:mod:`gittinseval.results.report`), e.g. ``gittinseval-report docs/results/mmlu_buckets.parquet``."""

from __future__ import annotations

import argparse
from pathlib import Path

from gittinseval.results.panels import MMLU_PANELS
from gittinseval.results.regenerate import regenerate
from gittinseval.results.report import FIGURES, write_report
from gittinseval.utils.validation import writable_folder

__all__ = ["build_parser", "main"]


def _default_out(source: Path) -> Path:
    """``<sweep>/report``, or ``outputs/report/<name>`` for a store (not beside it: stores sit in the repository)."""
    return Path("outputs", "report", source.stem) if source.suffix == ".parquet" else source / "report"


def build_parser() -> argparse.ArgumentParser:
    """The command line of ``gittinseval-report``."""
    parser = argparse.ArgumentParser(
        prog="gittinseval-report",
        description="Figures (PNG) and markdown tables of regret, stopping and wall time for sweeps and results "
        "stores (add the runs of sweeps to a store with gittinseval-store export).",
    )
    parser.add_argument(
        "sources", nargs="+", metavar="SOURCE",
        help="sweep directories (any directory holding runs) and results stores (.parquet files)",
    )
    parser.add_argument(
        "--out", default=None,
        help="output directory (default: <first sweep>/report, or outputs/report/<name> for a store)",
    )
    parser.add_argument(
        "--mmlu-panels",
        choices=MMLU_PANELS,
        default="bucket",
        help="pool MMLU subjects by difficulty-size bucket or by size group, or one panel per subject "
        "(default: %(default)s)",
    )
    parser.add_argument("--linear", action="store_true", help="linear cost axis (default: log scale)")
    parser.add_argument(
        "--all", action="store_true",
        help="the SOURCE is a folder of results stores (docs/results): write the report of every store its "
        "reports.yaml lists into that store's folder, the status tables of its paper.yaml and the verdicts of "
        "its claims.yaml (the results pages' tables and figures)",
    )
    parser.add_argument(
        "--versus",
        metavar="LABEL",
        action="append",
        default=[],
        help="also tabulate each method's regret minus LABEL's (e.g. GittinsEval-S), paired by benchmark and "
        "seed; repeat for several",
    )
    parser.add_argument(
        "--figures", choices=FIGURES, default="all",
        help="draw every figure, only the benchmark families' regret figures (families), only the wall-time "
        "figures (timing), or none (default: %(default)s)",
    )
    return parser


def main(argv: list[str] | None = None) -> None:
    parser = build_parser()
    args = parser.parse_args(argv)
    if args.all:
        try:
            for report in regenerate(args.sources[0]):
                print(f"{report.store} -> {report.out}/")
        except (FileNotFoundError, ValueError) as error:
            parser.exit(2, f"gittinseval-report: error: {error}\n")
        return
    out = Path(args.out) if args.out else _default_out(Path(args.sources[0]))
    try:
        writable_folder("--out", out)  # before the runs are read
        report = write_report(args.sources, out, args.mmlu_panels, log_cost=not args.linear,
                              versus=tuple(args.versus), figures=args.figures)
    except (FileNotFoundError, ValueError) as error:
        parser.exit(2, f"gittinseval-report: error: {error}\n")
    print(report.read_text())
    print(f"wrote {out}/ (report.md, a table per panel, the stopping, wall-time and overview tables, the figures)")


if __name__ == "__main__":
    main()
