"""A wrong setting is one line on stderr that names it, and a non-zero exit."""

import os
import re
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

GITTINSEVAL = str(Path(sys.executable).with_name("gittinseval"))


@pytest.fixture(scope="module")
def matrix(tmp_path_factory):
    path = tmp_path_factory.mktemp("data") / "scores.npy"
    np.save(path, (np.random.default_rng(0).uniform(size=(6, 200)) < 0.5).astype(float))
    return path


def run(matrix, tmp_path, *overrides, full_error=False):
    env = {key: value for key, value in os.environ.items() if key != "HYDRA_FULL_ERROR"}
    if full_error:
        env["HYDRA_FULL_ERROR"] = "1"
    command = [GITTINSEVAL, "benchmark=matrix", f"benchmark.path={matrix}", "prior=general", "cost=unit",
               "logger=none", f"hydra.run.dir={tmp_path / 'run'}", *overrides]
    return subprocess.run(command, capture_output=True, text=True, env=env, timeout=120)


@pytest.mark.parametrize(
    "override, message",
    [
        ("budget=0", "budget must be a number in (0, 1], got 0"),
        ("budget=abc", "budget must be a number in (0, 1], got 'abc'"),
        ("seed=-1", "seed must be a non-negative integer, got -1"),
        ("policy.batch_size=500", "batch_size (500) is larger than the number of examples N = 200"),
        ("policy.kappa=-1", "kappa must be finite and >= 0"),
        ("prior.mean=1.5", "prior.mean must lie in [0, 1]"),
    ],
)
def test_a_wrong_setting_is_one_named_line(matrix, tmp_path, override, message):
    result = run(matrix, tmp_path, override)
    assert result.returncode == 2
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("gittinseval: error: ")
    assert message in lines[0]
    assert "Traceback" not in result.stderr


def test_full_error_keeps_the_trace(matrix, tmp_path):
    result = run(matrix, tmp_path, "budget=0", full_error=True)
    assert result.returncode != 0 and "Traceback" in result.stderr and "budget must be a number" in result.stderr


def test_help_describes_the_app_and_lists_every_simulation_option():
    result = subprocess.run([GITTINSEVAL, "--help"], capture_output=True, text=True, timeout=120)
    assert result.returncode == 0
    assert result.stdout.startswith("gittinseval: simulate cost-aware adaptive evaluation")
    conf = Path(__file__).resolve().parent.parent / "conf"
    for group in ("benchmark", "policy", "prior", "cost", "logger", "method", "experiment"):
        for option in (conf / group).rglob("*.yaml"):
            name = option.relative_to(conf / group).with_suffix("").as_posix()
            assert re.search(rf"(?<![\w/]){re.escape(name)}(?![\w/])", result.stdout), f"{group}={name} not in --help"
    assert "live" not in result.stdout.replace("gittinseval-live", "")
    assert result.stdout.count("gittinseval ") >= 3  # three examples
