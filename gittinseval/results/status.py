"""Where the paper's evidence stands: each figure and table of the paper beside the committed stores.

``paper.yaml`` beside the stores (``docs/results/paper.yaml``) holds what the results pages
need that no run gives: the paper's figures and tables (for each, the runs behind it in the
paper and the manifest reports that hold ours, or the file that holds a table of inputs), the
reports each results page shows, and numbers the paper states, to set beside ours.  From it,
the manifest, the stores and the experiments of the paper (``conf/experiment/paper/``),
:func:`write_status` writes into ``docs/figures/status/``:

- ``experiments.md``: every experiment of the paper (``paper/<name>``), the runs its store holds,
  their run CPU-hours and data, in the order of the paper's figures (the reproduction index
  shows it);
- ``figures.md``: every figure and table of the paper, the runs behind it (ours and the
  paper's), the kind of data, the store and the command that regenerates it;
- ``stores.md``: every committed store, its runs, seeds, run CPU-hours, commits, data, SE and
  report command;
- ``page_<page>.md``: the same for the stores of one results page, which opens with it;
- ``commits.md``: the runs of every store by the commit they ran on, and their methods;
- ``versus_paper_<name>.md``: numbers the paper states beside ours, with the difference.

*Run CPU-hours* sum the runs' own wall times (one thread each): the policies' work, without the
start of each job and the loading of its data, which a sweep adds on top.

A *data kind* is ``stand-in`` (scores synthesized to published facts), ``real row sums`` (the real
number of correct answers per row, which questions are synthesized: MMLU) or ``real``;
every SE of the report is clustered by seed (:mod:`gittinseval.results.stats`).
"""

from __future__ import annotations

import math
import shlex
from collections import Counter, defaultdict
from dataclasses import dataclass
from pathlib import Path

import yaml

from gittinseval.results.manifest import StoreReport
from gittinseval.results.panels import curve_rows, panels
from gittinseval.results.stats import Estimate
from gittinseval.results.tables import EMPTY, estimate_cell, markdown_table
from gittinseval.sim.experiment import store_paths
from gittinseval.sim.results_store import RunRow, load_rows
from gittinseval.utils.config_dir import CONFIG_DIR
from gittinseval.utils.text import invalid_yaml
from gittinseval.utils.validation import ConfigError

__all__ = ["EXPERIMENTS_DIR", "PAPER_FACTS", "STATUS_DIR", "StoreFacts", "data_kind", "read_paper_facts",
           "write_status"]

PAPER_FACTS = "paper.yaml"
STATUS_DIR = Path("docs", "figures", "status")
EXPERIMENTS_DIR = CONFIG_DIR / "experiment" / "paper"
"""The experiments of the paper, one ``<name>.yaml`` each (``gittinseval -m experiment=paper/<name>``)."""
_FACT_KEYS = {"figures", "pages", "versus_paper"}
_FIGURE_KEYS = {"name", "page", "runs", "reports", "data", "file", "command", "note"}
# A store with more commits than this names their number on a page's opening table; every
# commit is in commits.md.
_LISTED_COMMITS = 3


def data_kind(summary: dict) -> str:
    """The kind of data a run's benchmark is: ``stand-in``, ``real row sums`` or ``real``."""
    if summary.get("stand_in"):
        return "stand-in"
    return "real row sums" if "synthesized item assignment" in (summary.get("data_source") or "") else "real"


def _short(commit: str | None) -> str:
    if not commit:
        return "unknown"
    base, dirty, _ = commit.partition("-dirty")
    return base[:7] + ("-dirty" if dirty else "")


@dataclass(frozen=True)
class StoreFacts:
    """What the status tables say of one committed store: its runs by commit and label, seeds and data."""

    store: Path
    runs: int
    seeds: int
    cpu_hours: float
    by_commit: dict[str, Counter]
    data: tuple[str, ...]

    @classmethod
    def of(cls, store: Path, rows: list[RunRow]) -> StoreFacts:
        by_commit: dict[str, Counter] = defaultdict(Counter)
        for row in rows:
            by_commit[_short(row.summary.get("commit"))][row.summary["label"]] += 1
        ordered = dict(sorted(by_commit.items(), key=lambda item: -sum(item[1].values())))
        return cls(
            store=store,
            runs=len(rows),
            seeds=len({row.summary["seed"] for row in rows}),
            # Every run had one thread, so its wall time is the CPU time it took.
            cpu_hours=sum(row.summary["wall_time_s"] for row in rows) / 3600,
            by_commit=ordered,
            data=tuple(dict.fromkeys(data_kind(row.summary) for row in rows)),
        )

    def commits_cell(self) -> str:
        if len(self.by_commit) > _LISTED_COMMITS:
            return f"{len(self.by_commit)} commits ([provenance](provenance.md))"
        return ", ".join(f"`{commit}` ({sum(labels.values())})" for commit, labels in self.by_commit.items())

    def cells(self) -> dict[str, str]:
        return {
            "store": f"`{self.store}`",
            "runs": str(self.runs),
            "seeds": str(self.seeds),
            "run CPU-h": f"{self.cpu_hours:.2f}",
            "commits": self.commits_cell(),
            "data": ", ".join(self.data),
            "SE": "clustered by seed",
        }


def read_paper_facts(results_dir: str | Path) -> dict | None:
    """``<results_dir>/paper.yaml``, checked; ``None`` if there is none."""
    path = Path(results_dir) / PAPER_FACTS
    if not path.is_file():
        return None
    try:
        facts = yaml.safe_load(path.read_text()) or {}
    except yaml.YAMLError as error:
        raise ValueError(invalid_yaml(error, path)) from None
    if not isinstance(facts, dict):
        raise ValueError(f"{path}: expected a mapping of {', '.join(sorted(_FACT_KEYS))} to their facts")
    unknown = set(facts) - _FACT_KEYS
    if unknown:
        raise ValueError(f"{path}: unknown keys {sorted(unknown)}; allowed: {sorted(_FACT_KEYS)}")
    for figure in facts.get("figures", []):
        unknown = set(figure) - _FIGURE_KEYS
        if unknown:
            raise ValueError(f"{path}: {figure.get('name')}: unknown keys {sorted(unknown)}")
    return facts


def _command(words: list[str]) -> str:
    return "`.venv/bin/" + shlex.join(words) + "`"


def _figure_cells(figure: dict, reports: dict[str, StoreReport], facts: dict[Path, StoreFacts]) -> dict[str, str]:
    """The status row of one figure or table of the paper: a report it names that the manifest lacks is
    a missing store, run by its ``paper/<name>`` experiment."""
    named = figure.get("reports", [])
    present = [reports[name] for name in named if name in reports]
    stores = list(dict.fromkeys(report.store for report in present))
    missing = [name for name in named if name not in reports]
    runs = sum(facts[store].runs for store in stores)
    paper_runs = figure.get("runs")
    name = figure["name"] + (f" ([page]({figure['page']}.md))" if "page" in figure else "")
    if "file" in figure:
        store, data, ours = f"`{figure['file']}`", "input", EMPTY
    elif not named:  # drawn from the data alone
        store, data, ours = EMPTY, figure.get("data", EMPTY), EMPTY
    else:
        store = ", ".join([f"`{s}`" for s in stores] + [f"missing: `docs/results/{m}.parquet`" for m in missing])
        data = ", ".join(dict.fromkeys(kind for s in stores for kind in facts[s].data)) or figure.get("data", EMPTY)
        ours = str(runs) if stores else "none"
    cpu_hours = f"{sum(facts[store].cpu_hours for store in stores):.2f}" if stores else EMPTY
    commands = [_command(report.command()) for report in present]
    commands += [_command(["gittinseval", "-m", f"experiment=paper/{m}"]) for m in missing]
    commands += [f"`{figure['command']}`"] if "command" in figure else []
    return {
        "paper": name + (f"; {figure['note']}" if "note" in figure else ""),
        "runs: ours / paper": f"{ours} / {EMPTY if paper_runs is None else paper_runs}",
        "run CPU-h": cpu_hours,
        "data": data,
        "store": store,
        "regenerate": "<br>".join(commands) or EMPTY,
    }


def _experiment_stores(experiments: Path) -> dict[str, str | None]:
    """Each experiment of the paper (``paper/<name>`` for ``<experiments>/<name>.yaml``) and the file name
    of the store its sweep adds its runs to (its ``results_store``, the first of a list), or ``None``."""
    stores = {}
    for path in sorted(experiments.glob("*.yaml")):
        try:
            config = yaml.safe_load(path.read_text()) or {}
        except yaml.YAMLError as error:
            raise ValueError(invalid_yaml(error, path)) from None
        try:
            paths = store_paths(config.get("results_store") if isinstance(config, dict) else None)
        except ConfigError as error:
            raise ValueError(f"{path}: {error}") from None
        stores[f"paper/{path.stem}"] = paths[0].name if paths else None
    return stores


def _experiment_cells(
    experiments: Path, figures: list[dict], reports: dict[str, StoreReport], facts: dict[Path, StoreFacts]
) -> list[dict[str, str]]:
    """One row per experiment of the paper: the runs its store holds (a store of the manifest, found by its
    file name), their run CPU-hours and data, or ``not stored``.  The rows follow the paper's figures
    (the first figure that names a report of the store); an experiment no figure names comes last."""
    by_file = {store.name: store_facts for store, store_facts in facts.items()}
    rank: dict[str, int] = {}
    for figure in figures:
        for name in figure.get("reports", []):
            rank.setdefault(reports[name].store.name if name in reports else f"{name}.parquet", len(rank))
    stores = _experiment_stores(experiments)
    rows = []
    for name, store in sorted(stores.items(), key=lambda item: rank.get(item[1] or "", len(rank))):
        stored = by_file.get(store) if store else None
        rows.append({
            "experiment": f"`{name}`",
            "runs stored": "not stored" if stored is None else str(stored.runs),
            "run CPU-h": EMPTY if stored is None else f"{stored.cpu_hours:.2f}",
            "data": EMPTY if stored is None else ", ".join(stored.data),
        })
    return rows


def _versus_paper_cells(rows: list[dict], percent: int, panel_rows: dict[str, dict]) -> list[dict[str, str]]:
    """One row per number of the paper: the paper's mean ± SE at ``percent`` %, ours, and ours minus the
    paper's (its SE from both: the two are independent)."""
    cells = []
    for row in rows:
        title, curves = panel_rows[row["report"]].get(row["panel"], (None, []))
        ours = next((curve for curve in curves if curve.label == row["curve"]), None)
        estimate = None if ours is None else ours.regret[percent]
        if estimate is None:
            raise ValueError(f"{PAPER_FACTS}: {row['report']}: no regret at {percent} % of {row['curve']!r} "
                             f"in panel {row['panel']!r}")
        paper = Estimate(row["paper"][0], row["paper"][1], 1, 1)
        difference = Estimate(estimate.mean - paper.mean, math.hypot(estimate.se, paper.se), 1, 1)
        cells.append({
            "panel": title,
            "curve": row["curve"],
            f"paper @ {percent} %": estimate_cell(paper, 1),
            f"ours @ {percent} %": estimate_cell(estimate, ours.runs),
            "ours − paper": estimate_cell(difference, 1),
        })
    return cells


def write_status(
    results_dir: str | Path,
    reports: list[StoreReport],
    out: str | Path = STATUS_DIR,
    runs: dict[Path, list[RunRow]] | None = None,
    experiments: str | Path = EXPERIMENTS_DIR,
) -> list[Path]:
    """Write the status tables of the module docstring into ``out`` from ``<results_dir>/paper.yaml``,
    the manifest's ``reports`` and their stores (``runs``: their rows by store, if already read) and the
    paper's ``experiments`` (a folder of experiment configs); nothing without a ``paper.yaml``.  Returns
    the files."""
    paper = read_paper_facts(results_dir)
    if paper is None:
        return []
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    by_name = {report.name: report for report in reports}
    rows = {report.store: (runs or {}).get(report.store) or load_rows(report.store) for report in reports}
    facts = {store: StoreFacts.of(store, members) for store, members in rows.items()}
    written = {}

    written["figures.md"] = markdown_table([_figure_cells(figure, by_name, facts) for figure in paper["figures"]])
    experiment_rows = _experiment_cells(Path(experiments), paper["figures"], by_name, facts)
    if experiment_rows:
        written["experiments.md"] = markdown_table(experiment_rows)
    written["stores.md"] = markdown_table([
        facts[store].cells() | {"report": "<br>".join(_command(r.command()) for r in reports if r.store == store)}
        for store in facts
    ])
    for page, names in (paper.get("pages") or {}).items():
        unknown = [name for name in names if name not in by_name]
        if unknown:
            raise ValueError(f"{PAPER_FACTS}: page {page}: no report {', '.join(unknown)} in the manifest")
        stores = dict.fromkeys(by_name[name].store for name in names)
        written[f"page_{page}.md"] = markdown_table([facts[store].cells() for store in stores])
    written["commits.md"] = markdown_table([
        {
            "store": f"`{store.stem}`",
            "commit": f"`{commit}`",
            "runs": str(sum(labels.values())),
            "methods": ", ".join(f"{label} {count}" for label, count in labels.items()),
        }
        for store, store_facts in facts.items()
        for commit, labels in store_facts.by_commit.items()
    ])
    for name, comparison in (paper.get("versus_paper") or {}).items():
        unknown = sorted({row["report"] for row in comparison["rows"]} - set(by_name))
        if unknown:
            raise ValueError(f"{PAPER_FACTS}: versus_paper {name}: no report {', '.join(unknown)} in the manifest")
        panel_rows = {
            report: {
                panel.key: (panel.title, curve_rows(panel))
                for panel in panels(rows[by_name[report].store], by_name[report].mmlu_panels)
            }
            for report in {row["report"] for row in comparison["rows"]}
        }
        written[f"versus_paper_{name}.md"] = markdown_table(
            _versus_paper_cells(comparison["rows"], comparison["percent"], panel_rows)
        )
    paths = []
    for file_name, text in written.items():
        (out / file_name).write_text(text)
        paths.append(out / file_name)
    return paths
