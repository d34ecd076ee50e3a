"""The ``gittinseval`` app: a baseline kept outside the repository joins method sweeps and the help."""

import contextlib
import io
import json
import logging
import os
import re
import subprocess
import sys
import textwrap

import numpy as np
import pytest

from gittinseval.cli.configs import search_path_dirs
from gittinseval.cli.simulate import main
from tests.conftest import logging_as_it_was

OUTSIDE_POLICY = '''
import numpy as np
from gittinseval import Policy, RandomExampleOrder, Request


class RoundRobin(Policy):
    """Pulls the open arms in turn; recommends the best observed mean."""

    name, label = "round_robin", "Round robin"
    uses_prior = False

    def __init__(self, batch_size: int = 4):
        self.batch_size = batch_size

    def reset(self, problem, rng):
        self.order = RandomExampleOrder(problem.n_arms, problem.n_examples, rng)
        self.sums = np.zeros(problem.n_arms)
        self.counts = np.zeros(problem.n_arms)
        self.turn = 0

    def select(self):
        open_arms = np.flatnonzero(self.order.n_taken < self.order.order.shape[1])
        if open_arms.size == 0:
            return None
        arm = int(open_arms[self.turn % open_arms.size])
        self.turn += 1
        return Request(arm, self.order.take(arm, min(self.batch_size, self.order.remaining(arm))))

    def observe(self, request, scores):
        self.sums[request.arm] += scores.sum()
        self.counts[request.arm] += len(scores)

    def recommend(self):
        return int(np.argmax(self.sums / np.maximum(self.counts, 1)))
'''


@pytest.fixture
def outside_baseline(tmp_path):
    """A package ``outside_policies`` and its ``conf/policy/round_robin.yaml`` in a folder of its own."""
    root = tmp_path / "elsewhere"
    (root / "outside_policies").mkdir(parents=True)
    (root / "outside_policies" / "__init__.py").write_text("")
    (root / "outside_policies" / "round_robin.py").write_text(textwrap.dedent(OUTSIDE_POLICY))
    (root / "conf" / "policy").mkdir(parents=True)
    (root / "conf" / "policy" / "round_robin.yaml").write_text(
        "_target_: outside_policies.round_robin.RoundRobin\nbatch_size: 4\n"
    )
    rng = np.random.default_rng(0)
    np.save(tmp_path / "scores.npy", (rng.uniform(size=(6, 40)) < rng.uniform(0.2, 0.8, size=(6, 1))).astype(float))
    return root


def run_app(args, root, cwd):
    env = {**os.environ, "PYTHONPATH": str(root), "WANDB_MODE": "disabled"}
    return subprocess.run([sys.executable, "-m", "gittinseval", *args], cwd=cwd, env=env, capture_output=True,
                          text=True, timeout=300)


def test_an_outside_baseline_joins_a_method_sweep_on_workers_and_appears_in_help(outside_baseline, tmp_path):
    search_path = f"hydra.searchpath=[file://{outside_baseline / 'conf'}]"
    helped = run_app([search_path, "--help"], outside_baseline, tmp_path)
    assert helped.returncode == 0, helped.stderr
    listing = dict(re.findall(r"^  (\w+) +(\S.*(?:\n {14,}\S.*)*)", helped.stdout.split("What the groups are")[0],
                           flags=re.M))
    assert {"round_robin", "gittins_s"} <= set(re.split(r",\s+", listing["method"]))
    assert "round_robin" in re.split(r",\s+", listing["policy"])
    # Two joblib workers: the alias must reach processes that import only the app's module.
    swept = run_app(
        ["-m", search_path, "method=gittins_s,round_robin", "benchmark=matrix",
         f"benchmark.path={tmp_path / 'scores.npy'}", "prior=general", "cost=unit", "logger=none",
         "hydra/launcher=joblib", "hydra.launcher.n_jobs=2",
         f"hydra.sweep.dir={tmp_path / 'sweep'}"],
        outside_baseline, tmp_path,
    )
    assert swept.returncode == 0, swept.stderr
    policies = sorted(json.loads(path.read_text())["policy"] for path in (tmp_path / "sweep").glob("*/summary.json"))
    assert policies == ["gittins", "round_robin"]


def test_without_the_search_path_the_outside_method_is_unknown(outside_baseline, tmp_path):
    refused = run_app(["method=round_robin", "logger=none"], outside_baseline, tmp_path)
    assert refused.returncode == 2 and "round_robin" in refused.stderr


def test_search_path_dirs_reads_file_and_pkg_entries():
    overrides = ["-m", "seed=1", "hydra.searchpath=[file:///tmp/a,file://rel,pkg://gittinseval.live]"]
    folders = search_path_dirs(overrides)
    assert [str(path) for path in folders[:2]] == ["/tmp/a", "rel"]
    assert folders[2].is_dir() and folders[2].name == "live" and folders[2].parent.name == "gittinseval"
    assert search_path_dirs(["seed=1"]) == [] and search_path_dirs(["hydra.searchpath=[unclosed"]) == []


def test_all_subjects_without_multirun_is_one_line_and_exit_2(monkeypatch, capsys):
    monkeypatch.setattr(sys, "argv", ["gittinseval", "benchmark.subject=all", "logger=none"])
    with pytest.raises(SystemExit) as exit_info:
        main()
    assert exit_info.value.code == 2
    assert capsys.readouterr().err == (
        "gittinseval: error: benchmark.subject=all sweeps the 57 MMLU subjects: add -m (multirun)\n"
    )


def test_an_app_run_in_process_leaves_no_handler_on_its_closed_stream_for_later_records(monkeypatch, tmp_path, capfd):
    """Regression (the tests' ``logging_as_it_was``): a Hydra app run in-process adds a console handler on the
    stream it was given; once that stream is closed, every later record was a ``--- Logging error ---`` report."""

    def run_app(name):
        stream = io.StringIO()
        monkeypatch.setattr(sys, "argv", ["gittinseval", "benchmark.subject=abstract_algebra", "budget=0.003",
                                          "logger=none", f"hydra.run.dir={tmp_path / name}"])
        with contextlib.redirect_stdout(stream), contextlib.redirect_stderr(stream):
            main()
        stream.close()

    with logging_as_it_was():
        run_app("restored")
    logging.getLogger("gittinseval").warning("a record after the run")
    assert "Logging error" not in capfd.readouterr().err
    # The check can fail: without the restore, the app's handler outlives its stream.
    with logging_as_it_was():
        run_app("leaked")
        logging.getLogger("gittinseval").warning("a record after the run")
        assert "--- Logging error ---" in capfd.readouterr().err
