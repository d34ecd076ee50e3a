"""The ``gittinseval-report`` command (gittinseval.cli.report): its options as the report receives them, where a
report goes by default, and its errors as one line with exit code 2."""

from pathlib import Path

import pytest

from gittinseval.cli import report as report_cli
from gittinseval.cli.report import build_parser, main


@pytest.fixture
def written(monkeypatch, tmp_path):
    """The calls of the report writer, which writes only its ``report.md``."""
    calls = []

    def write_report(sources, out, mmlu_panels, log_cost, versus, figures):
        calls.append({"sources": sources, "out": Path(out), "mmlu_panels": mmlu_panels, "log_cost": log_cost,
                      "versus": versus, "figures": figures})
        Path(out).mkdir(parents=True, exist_ok=True)
        (Path(out) / "report.md").write_text("# the report\n")
        return Path(out) / "report.md"

    monkeypatch.setattr(report_cli, "write_report", write_report)
    monkeypatch.chdir(tmp_path)
    return calls


def test_the_defaults_and_each_option_reach_the_report(written, capsys):
    main(["sweep"])
    assert written[-1] == {"sources": ["sweep"], "out": Path("sweep/report"), "mmlu_panels": "bucket",
                           "log_cost": True, "versus": (), "figures": "all"}
    out = capsys.readouterr().out
    assert out.startswith("# the report\n") and "wrote sweep/report/ (report.md" in out
    main(["a", "b.parquet", "--out", "mine", "--mmlu-panels", "subject", "--linear", "--versus", "UCB-E",
          "--versus", "GittinsEval-S", "--figures", "none"])
    assert written[-1] == {"sources": ["a", "b.parquet"], "out": Path("mine"), "mmlu_panels": "subject",
                           "log_cost": False, "versus": ("UCB-E", "GittinsEval-S"), "figures": "none"}


def test_a_store_is_reported_under_outputs_not_beside_it(written):
    main(["docs/results/gsm8k.parquet"])
    assert written[-1]["out"] == Path("outputs/report/gsm8k")
    assert (Path("outputs/report/gsm8k/report.md")).is_file()


def test_an_output_folder_that_cannot_be_written_stops_before_any_run_is_read(written, tmp_path, capsys):
    (tmp_path / "taken").write_text("a file")
    with pytest.raises(SystemExit) as exit_info:
        main(["sweep", "--out", "taken/report"])
    assert exit_info.value.code == 2 and written == []
    err = capsys.readouterr().err
    assert err.startswith("gittinseval-report: error: --out") and err.count("\n") == 1


def test_a_folder_without_a_manifest_is_one_line_with_exit_code_2(tmp_path, capsys):
    with pytest.raises(SystemExit) as exit_info:
        main(["--all", str(tmp_path)])
    assert exit_info.value.code == 2
    assert capsys.readouterr().err == (
        f"gittinseval-report: error: {tmp_path / 'reports.yaml'}: no report manifest (one entry per store: its "
        "report options)\n"
    )


@pytest.mark.parametrize("argv", [[], ["sweep", "--mmlu-panels", "buckets"], ["sweep", "--figures", "regret"]])
def test_a_command_line_the_parser_refuses_exits_2(argv, capsys):
    with pytest.raises(SystemExit) as exit_info:
        build_parser().parse_args(argv)
    assert exit_info.value.code == 2 and "usage: gittinseval-report" in capsys.readouterr().err
