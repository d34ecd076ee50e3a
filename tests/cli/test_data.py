"""The ``gittinseval-data`` command (gittinseval.cli.data): the catalog of the bundled benchmarks, and the paper's
arm-quality figures."""

import subprocess
import sys

import pytest

from gittinseval.cli.data import main, write_arm_quality
from gittinseval.data.catalog import catalog


def test_list_command_prints_the_catalog():
    command = [sys.executable, "-m", "gittinseval.cli.data", "list"]
    out = subprocess.run(command, capture_output=True, text=True, check=True)
    assert "alpacaeval_paper" in out.stdout and "K=152 N=805" in out.stdout
    assert "licence: CC BY-NC 4.0" in out.stdout


def test_data_quality_command_writes_the_papers_figures(tmp_path, capsys):
    main(["quality", "gsm8k", "--out", str(tmp_path)])
    assert (tmp_path / "arm_quality_gsm8k.png").is_file() and "wrote" in capsys.readouterr().out
    with pytest.raises(SystemExit) as error:
        main(["quality", "bogus", "--out", str(tmp_path)])
    assert error.value.code == 2


def test_list_prints_each_benchmark_named_with_its_size_source_and_licence(capsys):
    main(["list", "piqa", "alpacaeval"])
    expected = []
    for entry in catalog(["piqa", "alpacaeval"]):
        expected += [entry.name, f"  K={entry.n_arms} N={entry.n_examples} values={entry.values} data={entry.status}",
                     f"  source: {entry.source}", f"  licence: {entry.license}"]
    assert capsys.readouterr().out.splitlines() == expected
    assert expected[0].split()[0] == "piqa" and expected[4].split()[0] == "alpacaeval"  # in the order asked


def test_an_unknown_family_of_figures_is_named_before_anything_is_drawn(tmp_path):
    with pytest.raises(ValueError, match="unknown benchmark family 'mmlux'; choose from gsm8k, piqa, mmlu"):
        write_arm_quality(["mmlux"], tmp_path)
    assert not list(tmp_path.iterdir())
