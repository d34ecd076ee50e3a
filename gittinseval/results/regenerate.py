"""Every table and figure of the results pages, regenerated from the committed results stores.

The manifest ``reports.yaml`` beside the stores (``docs/results/reports.yaml``) names,
for each store ``<name>.parquet``, how its report is drawn (``mmlu_panels``,
``versus``, ``linear``) and where it is written (``out``, by default
``docs/figures/<name>``).  :func:`regenerate` writes them all
(``gittinseval-report --all docs/results``, or ``make results``); :func:`differences`
compares a committed report folder with a fresh one, file by file, which is how the
test suite checks that every committed table is what its store gives.
"""

from __future__ import annotations

import filecmp
from dataclasses import dataclass, field
from pathlib import Path

import yaml

from gittinseval.results.panels import MMLU_PANELS
from gittinseval.results.report import write_report

__all__ = ["MANIFEST", "StoreReport", "differences", "read_manifest", "regenerate"]

MANIFEST = "reports.yaml"
_KEYS = {"out", "mmlu_panels", "versus", "linear"}


@dataclass(frozen=True)
class StoreReport:
    """The report of one committed store: its source, its options and its folder."""

    store: Path
    out: Path
    mmlu_panels: str = "bucket"
    versus: tuple[str, ...] = field(default=())
    linear: bool = False

    def write(self, out: Path | None = None) -> Path:
        """Write the report into ``out`` (default: its own folder); returns its ``report.md``."""
        return write_report([self.store], out or self.out, self.mmlu_panels, log_cost=not self.linear,
                            versus=self.versus)


def read_manifest(results_dir: str | Path) -> list[StoreReport]:
    """The entries of ``<results_dir>/reports.yaml``, paths relative to the working directory."""
    results_dir = Path(results_dir)
    path = results_dir / MANIFEST
    if not path.is_file():
        raise FileNotFoundError(f"{path}: no report manifest (one entry per store: its report options)")
    entries = yaml.safe_load(path.read_text()) or {}
    if not isinstance(entries, dict):
        raise ValueError(f"{path}: expected a mapping of store names to report options")
    reports = []
    for name, options in entries.items():
        options = options or {}
        unknown = set(options) - _KEYS
        if unknown:
            raise ValueError(f"{path}: {name}: unknown keys {sorted(unknown)}; allowed: {sorted(_KEYS)}")
        store = results_dir / f"{name}.parquet"
        if not store.is_file():
            raise FileNotFoundError(f"{path}: {name}: no store {store}")
        panels = options.get("mmlu_panels", "bucket")
        if panels not in MMLU_PANELS:
            raise ValueError(f"{path}: {name}: mmlu_panels must be one of {', '.join(MMLU_PANELS)}, got {panels!r}")
        reports.append(StoreReport(
            store=store,
            out=Path(options.get("out", Path("docs", "figures", name))),
            mmlu_panels=panels,
            versus=tuple(options.get("versus", ())),
            linear=bool(options.get("linear", False)),
        ))
    return reports


def regenerate(results_dir: str | Path) -> list[StoreReport]:
    """Write the report of every store of the manifest into its folder."""
    reports = read_manifest(results_dir)
    for report in reports:
        report.write()
    return reports


def differences(committed: Path, fresh: Path) -> list[str]:
    """The markdown files of ``committed`` and ``fresh`` that are missing in one or differ (names).

    Figures are left out: a PNG's bytes depend on the matplotlib and font versions.
    """
    ours = {path.name for path in committed.glob("*.md")}
    theirs = {path.name for path in fresh.glob("*.md")}
    missing = [f"{name} (only in {committed})" for name in sorted(ours - theirs)]
    missing += [f"{name} (only in {fresh})" for name in sorted(theirs - ours)]
    changed = [name for name in sorted(ours & theirs) if not filecmp.cmp(committed / name, fresh / name, shallow=False)]
    return missing + changed
