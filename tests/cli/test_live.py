"""The gittinseval-live Hydra app: its config composes, the MMLU example runs offline and resumes."""

import json
import os
import socket
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from hydra import compose, initialize_config_dir
from hydra.errors import ConfigCompositionException
from hydra.utils import instantiate

from gittinseval import GaussianPrior
from gittinseval.cli.configs import CONFIG_DIR
from gittinseval.cli.live import LIVE_CONFIG_NAME
from gittinseval.data import load_mmlu
from gittinseval.live import LiveTask
from gittinseval.live.app import dry_run, run_live
from gittinseval.live.fake_server import FakeChatServer
from tests.conftest import page_block


def compose_live(*overrides):
    with initialize_config_dir(config_dir=str(CONFIG_DIR), version_base="1.3"):
        return compose(config_name=LIVE_CONFIG_NAME, overrides=list(overrides))


def compose_simulation(*overrides):
    with initialize_config_dir(config_dir=str(CONFIG_DIR), version_base="1.3"):
        return compose(config_name="config", overrides=list(overrides))


def test_one_config_root_serves_both_apps():
    """The live app composes policy, prior, cost and logger from the simulator's groups."""
    tasks = sorted(p.stem for p in (CONFIG_DIR / "task").glob("*.yaml"))
    assert tasks == ["gsm8k_chat", "inspect", "inspect_offline", "llm_demo", "mmlu", "multiple_choice", "openai_chat"]
    assert not (CONFIG_DIR / "live").exists()
    cfg = compose_live()
    assert cfg.task._target_ == "gittinseval.live.matrix_task" and cfg.budget_usd > 0
    assert cfg.policy == compose_simulation().policy and cfg.cost == compose_simulation().cost
    assert compose_live("policy=ucbe").policy == compose_simulation("policy=ucbe").policy
    assert compose_live("prior=specific").prior == compose_simulation("prior=specific").prior
    assert compose_live("cost=unit").cost == compose_simulation("cost=unit").cost
    assert instantiate(cfg.prior) == GaussianPrior(0.5, 0.04, "general")
    assert instantiate(compose_live("prior.mean=0.7", "prior.var=0.01").prior).mean == 0.7
    chat = instantiate(compose_live("task=openai_chat").task)
    assert isinstance(chat, LiveTask) and len(chat.arms) == len(chat.costs) == 3 and len(chat.examples) == 20
    assert chat.arms[0] == {"model": "gpt-4o-mini", "temperature": 0.0, "max_tokens": 16}
    assert chat.tokens_per_example == 44 and chat.binary
    with pytest.raises(ConfigCompositionException, match="budgett"):
        compose_live("budgett=3")


def test_mmlu_example_task_replays_the_bundled_subject():
    cfg = compose_live("task.latency=0")
    task = instantiate(cfg.task)
    bench = load_mmlu(cfg.task.benchmark.subject)
    assert task.arms == list(bench.arm_names) and task.examples == list(range(bench.n_examples))
    assert task.name == f"mmlu_{cfg.task.benchmark.subject}"
    np.testing.assert_allclose(task.costs, bench.prices * cfg.task.tokens_per_example / 1e6)
    np.testing.assert_array_equal(task.score_fn(bench.arm_names[7], [0, 5, 9]), bench.scores[7, [0, 5, 9]])


def test_mmlu_example_runs_and_resumes_from_its_store(tmp_path):
    store = tmp_path / "mmlu.sqlite"
    overrides = ["task.latency=0", "progress=false", f"store={store}", "concurrency=2"]
    first = run_live(compose_live("budget_usd=0.05", *overrides), tmp_path / "first")
    summary = json.loads((tmp_path / "first" / "summary.json").read_text())
    assert summary["stop_reason"] == "budget" and summary["spent"] == pytest.approx(first.spent)
    assert 0.05 <= first.spent and "lcb" in (tmp_path / "first" / "status.txt").read_text()
    second = run_live(compose_live("budget_usd=0.1", *overrides), tmp_path / "second")
    assert second.spent >= 0.1 and len(second.trace["step"]) > len(first.trace["step"])
    np.testing.assert_array_equal(second.trace["arm"][: len(first.trace["arm"])], first.trace["arm"])
    with pytest.raises(ValueError, match="policy.batch_size: store has 8, given 4"):
        run_live(compose_live("budget_usd=0.1", "policy.batch_size=4", *overrides), tmp_path / "third")


def free_port():
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def test_the_no_server_command_exits_non_zero_with_the_reason(tmp_path):
    command = [
        sys.executable,
        "-m",
        "gittinseval.cli.live",
        "task=openai_chat",
        f"task.score_fn.base_url=http://127.0.0.1:{free_port()}/v1",
        "task.score_fn.api_key_env=null",
        "budget_usd=0.05",
        "max_retries=1",
        "retry_backoff=0.01",
        "progress=false",
        f"store={tmp_path / 'chat.sqlite'}",
        f"hydra.run.dir={tmp_path / 'run'}",
    ]
    run = subprocess.run(command, capture_output=True, text=True, timeout=120)
    assert run.returncode != 0
    assert "no recommendation: nothing was scored; the scoring calls failed" in run.stderr
    assert "Connection error" in run.stderr and "recommended " not in run.stderr
    summary = json.loads((tmp_path / "run" / "summary.json").read_text())
    assert summary["recommended"] is None and summary["failure"].startswith("no recommendation")


def test_any_live_policy_runs_from_the_cli_and_the_others_say_why_not(tmp_path):
    overrides = ["task.latency=0", "progress=false", "budget_usd=0.05", "concurrency=3"]
    result = run_live(compose_live("policy=ucbe", f"store={tmp_path / 'u.sqlite'}", *overrides), tmp_path / "u")
    assert result.stop_reason == "budget" and result.recommendation is not None
    assert json.loads((tmp_path / "u" / "summary.json").read_text())["recommended"] == result.recommendation.arm
    with pytest.raises(ValueError, match="'pbgi' cannot run a live evaluation"):
        run_live(compose_live("policy=pbgi", f"store={tmp_path / 'p.sqlite'}", *overrides), tmp_path / "p")
    with pytest.raises(ValueError, match="prior=specific needs a data-specific prior and no benchmark is replayed"):
        run_live(compose_live("task=openai_chat", "prior=specific", f"store={tmp_path / 'c.sqlite'}"), tmp_path / "c")
    specific = run_live(compose_live("prior=specific", f"store={tmp_path / 's.sqlite'}", *overrides), tmp_path / "s")
    assert specific.recommendation is not None


def test_the_live_page_python_example_runs_and_resumes(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    example = page_block("docs/live.md", "from gittinseval.baselines.ucbe import UCBEPolicy")
    exec(compile(example, "docs/live.md", "exec"), {})
    first = capsys.readouterr().out.splitlines()
    assert first[0].endswith(" budget") and first[1].startswith("spent $0.05") and "charged as expected" in first[1]
    exec(compile(example, "docs/live.md", "exec"), {})  # the same store: resumed, the budget already spent
    assert capsys.readouterr().out.splitlines()[0] == first[0]
    assert (tmp_path / "outputs" / "live" / "ucbe_example.sqlite").is_file()


def test_a_dry_run_prints_the_cost_and_makes_no_call(tmp_path):
    """dry_run=true: the arms with their labels, the expected dollars and the budget's share; the fake
    endpoint counts zero requests and no store is made, and no key is needed."""
    server = FakeChatServer({})
    try:
        command = [
            sys.executable, "-m", "gittinseval.cli.live", "task=openai_chat", "logger=none", "dry_run=true",
            f"task.score_fn.base_url={server.base_url}", "budget_usd=0.0005", "policy.batch_size=4",
            f"store={tmp_path / 'chat.sqlite'}", f"hydra.run.dir={tmp_path / 'run'}",
        ]
        env = {key: value for key, value in os.environ.items() if key != "OPENAI_API_KEY"}
        run = subprocess.run(command, capture_output=True, text=True, timeout=120, env=env)
    finally:
        server.close()
    assert run.returncode == 0, run.stderr
    assert server.received == 0 and not (tmp_path / "chat.sqlite").exists()
    lines = run.stdout.splitlines()
    assert lines[0] == "dry run of task 'openai_chat': no call is made"
    assert lines[1] == "3 arms, 20 examples, batches of 4, budget $0.0005"
    # 40 prompt and 4 completion tokens an example, at USD per 1M tokens; labels from the fields that differ.
    dollars = {"gpt-4o-mini t=0": 40 * 0.15 + 4 * 0.60, "gpt-4o-mini t=1": 40 * 0.15 + 4 * 0.60,
               "gpt-4o t=0": 40 * 2.50 + 4 * 10.00}
    for label, micro in dollars.items():
        row = next(line for line in lines if line.split()[1:-2] == label.split())
        assert float(row.split()[-2]) == pytest.approx(micro / 1e6, rel=1e-3)
    exhaustive = 20 * sum(dollars.values()) / 1e6
    assert f"exhaustive cost (every arm on every example): ${exhaustive:.4g}" in lines
    assert f"budget: $0.0005 = {100 * 0.0005 / exhaustive:.3g}% of the exhaustive cost" in lines
    assert any(line.startswith("WARNING: the budget $0.0005 cannot cover one batch of every arm") for line in lines)


def test_a_dry_run_of_unit_costs_is_refused_in_one_line(tmp_path):
    command = [sys.executable, "-m", "gittinseval.cli.live", "logger=none", "dry_run=true", "cost=unit",
               f"hydra.run.dir={tmp_path / 'run'}"]
    run = subprocess.run(command, capture_output=True, text=True, timeout=120)
    assert run.returncode == 2 and "cost=unit counts examples: use cost=aware" in run.stderr


def test_every_task_has_a_default_store_of_its_own(hydra_choices):
    """An inspect task leaves its name to the task (``name: null``): the default store takes the task's own."""
    cfg = hydra_choices("task=inspect_offline", "budget_usd=0.003")
    assert cfg.task.name is None
    dry_run(cfg)
    assert cfg.store == "outputs/live/arithmetic_gittins_aware_seed0.sqlite"
    chat = hydra_choices("task=openai_chat", "policy=ucbe", "seed=2")
    assert chat.store is None  # store: null, named when the task is built
    dry_run(chat)
    assert chat.store == "outputs/live/openai_chat_ucbe_aware_seed2.sqlite"


def test_a_fork_needs_no_store_and_is_never_the_store_itself(hydra_choices, tmp_path, monkeypatch):
    """fork= beside the default store, which this task has not made yet, is a new store; a fork that is the
    store (one path relative, the other absolute) is refused."""
    monkeypatch.chdir(tmp_path)
    overrides = ["task.latency=0", "progress=false", "logger=none", "budget_usd=0.01"]
    result = run_live(hydra_choices(*overrides, "fork=outputs/live/fork.sqlite"), tmp_path / "fork")
    assert result.stop_reason == "budget" and result.store == Path("outputs/live/fork.sqlite")
    assert not (tmp_path / "outputs" / "live" / "mmlu_high_school_psychology_gittins_aware_seed0.sqlite").exists()
    run_live(hydra_choices(*overrides, "store=run.sqlite"), tmp_path / "run")
    with pytest.raises(ValueError, match="is the store it forks: give the fork a path of its own"):
        run_live(hydra_choices(*overrides, "store=run.sqlite", f"fork={tmp_path / 'run.sqlite'}"), tmp_path / "again")
