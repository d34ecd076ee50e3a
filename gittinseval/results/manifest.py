"""The manifest of the committed results stores: how each store's report is drawn, and where.

``reports.yaml`` beside the stores (``docs/results/reports.yaml``) maps a report's name to its
options; the report reads ``<store>.parquet`` (``store``, by default the report's name) and is
written into ``out`` (by default ``docs/figures/<name>``); for example
``mmlu_buckets_subjects: {store: mmlu_buckets, mmlu_panels: subject, figures: none}``.
The other options are those of ``gittinseval-report``: ``mmlu_panels``, ``versus``,
``linear`` and ``figures``.  A store may have several reports; every committed store must
have one (the test suite checks it).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

import yaml

from gittinseval.results.panels import MMLU_PANELS
from gittinseval.results.report import FIGURES, write_report
from gittinseval.sim.results_store import RunRow, load_rows
from gittinseval.utils.text import invalid_yaml

__all__ = ["MANIFEST", "StoreReport", "read_manifest", "read_stores"]

MANIFEST = "reports.yaml"
_KEYS = {"out", "store", "mmlu_panels", "versus", "linear", "figures"}


@dataclass(frozen=True)
class StoreReport:
    """The report ``name`` of one committed store: its source, its options and its folder."""

    name: str
    store: Path
    out: Path
    mmlu_panels: str = "bucket"
    versus: tuple[str, ...] = field(default=())
    linear: bool = False
    figures: str = "all"

    def write(self, out: Path | None = None, draw: bool = True, runs: list[RunRow] | None = None) -> Path:
        """Write the report into ``out`` (default: its own folder), its figures only if ``draw``, from
        the store's ``runs`` if already read; returns its ``report.md``."""
        return write_report([self.store], out or self.out, self.mmlu_panels, log_cost=not self.linear,
                            versus=self.versus, figures=self.figures, draw=draw, runs=runs)

    def command(self) -> list[str]:
        """The ``gittinseval-report`` command line that writes this report on its own."""
        words = ["gittinseval-report", str(self.store), "--out", str(self.out)]
        words += ["--mmlu-panels", self.mmlu_panels] if self.mmlu_panels != "bucket" else []
        words += [word for label in self.versus for word in ("--versus", label)]
        words += ["--linear"] if self.linear else []
        words += ["--figures", self.figures] if self.figures != "all" else []
        return words


def read_manifest(results_dir: str | Path) -> list[StoreReport]:
    """The entries of ``<results_dir>/reports.yaml``, paths relative to the working directory."""
    results_dir = Path(results_dir)
    path = results_dir / MANIFEST
    if not path.is_file():
        raise FileNotFoundError(f"{path}: no report manifest (one entry per store: its report options)")
    try:
        entries = yaml.safe_load(path.read_text()) or {}
    except yaml.YAMLError as error:
        raise ValueError(invalid_yaml(error, path)) from None
    if not isinstance(entries, dict):
        raise ValueError(f"{path}: expected a mapping of report names to report options")
    reports = []
    for name, options in entries.items():
        options = options or {}
        unknown = set(options) - _KEYS
        if unknown:
            raise ValueError(f"{path}: {name}: unknown keys {sorted(unknown)}; allowed: {sorted(_KEYS)}")
        store = results_dir / f"{options.get('store', name)}.parquet"
        if not store.is_file():
            raise FileNotFoundError(f"{path}: {name}: no store {store}")
        panels = options.get("mmlu_panels", "bucket")
        if panels not in MMLU_PANELS:
            raise ValueError(f"{path}: {name}: mmlu_panels must be one of {', '.join(MMLU_PANELS)}, got {panels!r}")
        figures = options.get("figures", "all")
        if figures not in FIGURES:
            raise ValueError(f"{path}: {name}: figures must be one of {', '.join(FIGURES)}, got {figures!r}")
        reports.append(StoreReport(
            name=name,
            store=store,
            out=Path(options.get("out", Path("docs", "figures", name))),
            mmlu_panels=panels,
            versus=tuple(options.get("versus", ())),
            linear=bool(options.get("linear", False)),
            figures=figures,
        ))
    return reports


def read_stores(reports: list[StoreReport]) -> dict[Path, list[RunRow]]:
    """The rows of every store of ``reports``, each store read once."""
    return {store: load_rows(store) for store in dict.fromkeys(report.store for report in reports)}
