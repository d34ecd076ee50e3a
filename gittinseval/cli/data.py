"""The ``gittinseval-data`` command: ``gittinseval-data list`` prints what data the package has
(or ``python -m gittinseval.cli.data list``; ``list mmlu piqa``: only those benchmarks), and
``gittinseval-data quality gsm8k piqa mmlu`` draws the distributions of its arms' quality.

It sits above both the data layer and the plotting layer, which never import each other.
"""

from __future__ import annotations

import argparse
from pathlib import Path

from gittinseval.data import load_gsm8k, load_mmlu, load_piqa, mmlu_subjects
from gittinseval.data.banditeval import MATRIX_SEEDS
from gittinseval.data.catalog import catalog
from gittinseval.results.plotting import plot_arm_quality
from gittinseval.utils.validation import writable_folder

__all__ = ["main", "write_arm_quality"]

QUALITY_FAMILIES = ("gsm8k", "piqa", "mmlu")
# The paper's names of the MMLU prior buckets (App. "MMLU prior buckets").
MMLU_PRIOR_BUCKETS = {"easy": "high", "medium": "medium", "hard": "low"}


def write_arm_quality(families: list[str], out: str | Path) -> list[Path]:
    """The paper's arm-quality figures: GSM8K and PIQA per matrix seed, MMLU per prior bucket."""
    out = Path(out)
    figures = []
    for family in families:
        if family in ("gsm8k", "piqa"):
            loader = load_gsm8k if family == "gsm8k" else load_piqa
            benchmarks = [loader(seed) for seed in MATRIX_SEEDS]
            title = f"{family.upper()} arm quality per matrix seed [stand-in data]"
            means = [None] * len(benchmarks)
            figures.append(plot_arm_quality(benchmarks, out / f"arm_quality_{family}.png", title, means))
            continue
        if family != "mmlu":
            raise ValueError(f"unknown benchmark family {family!r}; choose from {', '.join(QUALITY_FAMILIES)}")
        subjects = [load_mmlu(subject) for subject in mmlu_subjects()]
        for difficulty, bucket in MMLU_PRIOR_BUCKETS.items():
            members = [b for b in subjects if b.details["difficulty"] == difficulty]
            title = f"MMLU {bucket}-prior bucket ({difficulty} subjects)"
            means = [b.specific_prior[0] for b in members]
            figures.append(plot_arm_quality(members, out / f"arm_quality_mmlu_{bucket}.png", title, means))
    return figures


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="gittinseval-data", description="The benchmarks bundled with GittinsEval.")
    parser.add_argument(
        "command", choices=["list", "quality"],
        help="list: print the benchmarks given (default: every one); quality: the arm-quality figures of the "
        "benchmark families given",
    )
    parser.add_argument(
        "families",
        nargs="*",
        metavar="names",
        help=f"for list: options of benchmark= (conf/benchmark/); for quality: any of {', '.join(QUALITY_FAMILIES)} "
        "(default: all)",
    )
    parser.add_argument(
        "--out", default="outputs/arm_quality", help="for quality: output folder (default: %(default)s)"
    )
    args = parser.parse_args(argv)
    if args.command == "quality":
        try:
            writable_folder("--out", args.out)  # before the benchmarks are read and the figures drawn
            figures = write_arm_quality(args.families or list(QUALITY_FAMILIES), args.out)
        except ValueError as error:
            parser.exit(2, f"gittinseval-data: error: {error}\n")
        except OSError as error:  # a folder the checks let through (/proc, a full disk): the figures cannot be saved
            reason = (error.strerror or str(error)).lower()
            parser.exit(2, f"gittinseval-data: error: --out {args.out}: cannot write {error.filename} ({reason}); "
                        "choose another --out\n")
        for figure in figures:
            print(f"wrote {figure}")
        return
    try:
        entries = catalog(args.families or None)
    except ValueError as error:
        parser.exit(2, f"gittinseval-data: error: {error}\n")
    for entry in entries:
        print(f"{entry.name}")
        print(f"  K={entry.n_arms} N={entry.n_examples} values={entry.values} data={entry.status}")
        print(f"  source: {entry.source}")
        print(f"  licence: {entry.license}")


if __name__ == "__main__":
    main()
