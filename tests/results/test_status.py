"""The status tables: the paper's figures and tables beside the committed stores, each store's runs by
commit, and the paper's numbers beside ours (gittinseval/results/status.py)."""

from collections import Counter

import pytest

from gittinseval.results.manifest import read_manifest
from gittinseval.results.panels import curve_rows, panels
from gittinseval.results.status import data_kind, write_status
from gittinseval.sim.results_store import export_rows, read_store
from tests.results.conftest import RESULTS

PAPER = """
figures:
  - {name: "Fig. a", page: main, runs: 40, reports: [small, absent]}
  - {name: "Fig. b", runs: not stated, reports: [absent], data: real, note: "see elsewhere"}
  - {name: "Table c", file: conf/experiment/paper/}
  - {name: "Fig. d", data: stand-in, command: make results}
pages:
  main: [small]
versus_paper:
  check:
    percent: 5
    rows:
      - {report: small, panel: alpacaeval_paper_unit, curve: UCB-E, paper: [0.01, 0.003]}
"""


@pytest.fixture
def small_results(in_repository, tmp_path):
    """A results folder with one store (two seeds of AlpacaEval, two commits) and a paper.yaml."""
    rows = [row for row in read_store(RESULTS / "main_alpacaeval.parquet") if row.summary["seed"] < 2]
    for row in rows[:3]:
        row.summary["commit"] = "0123456789abcdef-dirty"
    for row in rows:
        row.summary["wall_time_s"] = 90.0  # 40 runs per CPU-hour
    results = tmp_path / "results"
    results.mkdir()
    export_rows(rows, results / "small.parquet")
    (results / "reports.yaml").write_text(f"small: {{out: {tmp_path / 'small'}, versus: [GittinsEval-S]}}\n")
    (results / "paper.yaml").write_text(PAPER)
    return results, rows


def _table(path):
    header, _, *lines = path.read_text().splitlines()
    columns = [cell.strip() for cell in header.strip("|").split("|")]
    return [dict(zip(columns, (cell.strip() for cell in line.strip("|").split(" | ")), strict=True)) for line in lines]


def test_the_figures_table_counts_our_runs_against_the_papers(small_results, tmp_path):
    results, rows = small_results
    written = write_status(results, read_manifest(results), tmp_path / "status")
    assert sorted(path.name for path in written) == [
        "commits.md", "experiments.md", "figures.md", "page_main.md", "stores.md", "versus_paper_check.md"
    ]
    a, b, c, d = _table(tmp_path / "status" / "figures.md")
    store = f"`{results / 'small.parquet'}`"
    assert a["paper"] == "Fig. a ([page](main.md))" and a["runs: ours / paper"] == f"{len(rows)} / 40"
    assert a["data"] == "stand-in" and a["run CPU-h"] == f"{len(rows) / 40:.2f}"
    assert a["store"] == f"{store}, missing: `docs/results/absent.parquet`"
    assert a["regenerate"] == (
        f"`.venv/bin/gittinseval-report {results / 'small.parquet'} --out {tmp_path / 'small'} --versus GittinsEval-S`"
        "<br>`.venv/bin/gittinseval -m experiment=paper/absent`"
    )
    assert b["paper"] == "Fig. b; see elsewhere" and b["runs: ours / paper"] == "none / not stated"
    assert b["data"] == "real"
    assert (c["store"], c["data"], c["runs: ours / paper"], c["run CPU-h"], c["regenerate"]) == (
        "`conf/experiment/paper/`", "input", "– / –", "–", "–"
    )
    assert (d["store"], d["data"], d["regenerate"]) == ("–", "stand-in", "`make results`")


def test_a_page_opens_with_its_stores_and_commits_are_listed(small_results, tmp_path):
    results, rows = small_results
    write_status(results, read_manifest(results), tmp_path / "status")
    (page,) = _table(tmp_path / "status" / "page_main.md")
    assert page == {
        "store": f"`{results / 'small.parquet'}`", "runs": str(len(rows)), "seeds": "2",
        "run CPU-h": f"{len(rows) / 40:.2f}",
        "commits": f"`8ca6247` ({len(rows) - 3}), `0123456-dirty` (3)", "data": "stand-in", "SE": "clustered by seed",
    }
    commits = _table(tmp_path / "status" / "commits.md")
    assert [(c["commit"], c["runs"]) for c in commits] == [("`8ca6247`", str(len(rows) - 3)), ("`0123456-dirty`", "3")]
    labels = Counter(row.summary["label"] for row in rows[:3])
    assert sorted(commits[1]["methods"].split(", ")) == sorted(f"{label} {n}" for label, n in labels.items())


def test_every_experiment_of_the_paper_has_its_stores_runs_in_the_order_of_the_figures(small_results, tmp_path):
    results, rows = small_results
    experiments = tmp_path / "experiments"
    experiments.mkdir()
    # A list of stores: the experiment's own is the first (its sweep's runs are exported there).
    (experiments / "small.yaml").write_text(f"# @package _global_\nresults_store: [{results / 'small.parquet'}, "
                                            "docs/results/absent.parquet]\n")
    (experiments / "absent.yaml").write_text("results_store: docs/results/absent.parquet\n")
    (experiments / "another.yaml").write_text("# @package _global_\nseed: 3\n")  # no store of its own
    write_status(results, read_manifest(results), tmp_path / "status", experiments=experiments)
    assert _table(tmp_path / "status" / "experiments.md") == [
        {"experiment": "`paper/small`", "runs stored": str(len(rows)), "run CPU-h": f"{len(rows) / 40:.2f}",
         "data": "stand-in"},
        {"experiment": "`paper/absent`", "runs stored": "not stored", "run CPU-h": "–", "data": "–"},
        {"experiment": "`paper/another`", "runs stored": "not stored", "run CPU-h": "–", "data": "–"},
    ]
    (experiments / "another.yaml").write_text("results_store: [unclosed\n")
    with pytest.raises(ValueError, match="another.yaml: not valid YAML"):
        write_status(results, read_manifest(results), tmp_path / "status", experiments=experiments)
    (experiments / "another.yaml").write_text("results_store: [docs/results/a.parquet, docs/results]\n")
    with pytest.raises(ValueError, match="another.yaml: results_store must .*; entry 2 of the list is 'docs/results'"):
        write_status(results, read_manifest(results), tmp_path / "status", experiments=experiments)
    for path in experiments.iterdir():
        path.unlink()
    written = write_status(results, read_manifest(results), tmp_path / "none", experiments=experiments)
    assert "experiments.md" not in {path.name for path in written}


def test_the_papers_numbers_are_set_beside_ours(small_results, tmp_path):
    results, rows = small_results
    write_status(results, read_manifest(results), tmp_path / "status")
    (row,) = _table(tmp_path / "status" / "versus_paper_check.md")
    (panel,) = [p for p in panels(rows) if p.key == "alpacaeval_paper_unit"]
    ours = next(c for c in curve_rows(panel) if c.label == "UCB-E").regret[5]
    difference = ours.mean - 0.01, (ours.se**2 + 0.003**2) ** 0.5
    assert row == {
        "panel": panel.title, "curve": "UCB-E", "paper @ 5 %": "0.0100 ± 0.0030",
        "ours @ 5 %": f"{ours.mean:.4f} ± {ours.se:.4f}", "ours − paper": f"{difference[0]:.4f} ± {difference[1]:.4f}",
    }


def test_bad_facts_are_named(small_results, tmp_path):
    results, _ = small_results
    reports = read_manifest(results)
    for text, error in (
        ("figure: []", r"unknown keys \['figure'\]"),
        ("figures: [{name: x, store: small}]", r"x: unknown keys \['store'\]"),
        ("figures: [{name: x, file: y}]\npages: {main: [nothing]}", "page main: no report nothing in the manifest"),
        (PAPER.replace("curve: UCB-E", "curve: Nobody"), "no regret at 5 % of 'Nobody'"),
        (PAPER.replace("{report: small, panel", "{report: large, panel"), "versus_paper check: no report large"),
    ):
        (results / "paper.yaml").write_text(text)
        with pytest.raises(ValueError, match=error):
            write_status(results, reports, tmp_path / "status")
    (results / "paper.yaml").unlink()
    assert write_status(results, reports, tmp_path / "none") == [] and not (tmp_path / "none").exists()


def test_the_kind_of_data_is_read_from_a_runs_summary():
    assert data_kind({"stand_in": True, "data_source": "stand-in for BanditEval"}) == "stand-in"
    assert data_kind({"stand_in": False, "data_source": "DOVE: real row sums, synthesized item assignment"}) == (
        "real row sums"
    )
    assert data_kind({"stand_in": False, "data_source": "ZeroEval replies"}) == "real"
