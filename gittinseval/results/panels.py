"""The report's numbers: runs grouped into panels and curves, and each panel's table rows as estimates.

A *panel* (:class:`Panel`) is what one figure of the paper shows: one benchmark family and
cost mode, its runs split into curves (:func:`panels`).  Its tables are numbers
(:class:`CurveRow`, :class:`PairedRow`, :class:`StopRow`): every cell an
:class:`~gittinseval.results.stats.Estimate` (mean, seed-clustered SE, number of values and of
seeds) or a count; they are turned into text only by :mod:`gittinseval.results.tables`.

Configuration-level BO is compared only after its random initial design, as the paper's BO
curves begin there: a BO run's regret at a share of cost that its initial design has not
reached is left out of every regret and paired cell (:func:`in_initial_design`), and the
cell counts the runs left out.
"""

from __future__ import annotations

import math
import re
from collections import defaultdict
from collections.abc import Callable, Hashable
from dataclasses import dataclass

from gittinseval.results.curves import cost_mode_order
from gittinseval.results.stats import Estimate
from gittinseval.sim.results_store import RunRow
from gittinseval.sim.simulator import REPORT_PERCENTS

__all__ = [
    "MMLU_PANELS",
    "TABLE_PERCENTS",
    "CurveRow",
    "FirstStops",
    "PairedRow",
    "Panel",
    "PanelTables",
    "StopRow",
    "by_cost_mode",
    "by_family",
    "curve_rows",
    "in_initial_design",
    "paired_difference",
    "paired_rows",
    "panel_tables",
    "panels",
    "regret_at",
    "stop_rows",
    "stopping_policies",
]

TABLE_PERCENTS = REPORT_PERCENTS
MMLU_PANELS = ("bucket", "size", "subject")
# Settings that name their own curve when they vary among one label's runs (cost_plan: the costs a run
# planned with, learned or not; recorded only by runs of cost=per_cell_learned).
SWEPT_SETTINGS = (("batch_size", "B"), ("lam", "λ"), ("kappa", "κ"), ("cost_plan", "costs"))


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


def _single_subject_names(
    grouped: dict[tuple[str, str], list[RunRow]], names: dict[tuple[str, str], tuple[str, bool]]
) -> dict[tuple[str, str], tuple[str, bool]]:
    """The names of the MMLU size panels whose family's runs (every cost mode) are all on one
    subject, naming it (``MMLU small: abstract_algebra``): "small subjects" would claim a group."""
    subjects: dict[str, set] = defaultdict(set)
    for (family, _), members in grouped.items():
        subjects[family].update((run.summary.get("benchmark_details") or {}).get("subject") for run in members)
    renamed = {}
    for key, (name, stand_in) in names.items():
        family_subjects = subjects[key[0]]
        if name.endswith(" subjects") and len(family_subjects) == 1 and None not in family_subjects:
            renamed[key] = (f"{name.removesuffix(' subjects')}: {next(iter(family_subjects))}", stand_in)
    return renamed


def _curve_label(run: RunRow, varying: set[str]) -> str:
    parts = [run.summary["label"]]
    parts += [f"{symbol}={run.summary.get(key)}" for key, symbol in SWEPT_SETTINGS if key in varying]
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
    if mmlu_panels == "size":
        names.update(_single_subject_names(grouped, names))
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
    batch, whose budget reaches ``p`` % and that are past their random initial design there
    (``None``: no run); ``in_design`` counts the runs left out for the last reason (BO only,
    :func:`in_initial_design`).  ``stop_cost`` (cost % at which the stopping signal fired) and
    ``stop_regret`` (the recommendation's simple regret at that moment) are over the
    ``stopped`` runs whose signal fired.  ``wall_time`` is the wall time of one run, in seconds.
    """

    label: str
    runs: int
    regret: dict[int, Estimate | None]
    in_design: dict[int, int]
    stop_cost: Estimate | None
    stop_regret: Estimate | None
    stopped: int
    wall_time: Estimate


@dataclass
class PairedRow:
    """The paired regret difference of curve ``label`` minus curve ``versus`` in numbers.

    ``difference`` maps each percent ``p`` of :data:`TABLE_PERCENTS` to the difference of the
    two runs' regrets at ``p`` % (see :class:`CurveRow`), over the ``pairs`` pairs of runs that
    share a benchmark and seed and both have a regret there (``None``: no pair); ``in_design``
    counts the pairs left out because one of the two runs is still in its initial design.
    """

    label: str
    versus: str
    pairs: int
    difference: dict[int, Estimate | None]
    in_design: dict[int, int]


@dataclass
class FirstStops:
    """When a curve's stopping signal fired against the first BO stop of the same benchmark and seed.

    Over the runs that share a benchmark and seed with BO runs of the panel, BO's first stop
    is the earliest stop cost among those BO runs (none: no BO run stopped).  ``pairs`` counts
    the pairs where at least one of the two stopped, ``earlier`` those where the curve's run
    stopped and BO's first stop came later or never; ``difference`` is the curve's stop cost
    minus BO's first (% of the exhaustive cost) over the pairs where both stopped.
    """

    pairs: int
    earlier: int
    difference: Estimate | None


@dataclass
class StopRow:
    """The stopping signal of one curve of a panel: how often and when it fired, and what it left.

    ``stopped`` of the ``runs`` runs fired; ``stop_cost`` and ``stop_regret`` as in
    :class:`CurveRow`.  ``first_stops`` compares a non-BO curve with BO's stops (``None`` for
    BO curves and in panels without BO).
    """

    label: str
    runs: int
    stopped: int
    stop_cost: Estimate | None
    stop_regret: Estimate | None
    first_stops: FirstStops | None


def in_initial_design(run: RunRow, percent: float) -> bool:
    """Whether a configuration-level BO run is still in its random initial design at ``percent`` % of cost.

    The paper's BO curves begin after the initial design; a regret before its last
    configuration is that of random search.  Always ``False`` for other runs.
    """
    return run.init_pct is not None and run.init_pct > percent + 1e-9


def _regret_at(run: RunRow, percent: int) -> float | None:
    if percent > 100 * run.summary["budget_fraction"] + 1e-9:  # a run says nothing past its budget
        return None
    return run.summary[f"regret_at_{percent}pct"]


def regret_at(run: RunRow, percent: int) -> float | None:
    """The run's simple regret at ``percent`` % of the exhaustive cost as the tables count it: ``None`` past
    its budget, and for a BO run still in its random initial design there (:func:`in_initial_design`)."""
    return None if in_initial_design(run, percent) else _regret_at(run, percent)


def _seeded(runs: list[RunRow], field: str) -> list[tuple[float, Hashable]]:
    return [(run.summary[field], run.summary["seed"]) for run in runs]


def _stopped(runs: list[RunRow]) -> list[RunRow]:
    return [run for run in runs if run.summary.get("stop_cost_pct") is not None]


def curve_rows(panel: Panel) -> list[CurveRow]:
    """One :class:`CurveRow` per curve of ``panel``, in the panel's order."""
    rows = []
    for label, members in panel.curves.items():
        regret, in_design = {}, {}
        for percent in TABLE_PERCENTS:
            past = [run for run in members if not in_initial_design(run, percent)]
            in_design[percent] = len(members) - len(past)
            regret[percent] = Estimate.of(
                [(value, run.summary["seed"]) for run in past if (value := _regret_at(run, percent)) is not None]
            )
        stopped = _stopped(members)
        rows.append(CurveRow(
            label=label,
            runs=len(members),
            regret=regret,
            in_design=in_design,
            stop_cost=Estimate.of(_seeded(stopped, "stop_cost_pct")),
            stop_regret=Estimate.of(_seeded(stopped, "stop_regret")),
            stopped=len(stopped),
            wall_time=Estimate.of(_seeded(members, "wall_time_s")),
        ))
    return rows


def _pair_key(run: RunRow) -> tuple[str, Hashable]:
    return run.summary["benchmark"], run.summary["seed"]


def paired_difference(
    members: list[RunRow], baseline: list[RunRow], value: Callable[[RunRow], float | None]
) -> Estimate | None:
    """The mean ± seed-clustered SE of ``value(run) - value(other)`` over the runs of ``members`` and
    ``baseline`` that share a benchmark and seed, where both values are set; ``None`` without such a pair."""
    others = {_pair_key(run): run for run in baseline}
    return Estimate.of([
        (x - y, run.summary["seed"])
        for run in members
        if (other := others.get(_pair_key(run))) is not None
        and (x := value(run)) is not None and (y := value(other)) is not None
    ])


def paired_rows(panel: Panel, versus: str) -> list[PairedRow]:
    """Per curve other than ``versus``: the :class:`PairedRow` of its regret minus ``versus``'s.

    Runs are paired by benchmark and seed; a pair enters a column only if both runs have a
    regret at that share of cost and neither is in its initial design there.  Empty if
    ``panel`` has no ``versus`` curve.
    """
    if versus not in panel.curves:
        return []
    baseline = panel.curves[versus]
    keys = {_pair_key(run): run for run in baseline}
    rows = []
    for label, members in panel.curves.items():
        if label == versus:
            continue
        pairs = [(run, keys[_pair_key(run)]) for run in members if _pair_key(run) in keys]
        difference, in_design = {}, {}
        for percent in TABLE_PERCENTS:
            in_design[percent] = sum(in_initial_design(a, percent) or in_initial_design(b, percent) for a, b in pairs)
            difference[percent] = paired_difference(members, baseline, lambda run, p=percent: regret_at(run, p))
        rows.append(PairedRow(label, versus, len(pairs), difference, in_design))
    return rows


def _first_stops(members: list[RunRow], bo_stops: dict[tuple[str, Hashable], float]) -> FirstStops:
    earlier, differences, pairs = 0, [], 0
    for run in members:
        if _pair_key(run) not in bo_stops:
            continue
        own = run.summary.get("stop_cost_pct")
        other = bo_stops[_pair_key(run)]
        if own is None and math.isinf(other):
            continue  # neither stopped within the budget
        pairs += 1
        own = math.inf if own is None else own
        earlier += own < other
        if not (math.isinf(own) or math.isinf(other)):
            differences.append((own - other, run.summary["seed"]))
    return FirstStops(pairs, earlier, Estimate.of(differences))


def stop_rows(panel: Panel, stopping_policies: set[str]) -> list[StopRow]:
    """One :class:`StopRow` per curve of ``panel`` whose policy (``summary["policy"]``) is in
    ``stopping_policies``: the policies with a stopping signal."""
    bo_runs = [run for members in panel.curves.values() for run in members if run.init_pct is not None]
    bo_stops: dict[tuple[str, Hashable], float] = {}
    for run in bo_runs:
        stop = run.summary.get("stop_cost_pct")
        bo_stops[_pair_key(run)] = min(bo_stops.get(_pair_key(run), math.inf), math.inf if stop is None else stop)
    rows = []
    for label, members in panel.curves.items():
        if members[0].summary.get("policy") not in stopping_policies:
            continue
        stopped = _stopped(members)
        is_bo = members[0].init_pct is not None
        rows.append(StopRow(
            label=label,
            runs=len(members),
            stopped=len(stopped),
            stop_cost=Estimate.of(_seeded(stopped, "stop_cost_pct")),
            stop_regret=Estimate.of(_seeded(stopped, "stop_regret")),
            first_stops=_first_stops(members, bo_stops) if bo_stops and not is_bo else None,
        ))
    return rows


def stopping_policies(runs: list[RunRow]) -> set[str]:
    """The policies (``summary["policy"]``) of which some run's stopping signal fired: those with a signal."""
    return {run.summary.get("policy") for run in runs if run.summary.get("stop_cost_pct") is not None}


@dataclass
class PanelTables:
    """A panel's table rows (:func:`curve_rows`), paired rows per baseline (:func:`paired_rows`) and
    stopping rows (:func:`stop_rows`)."""

    panel: Panel
    rows: list[CurveRow]
    paired: dict[str, list[PairedRow]]
    stops: list[StopRow]

    @classmethod
    def of(cls, panel: Panel, versus: tuple[str, ...] = (), stopping: set[str] = frozenset()) -> PanelTables:
        """The tables of ``panel``, with the paired rows against each label of ``versus`` and the
        stopping rows of the curves whose policy is in ``stopping``."""
        return cls(panel, curve_rows(panel), {baseline: paired_rows(panel, baseline) for baseline in versus},
                   stop_rows(panel, stopping))


def panel_tables(runs: list[RunRow], mmlu_panels: str = "bucket", versus: tuple[str, ...] = ()) -> list[PanelTables]:
    """The :class:`PanelTables` of every panel of ``runs`` (:func:`panels`), the stopping policies
    found among all of ``runs``."""
    stopping = stopping_policies(runs)
    return [PanelTables.of(panel, versus, stopping) for panel in panels(runs, mmlu_panels)]


def by_cost_mode(tables: list[PanelTables]) -> dict[str, list[PanelTables]]:
    """``tables`` by their panel's cost mode (unit cost first, then in order of first appearance)."""
    grouped: dict[str, list[PanelTables]] = defaultdict(list)
    for table in tables:
        grouped[table.panel.cost_mode].append(table)
    return dict(sorted(grouped.items(), key=lambda item: cost_mode_order(item[0])[0]))


def by_family(tables: list[PanelTables]) -> dict[str, list[PanelTables]]:
    """``tables`` by benchmark family (in order of first appearance), unit cost first within each."""
    families: dict[str, list[PanelTables]] = defaultdict(list)
    for table in tables:
        families[table.panel.family].append(table)
    return {family: sorted(members, key=lambda t: cost_mode_order(t.panel.cost_mode))
            for family, members in families.items()}
