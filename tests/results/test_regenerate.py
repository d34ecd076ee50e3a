"""The results pages' tables regenerate from the committed stores (gittinseval/results/regenerate.py)."""

import shutil
from pathlib import Path

import pytest

from gittinseval.cli.report import main
from gittinseval.results.regenerate import differences, read_manifest

REPOSITORY = Path(__file__).resolve().parents[2]


@pytest.fixture
def in_repository(monkeypatch):
    # The manifest's paths, and the stores' names in each report.md, are relative to the repository.
    monkeypatch.chdir(REPOSITORY)


def test_every_committed_store_is_in_the_manifest(in_repository):
    listed = {report.store.name for report in read_manifest("docs/results")}
    assert listed == {path.name for path in Path("docs/results").glob("*.parquet")}


def test_every_committed_report_table_is_what_its_store_gives(in_repository, tmp_path):
    for report in read_manifest("docs/results"):
        fresh = tmp_path / report.out.name
        report.write(fresh)
        assert report.out.is_dir(), f"{report.out}: not committed; run make results"
        assert differences(report.out, fresh) == [], f"{report.out} differs from its store {report.store}"


def test_one_changed_number_or_a_missing_table_is_found(in_repository, tmp_path):
    committed = tmp_path / "committed"
    shutil.copytree("docs/figures/mmlu_buckets", committed)
    fresh = tmp_path / "fresh"
    shutil.copytree("docs/figures/mmlu_buckets", fresh)
    assert differences(committed, fresh) == []
    table = committed / "mmlu_hard-large_aware.md"
    text = table.read_text()
    digit = next(i for i, char in enumerate(text) if char.isdigit() and i > text.index("|"))
    table.write_text(text[:digit] + str((int(text[digit]) + 1) % 10) + text[digit + 1:])
    (fresh / "overview.md").unlink()
    assert differences(committed, fresh) == [f"overview.md (only in {committed})", "mmlu_hard-large_aware.md"]


def test_a_bad_manifest_is_named(tmp_path, capsys):
    (tmp_path / "reports.yaml").write_text("nowhere:\n")
    with pytest.raises(SystemExit) as exit_info:
        main(["--all", str(tmp_path)])
    assert exit_info.value.code == 2
    assert f"reports.yaml: nowhere: no store {tmp_path / 'nowhere.parquet'}" in capsys.readouterr().err
    (tmp_path / "nowhere.parquet").write_bytes(b"")
    (tmp_path / "reports.yaml").write_text("nowhere: {mmlu_panel: size}\n")
    with pytest.raises(SystemExit):
        main(["--all", str(tmp_path)])
    assert "unknown keys ['mmlu_panel']" in capsys.readouterr().err
