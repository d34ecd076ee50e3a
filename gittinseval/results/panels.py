"""The report's numbers: runs grouped into panels and curves, and each panel's table rows as estimates.

A *panel* (:class:`Panel`) is what one figure of the paper shows: one benchmark family and
cost mode, its runs split into curves (:func:`panels`).  Its tables are numbers
(:class:`CurveRow`, :class:`PairedRow`): every cell an :class:`~gittinseval.results.stats.Estimate`
(mean, seed-clustered SE, number of values and of seeds) or a count; they are turned into
text only by :mod:`gittinseval.results.tables`.
"""

from __future__ import annotations

import re
import statistics
from collections import defaultdict
from collections.abc import Hashable
from dataclasses import dataclass

from gittinseval.results.curves import cost_mode_order
from gittinseval.results.stats import Estimate
from gittinseval.sim.results_store import RunRow
from gittinseval.sim.simulator import REPORT_PERCENTS

__all__ = [
    "MMLU_PANELS",
    "TABLE_PERCENTS",
    "CurveRow",
    "PairedRow",
    "Panel",
    "PanelTables",
    "by_cost_mode",
    "by_family",
    "curve_rows",
    "overview_tables",
    "paired_rows",
    "panels",
]

TABLE_PERCENTS = REPORT_PERCENTS
MMLU_PANELS = ("bucket", "size", "subject")
# Settings that name their own curve when they vary among one label's runs.
SWEPT_SETTINGS = (("batch_size", "B"), ("lam", "λ"), ("kappa", "κ"))


@dataclass
class Panel:
    """Runs drawn in one figure: ``curves`` maps a curve label to its runs.

    ``name`` is the benchmark family as people read it (``MMLU hard-large``); ``stand_in``
    says that its data are stand-ins for the paper's.
    """

    family: str
    cost_mode: str
    name: str
    stand_in: bool
    curves: dict[str, list[RunRow]]

    @property
    def key(self) -> str:
        """File-name stem of the panel's table: ``<family>_<cost mode>``."""
        return f"{self.family}_{self.cost_mode}"

    @property
    def family_title(self) -> str:
        """Title of the family's figure, which shows every cost mode of it."""
        return self.name + (" [stand-in data]" if self.stand_in else "")

    @property
    def title(self) -> str:
        """Title of the panel: ``<name> (<cost mode> cost)``, and whether its data are stand-ins."""
        return f"{self.name} ({self.cost_mode} cost)" + (" [stand-in data]" if self.stand_in else "")


def _family(run: RunRow, mmlu_panels: str) -> tuple[str, str]:
    """(file-name key, name) of the panel a run belongs to, without the cost mode."""
    name = run.summary["benchmark"]
    details = run.summary.get("benchmark_details") or {}
    if name.startswith("mmlu/"):
        if mmlu_panels == "subject" or "difficulty" not in details:
            return name.replace("/", "_"), f"MMLU {details.get('subject', name[5:])}"
        if mmlu_panels == "size":
            return f"mmlu_{details['size']}", f"MMLU {details['size']} subjects"
        bucket = f"{details['difficulty']}-{details['size']}"
        return f"mmlu_{bucket}", f"MMLU {bucket}"
    # "gsm8k_standin/m3" -> the GSM8K panel pools its matrix seeds.
    family = re.sub(r"/m\d+$", "", name)
    return family.replace("/", "_"), family


def _curve_label(run: RunRow, varying: set[str]) -> str:
    parts = [run.summary["label"]]
    parts += [f"{symbol}={run.summary[key]}" for key, symbol in SWEPT_SETTINGS if key in varying]
    return " ".join(parts)


def _natural_key(label: str) -> list[tuple[int, float | str]]:
    """Sort key that orders ``B=8`` before ``B=16`` and ``λ=1e-05`` before ``λ=0.0001``."""
    key: list[tuple[int, float | str]] = []
    for part in re.split(r"=", label):
        try:
            key.append((0, float(part.split()[0])))
        except (ValueError, IndexError):
            key.append((1, part))
    return key


def panels(runs: list[RunRow], mmlu_panels: str = "bucket") -> list[Panel]:
    """Group ``runs`` into panels (in order of first appearance) and curves (by label, then setting)."""
    if mmlu_panels not in MMLU_PANELS:
        raise ValueError(f"mmlu_panels must be one of {', '.join(MMLU_PANELS)}, got {mmlu_panels!r}")
    grouped: dict[tuple[str, str], list[RunRow]] = defaultdict(list)
    names: dict[tuple[str, str], tuple[str, bool]] = {}
    for run in runs:
        if not run.has_steps:
            continue
        family, name = _family(run, mmlu_panels)
        key = (family, run.summary["cost_mode"])
        grouped[key].append(run)
        names[key] = (name, bool(run.summary.get("stand_in")))
    result = []
    for (family, cost_mode), members in grouped.items():
        values: dict[str, dict[str, set]] = defaultdict(lambda: defaultdict(set))
        for run in members:
            for key, _ in SWEPT_SETTINGS:
                values[run.summary["label"]][key].add(run.summary.get(key))
        curves: dict[str, list[RunRow]] = defaultdict(list)
        for run in members:
            by_key = values[run.summary["label"]]
            varying = {key for key, _ in SWEPT_SETTINGS if len(by_key[key]) > 1}
            curves[_curve_label(run, varying)].append(run)
        ordered = dict(sorted(curves.items(), key=lambda item: _natural_key(item[0])))
        result.append(Panel(family, cost_mode, *names[(family, cost_mode)], ordered))
    return result


@dataclass
class CurveRow:
    """One curve of a panel in numbers, over its ``runs`` runs.

    ``regret`` maps each percent ``p`` of :data:`TABLE_PERCENTS` to the simple regret after
    the last batch at or below ``p`` % of the exhaustive cost, over the runs that have such a
    batch and whose budget reaches ``p`` % (``None``: no run).  ``stop_cost`` (cost % at which
    the stopping signal fired) and ``stop_regret`` (the recommendation's simple regret at that
    moment) are over the ``stopped`` runs whose signal fired.  ``median_wall_s`` is the median
    wall time of one run.
    """

    label: str
    runs: int
    regret: dict[int, Estimate | None]
    stop_cost: Estimate | None
    stop_regret: Estimate | None
    stopped: int
    median_wall_s: float


@dataclass
class PairedRow:
    """The paired regret difference of curve ``label`` minus curve ``versus`` in numbers.

    ``difference`` maps each percent ``p`` of :data:`TABLE_PERCENTS` to the difference of the
    two runs' regrets at ``p`` % (see :class:`CurveRow`), over the ``pairs`` pairs of runs that
    share a benchmark and seed and both have a regret there (``None``: no pair).
    """

    label: str
    versus: str
    pairs: int
    difference: dict[int, Estimate | None]


def _regret_at(run: RunRow, percent: int) -> float | None:
    if percent > 100 * run.summary["budget_fraction"] + 1e-9:  # a run says nothing past its budget
        return None
    return run.summary[f"regret_at_{percent}pct"]


def _seeded(runs: list[RunRow], field: str) -> list[tuple[float, Hashable]]:
    return [(run.summary[field], run.summary["seed"]) for run in runs]


def curve_rows(panel: Panel) -> list[CurveRow]:
    """One :class:`CurveRow` per curve of ``panel``, in the panel's order."""
    rows = []
    for label, members in panel.curves.items():
        regret = {
            percent: Estimate.of(
                [(value, run.summary["seed"]) for run in members if (value := _regret_at(run, percent)) is not None]
            )
            for percent in TABLE_PERCENTS
        }
        stopped = [run for run in members if run.summary.get("stop_cost_pct") is not None]
        rows.append(CurveRow(
            label=label,
            runs=len(members),
            regret=regret,
            stop_cost=Estimate.of(_seeded(stopped, "stop_cost_pct")),
            stop_regret=Estimate.of(_seeded(stopped, "stop_regret")),
            stopped=len(stopped),
            median_wall_s=statistics.median(run.summary["wall_time_s"] for run in members),
        ))
    return rows


def paired_rows(panel: Panel, versus: str) -> list[PairedRow]:
    """Per curve other than ``versus``: the :class:`PairedRow` of its regret minus ``versus``'s.

    Runs are paired by benchmark and seed; a pair enters a column only if both
    runs have a regret at that share of cost.  Empty if ``panel`` has no ``versus`` curve.
    """
    if versus not in panel.curves:
        return []
    baseline = {(r.summary["benchmark"], r.summary["seed"]): r for r in panel.curves[versus]}
    rows = []
    for label, members in panel.curves.items():
        if label == versus:
            continue
        pairs = [
            (r, baseline[key]) for r in members if (key := (r.summary["benchmark"], r.summary["seed"])) in baseline
        ]
        difference = {
            percent: Estimate.of([
                (a - b, run.summary["seed"])
                for run, other in pairs
                if (a := _regret_at(run, percent)) is not None and (b := _regret_at(other, percent)) is not None
            ])
            for percent in TABLE_PERCENTS
        }
        rows.append(PairedRow(label, versus, len(pairs), difference))
    return rows


@dataclass
class PanelTables:
    """A panel's table rows (:func:`curve_rows`) and paired rows per baseline (:func:`paired_rows`)."""

    panel: Panel
    rows: list[CurveRow]
    paired: dict[str, list[PairedRow]]

    @classmethod
    def of(cls, panel: Panel, versus: tuple[str, ...] = ()) -> PanelTables:
        """The tables of ``panel``, with the paired rows against each label of ``versus``."""
        return cls(panel, curve_rows(panel), {baseline: paired_rows(panel, baseline) for baseline in versus})


def by_cost_mode(tables: list[PanelTables]) -> dict[str, list[PanelTables]]:
    """``tables`` by their panel's cost mode, in order of first appearance."""
    grouped: dict[str, list[PanelTables]] = defaultdict(list)
    for table in tables:
        grouped[table.panel.cost_mode].append(table)
    return dict(grouped)


def overview_tables(all_panels: list[Panel], versus: tuple[str, ...] = ()) -> dict[str, list[PanelTables]]:
    """The overview's rows: per cost mode, the tables of its panels (with the paired rows of each
    label of ``versus``), one row each as :func:`~gittinseval.results.tables.overview_cells` lays them out."""
    return by_cost_mode([PanelTables.of(panel, versus) for panel in all_panels])


def by_family(tables: list[PanelTables]) -> dict[str, list[PanelTables]]:
    """``tables`` by benchmark family (in order of first appearance), unit cost first within each."""
    families: dict[str, list[PanelTables]] = defaultdict(list)
    for table in tables:
        families[table.panel.family].append(table)
    return {family: sorted(members, key=lambda t: cost_mode_order(t.panel.cost_mode))
            for family, members in families.items()}
