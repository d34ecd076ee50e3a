"""What data the package has: ``gittinseval-data list`` (or ``python -m gittinseval.data list``),
and the distributions of its arms' quality: ``gittinseval-data quality gsm8k piqa mmlu``."""

from __future__ import annotations

import argparse
from dataclasses import dataclass
from pathlib import Path

from gittinseval.data._files import read_csv
from gittinseval.data.alpacaeval import load_alpacaeval, load_alpacaeval_paper
from gittinseval.data.banditeval import load_gsm8k, load_piqa
from gittinseval.data.benchmark import Benchmark
from gittinseval.data.mmlu import load_mmlu

__all__ = ["CatalogEntry", "catalog", "main"]


@dataclass(frozen=True)
class CatalogEntry:
    """One benchmark of the ``benchmark=`` config group as bundled."""

    name: str
    n_arms: str
    n_examples: str
    values: str
    status: str
    source: str
    license: str


def _entry(name: str, benchmark: Benchmark, status: str, n_examples: str | None = None) -> CatalogEntry:
    return CatalogEntry(
        name=name,
        n_arms=str(benchmark.n_arms),
        n_examples=n_examples or str(benchmark.n_examples),
        values="binary" if benchmark.binary else "continuous",
        status=status,
        source=benchmark.source,
        license=benchmark.license,
    )


def catalog() -> list[CatalogEntry]:
    """Every bundled benchmark with its shape, value type, provenance and licence."""
    sizes = sorted(int(row["n_examples"]) for row in read_csv("mmlu/subjects.csv"))
    paper = load_alpacaeval_paper()
    n_synth = len(paper.details["synthesized_arms"])
    return [
        _entry(
            "mmlu (benchmark.subject=<57 subjects>)",
            load_mmlu("abstract_algebra"),
            "real row sums, synthesized item assignment",
            n_examples=f"{sizes[0]}-{sizes[-1]}",
        ),
        _entry("alpacaeval", load_alpacaeval(), "real"),
        _entry("alpacaeval_paper", paper, f"{paper.n_arms - n_synth} real rows, {n_synth} synthesized (stand-in)"),
        _entry("gsm8k (benchmark.matrix_seed=1..5)", load_gsm8k(1), "stand-in (real configurations and prices)"),
        _entry("piqa (benchmark.matrix_seed=1..5)", load_piqa(1), "stand-in (real configurations and prices)"),
        CatalogEntry(
            name="matrix (benchmark.path=<.npy/.npz/.csv/.parquet> benchmark.costs=<.csv/.json/.npy>)",
            n_arms="K",
            n_examples="N",
            values="binary or continuous in [0, 1]",
            status="your own",
            source="your file",
            license="yours",
        ),
    ]


QUALITY_FAMILIES = ("gsm8k", "piqa", "mmlu")
# The paper's names of the MMLU prior buckets (App. "MMLU prior buckets").
MMLU_PRIOR_BUCKETS = {"easy": "high", "medium": "medium", "hard": "low"}


def write_arm_quality(families: list[str], out: str | Path) -> list[Path]:
    """The paper's arm-quality figures: GSM8K and PIQA per matrix seed, MMLU per prior bucket."""
    from gittinseval.data.mmlu import mmlu_subjects
    from gittinseval.plotting import plot_arm_quality

    out = Path(out)
    figures = []
    for family in families:
        if family in ("gsm8k", "piqa"):
            loader = load_gsm8k if family == "gsm8k" else load_piqa
            benchmarks = [loader(seed) for seed in range(1, 6)]
            title = f"{family.upper()} arm quality per matrix seed [stand-in data]"
            figures.append(plot_arm_quality(benchmarks, out / f"arm_quality_{family}.png", title, [None] * 5))
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
        help="list: print every benchmark; quality: the arm-quality figures of the benchmark families given",
    )
    parser.add_argument("families", nargs="*", help=f"for quality: any of {', '.join(QUALITY_FAMILIES)} (default: all)")
    parser.add_argument(
        "--out", default="outputs/arm_quality", help="for quality: output folder (default: %(default)s)"
    )
    args = parser.parse_args(argv)
    if args.command == "quality":
        try:
            figures = write_arm_quality(args.families or list(QUALITY_FAMILIES), args.out)
        except ValueError as error:
            parser.exit(2, f"gittinseval-data: error: {error}\n")
        for figure in figures:
            print(f"wrote {figure}")
        return
    for entry in catalog():
        print(f"{entry.name}")
        print(f"  K={entry.n_arms} N={entry.n_examples} values={entry.values} data={entry.status}")
        print(f"  source: {entry.source}")
        print(f"  licence: {entry.license}")


if __name__ == "__main__":
    main()
