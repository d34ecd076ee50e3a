"""One contract for every policy: each check of ``gittinseval.policy_checks`` over every
``conf/policy/*.yaml``, the example baseline of docs/baselines.md, and a policy added in a temporary
folder (one module and one yaml, no edit anywhere else).  A new baseline's yaml is
checked here with no edit."""

import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from hydra import compose, initialize_config_dir
from hydra.utils import instantiate

from gittinseval.cli.configs import CONFIG_DIR
from gittinseval.core.protocol import Policy
from gittinseval.policy_checks import CHECKS, check_policy, conformance_benchmark

POLICY_NAMES = sorted(p.stem for p in (CONFIG_DIR / "policy").glob("*.yaml"))


def factory(name: str, search_path: Path | None = None):
    """Fresh policies as configured by ``policy=<name>``, with a batch size this small benchmark allows."""
    overrides = [f"policy={name}", "prior=general"]
    if search_path is not None:
        overrides.append(f"hydra.searchpath=[file://{search_path}]")
    with initialize_config_dir(config_dir=str(CONFIG_DIR), version_base="1.3"):
        cfg = compose(config_name="config", overrides=overrides)
    if "batch_size" in cfg.policy:
        cfg.policy.batch_size = 2  # the paper's sizes (LRF: 32) exceed this benchmark's N
    return lambda: instantiate(cfg.policy)


@pytest.fixture(scope="module")
def bench():
    return conformance_benchmark()


@pytest.mark.parametrize("check", CHECKS, ids=lambda check: check.__name__)
@pytest.mark.parametrize("name", POLICY_NAMES)
def test_every_configured_policy_keeps_the_contract(name, check, bench):
    make = factory(name)
    assert make().name == name, "a policy is named after its config file"
    check(make, bench)


def test_the_documented_example_baseline_keeps_the_contract(example_baseline):
    check_policy(factory("greedy", example_baseline / "my_conf"))


BROKEN_CANCEL = '''
import numpy as np
from gittinseval import Policy, RandomExampleOrder, Request

class FirstOpenArm(Policy):
    """Evaluates the arms in turn, batch by batch{doc}."""
    name, label = "first_open", "First open arm"

    def __init__(self, batch_size: int = 2):
        self.batch_size = batch_size

    def reset(self, problem, rng):
        self.order = RandomExampleOrder(problem.n_arms, problem.n_examples, rng)
        self.sums = np.zeros(problem.n_arms)
        self.counts = np.zeros(problem.n_arms)

    def select(self):
        for arm in range(len(self.sums)):
            if self.order.remaining(arm):
                return Request(arm, self.order.take(arm, min(self.batch_size, self.order.remaining(arm))))
        return None
{cancel}
    def observe(self, request, scores):
        self.sums[request.arm] += scores.sum()
        self.counts[request.arm] += len(scores)

    def recommend(self):
        return int(np.argmax(self.sums / np.maximum(self.counts, 1)))
'''


def add_policy(folder: Path, package_name: str, cancel: str = "", doc: str = "") -> Path:
    """A policy package and its yaml in ``folder``: one module and one config file.

    Each test names its own package: Python caches an imported module by name.
    """
    package = folder / package_name
    package.mkdir(exist_ok=True)
    (package / "__init__.py").write_text("")
    (package / "first_open.py").write_text(BROKEN_CANCEL.format(cancel=cancel, doc=doc))
    (folder / "conf" / "policy").mkdir(parents=True, exist_ok=True)
    (folder / "conf" / "policy" / "first_open.yaml").write_text(
        f"_target_: {package_name}.first_open.FirstOpenArm\nbatch_size: 2\n"
    )
    return folder / "conf"


def test_a_policy_added_in_a_new_folder_is_checked_and_runs_from_the_command_line(tmp_path, monkeypatch):
    conf = add_policy(tmp_path, "added_policies")
    monkeypatch.syspath_prepend(str(tmp_path))
    check_policy(factory("first_open", conf))
    completed = subprocess.run(
        [sys.executable, "-m", "gittinseval", "policy=first_open", f"hydra.searchpath=[file://{conf}]",
         "benchmark.subject=abstract_algebra", "logger=none", "budget=0.01", f"hydra.run.dir={tmp_path / 'run'}"],
        capture_output=True, text=True, timeout=300, cwd=tmp_path,  # the folder is on sys.path
    )
    assert completed.returncode == 0, completed.stderr
    assert (tmp_path / "run" / "summary.json").is_file()


def test_the_checks_catch_a_policy_that_breaks_the_contract(tmp_path, monkeypatch):
    """A cancel that forgets to give the examples back fails the cancel check, and only it."""
    forgetful = textwrap.indent("def cancel(self, request):\n    pass\n", "    ")
    conf = add_policy(tmp_path, "broken_policies", cancel=forgetful, doc=" (its cancel is broken)")
    monkeypatch.syspath_prepend(str(tmp_path))
    make = factory("first_open", conf)
    bench = conformance_benchmark()
    failed = []
    for check in CHECKS:
        try:
            check(make, bench)
        except AssertionError:
            failed.append(check.__name__)
    assert failed == ["check_cancel"]


def test_a_policy_that_does_not_keep_its_arguments_cannot_be_recorded():
    class Forgetful(Policy):
        def __init__(self, lam: float = 1.0):
            self.scale = lam

        reset = select = observe = recommend = None

    with pytest.raises(TypeError, match="constructor argument 'lam' is not kept as attribute self.lam"):
        Forgetful().get_params()
