"""The manifest of the committed results stores (gittinseval.results.manifest): each entry's options, the command
line that writes its report alone, the report it writes, and the refusals of a bad manifest."""

from pathlib import Path

import pytest

from gittinseval.results import manifest
from gittinseval.results.manifest import StoreReport, read_manifest, read_stores


@pytest.fixture
def results(tmp_path):
    """A folder of two (empty) stores and a manifest of three reports."""
    for name in ("main", "other"):
        (tmp_path / f"{name}.parquet").write_bytes(b"")
    (tmp_path / "reports.yaml").write_text(
        "main:\n"
        "main_sizes: {store: main, mmlu_panels: size, versus: [GittinsEval-S, UCB-E], linear: true, "
        "figures: families, out: elsewhere/sizes}\n"
        "other: {figures: none}\n"
    )
    return tmp_path


def test_each_entry_reads_its_options_and_its_defaults(results):
    main, sizes, other = read_manifest(results)
    assert main == StoreReport("main", results / "main.parquet", Path("docs/figures/main"))
    assert (main.mmlu_panels, main.versus, main.linear, main.figures) == ("bucket", (), False, "all")
    assert sizes == StoreReport("main_sizes", results / "main.parquet", Path("elsewhere/sizes"), "size",
                                ("GittinsEval-S", "UCB-E"), True, "families")
    assert other.store == results / "other.parquet" and other.figures == "none"


def test_the_command_line_of_a_report_gives_only_what_differs_from_the_defaults(results):
    main, sizes, other = read_manifest(results)
    assert main.command() == ["gittinseval-report", str(results / "main.parquet"), "--out", "docs/figures/main"]
    assert sizes.command() == [
        "gittinseval-report", str(results / "main.parquet"), "--out", "elsewhere/sizes", "--mmlu-panels", "size",
        "--versus", "GittinsEval-S", "--versus", "UCB-E", "--linear", "--figures", "families",
    ]
    assert other.command()[-2:] == ["--figures", "none"]


def test_a_report_is_written_with_its_options_and_each_store_is_read_once(results, monkeypatch, tmp_path):
    calls = []
    monkeypatch.setattr(manifest, "write_report", lambda *args, **kwargs: calls.append((args, kwargs)) or "md")
    reports = read_manifest(results)
    assert reports[1].write(draw=False, runs=["rows"]) == "md"
    assert calls == [(([results / "main.parquet"], Path("elsewhere/sizes"), "size"),
                      {"log_cost": False, "versus": ("GittinsEval-S", "UCB-E"), "figures": "families", "draw": False,
                       "runs": ["rows"]})]
    reports[0].write(tmp_path / "fresh")
    assert calls[-1][0][1] == tmp_path / "fresh" and calls[-1][1]["log_cost"] is True
    read = []
    monkeypatch.setattr(manifest, "load_rows", lambda store: read.append(store) or [store.stem])
    assert read_stores(reports) == {results / "main.parquet": ["main"], results / "other.parquet": ["other"]}
    assert read == [results / "main.parquet", results / "other.parquet"]  # main is read once for two reports


@pytest.mark.parametrize(
    ("text", "error", "message"),
    [
        ("main: {store: main\n", ValueError, r"reports.yaml: not valid YAML \(line 2, column 1\): .*; fix the file's"),
        ("- main\n- other\n", ValueError, "reports.yaml: expected a mapping of report names to report options"),
        ("main: {mmlu_panels: buckets}\n", ValueError, "main: mmlu_panels must be one of bucket, size, subject, got "
                                                       "'buckets'"),
    ],
)
def test_a_bad_manifest_is_named_with_its_file_and_entry(results, text, error, message):
    (results / "reports.yaml").write_text(text)
    with pytest.raises(error, match=message):
        read_manifest(results)


def test_a_folder_without_a_manifest_is_refused(tmp_path):
    with pytest.raises(FileNotFoundError, match="reports.yaml: no report manifest"):
        read_manifest(tmp_path)
    (tmp_path / "reports.yaml").write_text("")
    assert read_manifest(tmp_path) == []  # an empty manifest lists no report
