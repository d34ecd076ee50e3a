"""The verdict rule: every claim of the paper the results pages judge, judged from the stores by one rule.

The claims are data, ``claims.yaml`` beside the stores (``docs/results/claims.yaml``): each names the
paper's words, the results page that judges it, and its test, a comparison of per-run values in a
stated direction (:class:`Claim`).  A test is judged in *cells*: one per panel (benchmark family and
cost mode) of the named reports, compared method, and share of the exhaustive cost.  A cell's
estimate is, clustered by seed (:mod:`gittinseval.results.stats`),

- against another method (``versus``): the paired difference of the two methods' values over the
  runs that share a benchmark and seed (:func:`~gittinseval.results.panels.paired_difference`);
- against a ``level``: the mean of the method's values minus the level.

With ``d`` the estimate's mean and ``SE`` its standard error, a cell **holds** when ``d`` lies in the
claim's direction by more than :data:`SE_MULTIPLE` SE, is **against** when it lies the other way by
more than that, and is **level** otherwise (:func:`outcome`; direction ``level_or_lower`` holds
unless the method is above by more than that, ``level`` holds only within it).  A cell without
values (no pair, or a BO method still in its initial design) is left out.  The claim's verdict
(:func:`verdict`), over its judged cells:

- *reproduced*: every cell holds, and some cell is on real data;
- *reproduced on stand-in data only*: every stand-in cell holds, but the claim has no real cell or
  a real cell that does not hold;
- *partial*: some cell holds, and neither of the above;
- *not reproduced*: no cell holds.

The values a test compares (:data:`MEASURES`): the simple regret at a share of the cost (as the
regret tables count it), the cost at which the stopping signal fired (a run whose signal did not fire
within its budget counts at its budget's end), whether it fired within a window of cost (1 or 0), and
a run's wall time.
"""

from __future__ import annotations

import fnmatch
import math
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import yaml

from gittinseval.results.curves import cost_mode_order
from gittinseval.results.manifest import StoreReport
from gittinseval.results.panels import Panel, paired_difference, panels, regret_at
from gittinseval.results.stats import Estimate
from gittinseval.sim.results_store import RunRow
from gittinseval.utils.text import invalid_yaml

__all__ = [
    "AGAINST",
    "CLAIMS",
    "DIRECTIONS",
    "HOLDS",
    "LEVEL",
    "MEASURES",
    "NO_STORE",
    "NOT_REPRODUCED",
    "PARTIAL",
    "REPRODUCED",
    "SE_MULTIPLE",
    "STAND_IN_ONLY",
    "VERDICTS",
    "Cell",
    "Claim",
    "Judgement",
    "Comparison",
    "judge",
    "judge_all",
    "outcome",
    "read_claims",
    "verdict",
]

CLAIMS = "claims.yaml"
SE_MULTIPLE = 2.0
"""A cell holds (or is against) when its estimate lies more than this many SEs from 0."""

HOLDS, LEVEL, AGAINST = "holds", "level", "against"
REPRODUCED = "reproduced"
STAND_IN_ONLY = "reproduced on stand-in data only"
PARTIAL = "partial"
NOT_REPRODUCED = "not reproduced"
NO_STORE = "not judged: no store yet"
VERDICTS = (REPRODUCED, STAND_IN_ONLY, PARTIAL, NOT_REPRODUCED)
"""The verdicts of the rule; a claim none of whose reports is in the manifest is :data:`NO_STORE`."""

DIRECTIONS = ("lower", "higher", "level_or_lower", "level")
"""How the method's value compares with the other's (or the level) when the claim holds."""


def _stop_cost(run: RunRow) -> float:
    stop = run.summary.get("stop_cost_pct")
    return 100 * run.summary["budget_fraction"] if stop is None else stop


def _stopped_within(window: tuple[float, float]) -> Callable[[RunRow], float]:
    low, high = window
    return lambda run: float(run.summary.get("stop_cost_pct") is not None
                             and low <= run.summary["stop_cost_pct"] <= high)


MEASURES = ("regret", "stop", "stop_within", "wall_time")
"""``regret``: simple regret at each share of ``percents``; ``stop``: the stop cost (% of the exhaustive
cost), the budget's end where the signal did not fire; ``stop_within``: 1 if the signal fired within
``window`` (% of the exhaustive cost), else 0; ``wall_time``: a run's wall time (s)."""


@dataclass(frozen=True)
class Comparison:
    """One part of a claim's test: the ``methods`` compared with each of ``versus`` (curve labels) or with
    ``level``, in the panels of ``reports`` whose key matches one of ``panels`` (shell patterns), at each
    share of ``percents`` (regret only)."""

    reports: tuple[str, ...]
    methods: tuple[str, ...]
    versus: tuple[str, ...] = ()
    level: float | None = None
    panels: tuple[str, ...] = ("*",)
    percents: tuple[int, ...] = ()


@dataclass(frozen=True)
class Claim:
    """A claim of the paper: its ``name``, a short statement (``claim``), the paper's words (``paper``), the
    results ``page`` that judges it and its test (:data:`MEASURES`, :data:`DIRECTIONS`, the parts
    ``tests``); ``note`` says how the test reads the paper's words where they leave room."""

    name: str
    claim: str
    paper: str
    page: str
    measure: str
    direction: str
    tests: tuple[Comparison, ...]
    window: tuple[float, float] | None = None
    note: str = ""

    def value(self, percent: int | None) -> Callable[[RunRow], float | None]:
        """The per-run value the claim compares (at ``percent`` % of the cost, for the regret)."""
        if self.measure == "regret":
            return lambda run: regret_at(run, percent)
        if self.measure == "stop":
            return _stop_cost
        if self.measure == "stop_within":
            return _stopped_within(self.window)
        return lambda run: run.summary["wall_time_s"]


@dataclass(frozen=True)
class Cell:
    """One judged comparison: ``method`` against ``versus`` (a label, or ``level <x>``) in the panel
    ``panel`` (its title; ``stand_in`` data or not) at ``percent`` % of the cost (``None``: the measure has
    no share), with its ``estimate`` and :func:`outcome` (``None``: no values)."""

    panel: str
    stand_in: bool
    method: str
    versus: str
    percent: int | None
    estimate: Estimate | None
    outcome: str | None


@dataclass(frozen=True)
class Judgement:
    """A claim, its cells and its :func:`verdict`; ``missing`` names the reports it needs that no store has yet."""

    claim: Claim
    cells: tuple[Cell, ...]
    verdict: str
    missing: tuple[str, ...] = field(default=())

    def count(self, stand_in: bool) -> dict[str, int]:
        """The judged cells on stand-in (or real) data by outcome."""
        counts = {HOLDS: 0, LEVEL: 0, AGAINST: 0}
        for cell in self.cells:
            if cell.outcome is not None and cell.stand_in == stand_in:
                counts[cell.outcome] += 1
        return counts


def outcome(estimate: Estimate | None, direction: str) -> str | None:
    """Whether a cell's ``estimate`` (method minus the other, or minus the level) holds, is level or is against
    the claim's ``direction`` by the rule (module docstring); ``None`` without an estimate or its SE."""
    if estimate is None or not math.isfinite(estimate.se):
        return None
    bound = SE_MULTIPLE * estimate.se
    towards = -estimate.mean if direction in ("lower", "level_or_lower") else estimate.mean
    if direction == "level":
        return HOLDS if abs(estimate.mean) <= bound else AGAINST
    if towards < -bound:
        return AGAINST
    if direction == "level_or_lower" or towards > bound:
        return HOLDS
    return LEVEL


def verdict(cells: tuple[Cell, ...] | list[Cell]) -> str:
    """The verdict of the rule over ``cells`` (module docstring); the judged ones count."""
    judged = [cell for cell in cells if cell.outcome is not None]
    if not any(cell.outcome == HOLDS for cell in judged):
        return NOT_REPRODUCED
    stand_in = [cell.outcome == HOLDS for cell in judged if cell.stand_in]
    real = [cell.outcome == HOLDS for cell in judged if not cell.stand_in]
    if all(stand_in) and all(real):
        return REPRODUCED if real else STAND_IN_ONLY
    if stand_in and all(stand_in):
        return STAND_IN_ONLY
    return PARTIAL


def _cells(claim: Claim, test: Comparison, panel: Panel) -> list[Cell]:
    cells = []
    percents: tuple[int | None, ...] = test.percents if claim.measure == "regret" else (None,)
    for method in test.methods:
        runs = panel.curves.get(method)
        if runs is None:
            continue
        others = [(other, panel.curves[other]) for other in test.versus if other in panel.curves and other != method]
        if test.level is not None:
            others.append((f"level {test.level:g}", None))
        for percent in percents:
            value = claim.value(percent)
            for other, baseline in others:
                if baseline is None:
                    estimate = Estimate.of([(v - test.level, run.summary["seed"]) for run in runs
                                            if (v := value(run)) is not None])
                else:
                    estimate = paired_difference(runs, baseline, value)
                cells.append(Cell(panel.title, panel.stand_in, method, other, percent, estimate,
                                  outcome(estimate, claim.direction)))
    return cells


def judge(claim: Claim, reports: dict[str, StoreReport], runs: dict[Path, list[RunRow]]) -> Judgement:
    """The cells and verdict of ``claim`` from the manifest's ``reports`` (by name) and their stores' ``runs``.

    A report the claim names that the manifest lacks is a store not made yet (``missing``); a method or
    panel pattern that matches nothing in the reports that exist is an error in the claim.  The cells
    follow the reports' benchmark families, unit cost first within each."""
    cells: list[Cell] = []
    missing = []
    for test in claim.tests:
        present = [reports[name] for name in test.reports if name in reports]
        missing += [name for name in test.reports if name not in reports]
        chosen = [panel for report in present for panel in panels(runs[report.store], report.mmlu_panels)
                  if any(fnmatch.fnmatchcase(panel.key, pattern) for pattern in test.panels)]
        families = list(dict.fromkeys(panel.family for panel in chosen))
        chosen.sort(key=lambda panel: (families.index(panel.family), cost_mode_order(panel.cost_mode)))
        if present and not chosen:
            raise ValueError(f"{CLAIMS}: {claim.name}: no panel of {', '.join(test.reports)} matches {test.panels}")
        labels = {label for panel in chosen for label in panel.curves}
        unknown = [label for label in (*test.methods, *test.versus) if label not in labels]
        if chosen and unknown:
            raise ValueError(f"{CLAIMS}: {claim.name}: no curve {', '.join(map(repr, unknown))} in "
                             f"{', '.join(test.reports)}; the curves: {', '.join(sorted(labels))}")
        for panel in chosen:
            cells += _cells(claim, test, panel)
    missing = tuple(dict.fromkeys(missing))
    if not cells and missing:
        return Judgement(claim, (), NO_STORE, missing)
    return Judgement(claim, tuple(cells), verdict(cells), missing)


def judge_all(claims: list[Claim], reports: list[StoreReport], runs: dict[Path, list[RunRow]]) -> list[Judgement]:
    """Every claim judged (:func:`judge`), in the order of ``claims``."""
    by_name = {report.name: report for report in reports}
    return [judge(claim, by_name, runs) for claim in claims]


_CLAIM_KEYS = {"name", "claim", "paper", "page", "measure", "direction", "window", "note", "tests"}
_TEST_KEYS = {"reports", "methods", "versus", "level", "panels", "percents"}


def _tuple(value) -> tuple:
    return tuple(value) if isinstance(value, list | tuple) else (value,)


def _test(entry: dict, defaults: dict, where: str) -> Comparison:
    merged = {key: value for key, value in ({k: defaults[k] for k in _TEST_KEYS if k in defaults} | entry).items()
              if value is not None}
    unknown = set(entry) - _TEST_KEYS
    if unknown:
        raise ValueError(f"{where}: unknown keys {sorted(unknown)} in a test; allowed: {sorted(_TEST_KEYS)}")
    for key in ("reports", "methods"):
        if key not in merged:
            raise ValueError(f"{where}: a test needs {key}")
    if ("versus" in merged) == ("level" in merged):
        raise ValueError(f"{where}: a test compares with versus (curve labels) or with a level, one of the two")
    return Comparison(
        reports=_tuple(merged["reports"]),
        methods=_tuple(merged["methods"]),
        versus=_tuple(merged.get("versus", ())),
        level=None if merged.get("level") is None else float(merged["level"]),
        panels=_tuple(merged.get("panels", "*")),
        percents=tuple(int(p) for p in _tuple(merged.get("percents", ()))),
    )


def read_claims(results_dir: str | Path) -> list[Claim]:
    """The claims of ``<results_dir>/claims.yaml`` (its ``claims:`` list), checked; none without the file.

    A claim's test keys (``reports``, ``methods``, ``versus`` or ``level``, ``panels``, ``percents``) are
    given on the claim itself, or under ``tests:`` as several parts, each taking the claim's keys as
    defaults."""
    path = Path(results_dir) / CLAIMS
    if not path.is_file():
        return []
    try:
        entries = (yaml.safe_load(path.read_text()) or {}).get("claims") or []
    except (yaml.YAMLError, AttributeError) as error:
        raise ValueError(invalid_yaml(error, path) if isinstance(error, yaml.YAMLError)
                         else f"{path}: expected a mapping with a claims: list") from None
    claims, names = [], set()
    for entry in entries:
        where = f"{path}: {entry.get('name', '?')}"
        unknown = set(entry) - _CLAIM_KEYS - _TEST_KEYS
        if unknown:
            raise ValueError(f"{where}: unknown keys {sorted(unknown)}")
        missing = [key for key in ("name", "claim", "paper", "page", "direction") if key not in entry]
        if missing:
            raise ValueError(f"{where}: needs {', '.join(missing)}")
        if entry["name"] in names:
            raise ValueError(f"{where}: a second claim of that name")
        names.add(entry["name"])
        measure = entry.get("measure", "regret")
        if measure not in MEASURES or entry["direction"] not in DIRECTIONS:
            raise ValueError(f"{where}: measure must be one of {', '.join(MEASURES)} and direction one of "
                             f"{', '.join(DIRECTIONS)}")
        if (measure == "stop_within") != ("window" in entry):
            raise ValueError(f"{where}: a window (low and high % of the cost) goes with measure stop_within, only")
        tests = tuple(_test(part, entry, where) for part in entry.get("tests") or [{}])
        if measure == "regret" and not all(test.percents for test in tests):
            raise ValueError(f"{where}: a regret claim needs percents")
        claims.append(Claim(
            name=entry["name"],
            claim=entry["claim"],
            paper=entry["paper"],
            page=entry["page"],
            measure=measure,
            direction=entry["direction"],
            tests=tests,
            window=tuple(entry["window"]) if "window" in entry else None,
            note=entry.get("note", ""),
        ))
    return claims
