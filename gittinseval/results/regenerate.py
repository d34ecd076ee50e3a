"""Every table and figure of the results pages, regenerated from the committed results stores.

:func:`regenerate` writes the report of every entry of the manifest
(:mod:`gittinseval.results.manifest`) into its folder, leaving in it only what the report
writes, and then the status tables (:mod:`gittinseval.results.status`) and the verdicts of the paper's claims
(:mod:`gittinseval.results.verdict_tables`):
``gittinseval-report --all docs/results``, or ``make results``.  :func:`differences`
compares a committed folder with a fresh one, file by file, which is how the test suite
checks that every committed table is what its store gives.
"""

from __future__ import annotations

import filecmp
import shutil
import tempfile
from pathlib import Path

from gittinseval.results.manifest import StoreReport, read_manifest, read_stores
from gittinseval.results.status import STATUS_DIR, write_status
from gittinseval.results.verdict_tables import VERDICTS_DIR, write_verdicts

__all__ = ["differences", "regenerate"]

# What a report folder holds; anything else in it is left alone.
_REPORT_SUFFIXES = (".md", ".png")


def _replace_folder(fresh: Path, folder: Path) -> None:
    """Make ``folder``'s markdown and figures those of ``fresh``: move them in, delete the others."""
    folder.mkdir(parents=True, exist_ok=True)
    for stale in folder.iterdir():
        if stale.suffix in _REPORT_SUFFIXES and not (fresh / stale.name).exists():
            stale.unlink()
    for path in fresh.iterdir():
        shutil.move(path, folder / path.name)


def regenerate(
    results_dir: str | Path, status_out: str | Path = STATUS_DIR, verdicts_out: str | Path = VERDICTS_DIR
) -> list[StoreReport]:
    """Write the report of every entry of ``<results_dir>/reports.yaml`` into its folder, the status tables
    into ``status_out`` (if ``<results_dir>/paper.yaml`` exists) and the verdicts of the claims into
    ``verdicts_out`` (if ``<results_dir>/claims.yaml`` exists); returns the entries."""
    reports = read_manifest(results_dir)
    runs = read_stores(reports)
    for report in reports:
        with tempfile.TemporaryDirectory() as scratch:
            report.write(Path(scratch), runs=runs[report.store])
            _replace_folder(Path(scratch), report.out)
    with tempfile.TemporaryDirectory() as scratch:
        if write_status(results_dir, reports, scratch, runs):  # nothing without the paper's facts
            _replace_folder(Path(scratch), Path(status_out))
    with tempfile.TemporaryDirectory() as scratch:
        if write_verdicts(results_dir, reports, scratch, runs):  # nothing without claims
            _replace_folder(Path(scratch), Path(verdicts_out))
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
