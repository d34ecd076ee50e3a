"""The results pages' tables regenerate from the committed stores (gittinseval/results/regenerate.py),
and the manifest says how."""

import shutil
from pathlib import Path

import pytest

from gittinseval.cli.report import build_parser, main
from gittinseval.results.manifest import read_manifest
from gittinseval.results.regenerate import differences, regenerate
from gittinseval.results.status import STATUS_DIR
from gittinseval.results.verdict_tables import VERDICTS_DIR
from gittinseval.sim.results_store import export_rows, read_store
from tests.results.conftest import RESULTS


def test_every_committed_store_is_in_the_manifest(in_repository):
    listed = {report.store.name for report in read_manifest(RESULTS)}
    assert listed == {path.name for path in RESULTS.glob("*.parquet")}


def test_every_committed_table_is_what_its_store_gives(in_repository, regenerated):
    fresh, reports, seconds = regenerated
    for report in reports:
        assert report.out.is_dir(), f"{report.out}: not committed; run make results"
        assert differences(report.out, fresh / report.name) == [], f"{report.out} differs from {report.store}"
    assert differences(STATUS_DIR, fresh / STATUS_DIR.name) == [], f"{STATUS_DIR}: run make results"
    assert differences(VERDICTS_DIR, fresh / VERDICTS_DIR.name) == [], f"{VERDICTS_DIR}: run make results"
    # Tables alone: about 2 s for the 15 reports on the 2-core machine, most of it reading the stores.
    assert seconds < 3 * len(reports)


def test_one_changed_number_or_a_missing_table_is_found(in_repository, tmp_path):
    committed = tmp_path / "committed"
    shutil.copytree("docs/figures/mmlu_buckets", committed)
    fresh = tmp_path / "fresh"
    shutil.copytree("docs/figures/mmlu_buckets", fresh)
    assert differences(committed, fresh) == []
    table = committed / "mmlu_hard-large_aware.md"
    text = table.read_text()
    digit = next(i for i, char in enumerate(text) if char.isdigit() and i > text.index("\n"))
    table.write_text(text[:digit] + str((int(text[digit]) + 1) % 10) + text[digit + 1:])
    (fresh / "overview.md").unlink()
    assert differences(committed, fresh) == [f"overview.md (only in {committed})", "mmlu_hard-large_aware.md"]


def test_a_page_the_report_writes_but_that_is_not_committed_is_found(in_repository, tmp_path):
    """A table new to the report (here stopping.md), written by make results but never committed: a clean clone's
    folder lacks it, and the check names it."""
    fresh = tmp_path / "fresh"
    shutil.copytree("docs/figures/mmlu_buckets", fresh)
    committed = tmp_path / "committed"
    shutil.copytree("docs/figures/mmlu_buckets", committed)
    (committed / "stopping.md").unlink()
    assert differences(committed, fresh) == [f"stopping.md (only in {fresh})"]


def test_the_command_of_each_report_parses_to_its_options(in_repository):
    for report in read_manifest(RESULTS):
        program, *argv = report.command()
        args = build_parser().parse_args(argv)
        assert program == "gittinseval-report" and args.sources == [str(report.store)]
        assert (args.out, args.mmlu_panels, tuple(args.versus), args.linear, args.figures) == (
            str(report.out), report.mmlu_panels, report.versus, report.linear, report.figures
        )


def test_regenerate_leaves_in_a_folder_only_what_its_report_writes(in_repository, tmp_path):
    results = tmp_path / "results"
    results.mkdir()
    rows = [row for row in read_store(RESULTS / "main_alpacaeval.parquet") if row.summary["seed"] < 2]
    export_rows(rows, results / "small.parquet")
    out = tmp_path / "figures" / "small"
    (results / "reports.yaml").write_text(f"small: {{out: {out}, figures: none}}\n")
    out.mkdir(parents=True)
    for stale in ("alpacaeval_paper.png", "gone.md"):
        (out / stale).write_text("from an earlier report")
    (out / "notes.txt").write_text("not the report's")
    (report,) = regenerate(results, status_out=tmp_path / "status")
    assert report.out == out and (out / "alpacaeval_paper_unit_versus_gittinseval-s.md").is_file() is False
    assert not (out / "gone.md").exists() and not (out / "alpacaeval_paper.png").exists()
    assert (out / "notes.txt").is_file() and (out / "alpacaeval_paper_unit.md").is_file()
    assert not (tmp_path / "status").exists()  # no paper.yaml: no status tables


def test_a_bad_manifest_is_named(tmp_path, capsys):
    (tmp_path / "reports.yaml").write_text("nowhere:\n")
    with pytest.raises(SystemExit) as exit_info:
        main(["--all", str(tmp_path)])
    assert exit_info.value.code == 2
    assert f"reports.yaml: nowhere: no store {tmp_path / 'nowhere.parquet'}" in capsys.readouterr().err
    (tmp_path / "nowhere.parquet").write_bytes(b"")
    for options, error in (
        ("{mmlu_panel: size}", "unknown keys ['mmlu_panel']"),
        ("{figures: regret}", "figures must be one of all, families, timing, none, got 'regret'"),
        ("{store: elsewhere}", f"nowhere: no store {tmp_path / 'elsewhere.parquet'}"),
    ):
        (tmp_path / "reports.yaml").write_text(f"nowhere: {options}\n")
        with pytest.raises(SystemExit):
            main(["--all", str(tmp_path)])
        assert error in capsys.readouterr().err


def test_a_store_may_have_several_reports(tmp_path):
    (tmp_path / "main.parquet").write_bytes(b"")
    (tmp_path / "reports.yaml").write_text("main:\nmain_by_subject: {store: main, mmlu_panels: subject}\n")
    first, second = read_manifest(tmp_path)
    assert first.store == second.store == tmp_path / "main.parquet"
    assert (first.out, second.out) == (Path("docs/figures/main"), Path("docs/figures/main_by_subject"))
    assert second.command()[-2:] == ["--mmlu-panels", "subject"]
