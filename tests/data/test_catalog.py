"""`gittinseval-data list`."""

import subprocess
import sys

from gittinseval.cli.configs import CONFIG_DIR
from gittinseval.data.catalog import catalog


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


def test_list_command_prints_the_catalog():
    command = [sys.executable, "-m", "gittinseval.cli.data", "list"]
    out = subprocess.run(command, capture_output=True, text=True, check=True)
    assert "alpacaeval_paper" in out.stdout and "K=152 N=805" in out.stdout
    assert "licence: CC BY-NC 4.0" in out.stdout
