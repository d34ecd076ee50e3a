"""The benchmark catalog (gittinseval.data.catalog) that `gittinseval-data list` prints."""

import shutil
import subprocess
import sys

import numpy as np
import pytest

from gittinseval.cli.configs import CONFIG_DIR
from gittinseval.data import Benchmark
from gittinseval.data import catalog as catalog_module
from gittinseval.data.catalog import catalog, data_status


def test_catalog_lists_every_benchmark_with_provenance():
    entries = {e.name.split()[0]: e for e in catalog()}
    # Every option of the benchmark= group, and nothing else.
    assert set(entries) == {path.stem for path in (CONFIG_DIR / "benchmark").glob("*.yaml")}
    assert {"mmlu", "alpacaeval", "alpacaeval_paper", "gsm8k", "piqa", "matrix", "gsm8k_zeroeval", "crux_zeroeval",
            "math_l5_zeroeval"} <= set(entries)
    zeroeval = (("gsm8k_zeroeval", "41", "1319"), ("crux_zeroeval", "48", "800"), ("math_l5_zeroeval", "38", "721"))
    for name, k, n in zeroeval:
        assert (entries[name].n_arms, entries[name].n_examples, entries[name].values) == (k, n, "binary")
        assert entries[name].status.startswith("real") and "Apache-2.0" in entries[name].license
    assert entries["mmlu"].n_arms == "1500" and entries["mmlu"].n_examples == "100-1534"
    assert entries["alpacaeval"].values == "continuous" and entries["alpacaeval"].status == "real"
    assert "stand-in" in entries["gsm8k"].status and "stand-in" in entries["alpacaeval_paper"].status
    assert all(e.license for e in entries.values())


def test_a_benchmark_config_added_to_the_group_is_listed_with_no_edit(tmp_path, monkeypatch):
    """The catalog reads conf/benchmark/: a new yaml (here the toy matrix with a name and prices, as a bundled
    benchmark of the user's data) is an entry of its own, loaded with the file's settings."""
    for path in (CONFIG_DIR / "benchmark").glob("*.yaml"):
        shutil.copy(path, tmp_path)
    examples = CONFIG_DIR.parent / "gittinseval" / "data" / "files" / "examples"
    (tmp_path / "toy.yaml").write_text(
        f"_target_: gittinseval.data.load_matrix\npath: {examples / 'scores.csv'}\ncosts: {examples / 'prices.csv'}\n"
    )
    monkeypatch.setattr(catalog_module, "BENCHMARK_DIR", tmp_path)
    entries = {e.name.split()[0]: e for e in catalog()}
    assert set(entries) == {path.stem for path in tmp_path.glob("*.yaml")}
    toy = entries["toy"]
    assert (toy.name, toy.n_arms, toy.n_examples, toy.values, toy.status) == ("toy", "8", "200", "binary", "real")
    assert toy.license == "user data" and toy.source.endswith("scores.csv")
    assert catalog()[-1].status == "your own"  # benchmark=matrix, the user's own files, comes last


def test_an_unknown_benchmark_is_an_error_that_names_the_known_ones():
    names = sorted(path.stem for path in (CONFIG_DIR / "benchmark").glob("*.yaml"))
    assert [e.name.split()[0] for e in catalog(["piqa", "crux_zeroeval"])] == ["piqa", "crux_zeroeval"]
    with pytest.raises(ValueError, match=r"unknown benchmark 'mmlux' \(did you mean mmlu\?\)") as error:
        catalog(["mmlux"])
    assert str(error.value).endswith(", ".join(names))
    command = [sys.executable, "-m", "gittinseval.cli.data", "list", "no_such_benchmark"]
    out = subprocess.run(command, capture_output=True, text=True)
    assert out.returncode == 2 and out.stderr.startswith("gittinseval-data: error: unknown benchmark")
    assert "Traceback" not in out.stderr and "gsm8k_zeroeval" in out.stderr


def test_the_data_status_says_what_is_real():
    scores = np.array([[0.0, 1.0], [1.0, 1.0]])
    assert data_status(Benchmark("b", scores)) == "real"
    assert data_status(Benchmark("b", scores, stand_in=True)) == "stand-in"
    assert data_status(Benchmark("b", scores, prices=[1.0, 2.0], stand_in=True)) == (
        "stand-in (real configurations and prices)"
    )
    assert data_status(Benchmark("b", scores, details={"synthesized_arms": ["x"]})) == (
        "1 real rows, 1 synthesized (stand-in)"
    )
    per_cell = Benchmark("b", scores, cell_costs=np.ones((2, 2)))
    assert data_status(per_cell) == "real, with per-cell costs (cost=per_cell)"
