"""What data the package has, as printed by ``gittinseval-data list`` (:mod:`gittinseval.cli.data`)."""

from __future__ import annotations

from dataclasses import dataclass

from gittinseval.data._files import read_csv
from gittinseval.data.alpacaeval import load_alpacaeval, load_alpacaeval_paper
from gittinseval.data.banditeval import load_gsm8k, load_piqa
from gittinseval.data.benchmark import Benchmark
from gittinseval.data.mmlu import load_mmlu
from gittinseval.data.zeroeval import load_crux_zeroeval, load_gsm8k_zeroeval, load_math_l5_zeroeval

__all__ = ["CatalogEntry", "catalog"]


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
        _entry("gsm8k_zeroeval", load_gsm8k_zeroeval(), "real, with per-cell costs (cost=per_cell)"),
        _entry("crux_zeroeval", load_crux_zeroeval(), "real, with per-cell costs (cost=per_cell)"),
        _entry("math_l5_zeroeval", load_math_l5_zeroeval(), "real, with per-cell costs (cost=per_cell)"),
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
