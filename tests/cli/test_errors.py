"""A wrong setting is one line on stderr that names it, and a non-zero exit: 2 for usage, 1 for a failed run."""

import json
import os
import re
import socket
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from gittinseval.live import Evaluator, LiveConfig, LiveTask
from gittinseval.live.fake_server import FakeChatServer
from gittinseval.live.tasks.scoring import read_jsonl

GITTINSEVAL = str(Path(sys.executable).with_name("gittinseval"))
GITTINSEVAL_LIVE = str(Path(sys.executable).with_name("gittinseval-live"))


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
    conf = Path(__file__).resolve().parents[2] / "conf"
    for group in ("benchmark", "policy", "prior", "cost", "logger", "method", "experiment"):
        for option in (conf / group).rglob("*.yaml"):
            name = option.relative_to(conf / group).with_suffix("").as_posix()
            assert re.search(rf"(?<![\w/]){re.escape(name)}(?![\w/])", result.stdout), f"{group}={name} not in --help"
    assert "live" not in result.stdout.replace("gittinseval-live", "")
    assert result.stdout.count("gittinseval ") >= 3  # three examples


def closed_port_url():
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return f"http://127.0.0.1:{probe.getsockname()[1]}/v1"


def write_jsonl(path, lines):
    path.write_text("".join(line + "\n" for line in lines))
    return path


def bad_input(tmp_path, matrix, server, case):
    """The command of one row of the bad-input list, after any setup it needs (files, stores)."""
    store = tmp_path / "live.sqlite"
    common = [GITTINSEVAL_LIVE, "logger=none", "progress=false", f"store={store}", f"hydra.run.dir={tmp_path / 'run'}"]
    live = [*common, "task.latency=0"]
    chat = [*common, "task=openai_chat", "max_retries=0"]
    keyless = [*chat, "task.score_fn.api_key_env=null"]  # a local server: no key needed
    example = json.dumps(read_jsonl()[0])
    unanswered = [json.dumps({"prompt": f"What is {n} + {n}?"}) for n in range(4)]
    if case == "store is a directory":
        store.mkdir()
    if case == "store of another task":
        Evaluator(LiveTask(["a", "b"], range(20)), LiveConfig(store=store)).close()
    commands = {
        "unknown key": [GITTINSEVAL, "budgett=3"],
        "unknown option": [GITTINSEVAL, "policy=nope"],
        "matrix without a path": [GITTINSEVAL, "benchmark=matrix", "logger=none"],
        "live unknown key": [*live, "budgett=3"],
        "live unknown option": [*live, "task=nope"],
        "budget_usd=0": [*live, "budget_usd=0"],
        "concurrency=0": [*live, "concurrency=0"],
        "store is a directory": live,
        "store of another task": live,
        "store in use": live,
        "malformed JSONL": [*chat, f"task.examples.path={write_jsonl(tmp_path / 'bad.jsonl', [example, '{no'])}"],
        "empty JSONL": [*chat, f"task.examples.path={write_jsonl(tmp_path / 'empty.jsonl', ['', ' '])}"],
        "one arm": [*keyless, "task.arms=[{model: gpt-4o, max_tokens: 16}]"],
        "policy that cannot run live": [*live, "policy=pbgi"],
        "example without answer": [*keyless, f"task.score_fn.base_url={closed_port_url()}", "policy.batch_size=2",
                                   f"task.examples.path={write_jsonl(tmp_path / 'q.jsonl', unanswered)}"],
        "no server": [*keyless, f"task.score_fn.base_url={closed_port_url()}"],
        "400 reply": [*keyless, f"task.score_fn.base_url={server.base_url}", "concurrency=1"],
        "OPENAI_API_KEY unset": [*chat, f"task.score_fn.base_url={server.base_url}"],
        "api_key_env unset": [*chat, f"task.score_fn.base_url={server.base_url}",
                              "task.score_fn.api_key_env=NO_SUCH_KEY"],
    }
    return commands[case]


@pytest.fixture(scope="module")
def rejecting_server():
    fake = FakeChatServer({e["prompt"]: e["answer"] for e in read_jsonl()}, good_model="gpt-4o")
    yield fake
    fake.close()


@pytest.mark.parametrize(
    ("case", "code", "message"),
    [
        ("unknown key", 2, "Could not override 'budgett'; To append to your config use +budgett=3"),
        ("unknown option", 2, "Could not find 'policy/nope'; available options in 'policy': gittins, logei,"),
        ("matrix without a path", 2, "Missing mandatory value: benchmark.path (give it on the command line: "
                                     "benchmark.path=...)"),
        ("live unknown key", 2, "Could not override 'budgett'"),
        ("live unknown option", 2, "Could not find 'task/nope'; available options in 'task': gsm8k_chat, inspect,"),
        ("budget_usd=0", 2, "budget_usd must be positive and finite, got 0"),
        ("concurrency=0", 2, "concurrency must be a positive integer, got 0"),
        ("store is a directory", 2, "live.sqlite is a directory; store= takes the path of an SQLite file"),
        ("store of another task", 2, "live.sqlite was made with other settings, so its scores and spend do not carry"),
        ("store in use", 2, "live.sqlite is open for writing by another process"),
        ("malformed JSONL", 2, "bad.jsonl, line 2: not JSON"),
        ("empty JSONL", 2, "empty.jsonl holds no examples"),
        ("one arm", 2, "the task has one arm"),
        ("policy that cannot run live", 2, "policy 'pbgi' cannot run a live evaluation"),
        ("example without answer", 1, "FirstWord(field='answer') needs field 'answer', missing from example"),
        ("no server", 1, "no recommendation: nothing was scored; the scoring calls failed: arm "),
        ("400 reply", 1, "HTTP 400"),
        ("OPENAI_API_KEY unset", 2, "the API key's environment variable OPENAI_API_KEY (api_key_env) is unset: export "
                                    "OPENAI_API_KEY=<key>, or for a server that needs no key set api_key_env: null"),
        ("api_key_env unset", 2, "the API key's environment variable NO_SUCH_KEY (api_key_env) is unset"),
    ],
)
def test_every_bad_input_is_one_line_with_its_exit_code(matrix, tmp_path, rejecting_server, case, code, message):
    command = bad_input(tmp_path, matrix, rejecting_server, case)
    rejecting_server.plan = [400] if case == "400 reply" else []
    received = rejecting_server.received
    holder = None
    if case == "store in use":
        holder = Evaluator(LiveTask(["x", "y"], range(20)), LiveConfig(store=tmp_path / "live.sqlite"))
    # No case has a key: the runs that need none say so (api_key_env=null).
    env = {key: value for key, value in os.environ.items() if key not in ("HYDRA_FULL_ERROR", "OPENAI_API_KEY")}
    try:
        result = subprocess.run(command, capture_output=True, text=True, env=env, timeout=120, cwd=tmp_path)
    finally:
        if holder is not None:
            holder.close()
    lines = result.stderr.strip().splitlines()
    program = Path(command[0]).name
    assert result.returncode == code, result.stderr
    assert len(lines) == 1 and lines[0].startswith(f"{program}: error: "), result.stderr
    assert message in lines[0]
    if case in ("empty JSONL", "OPENAI_API_KEY unset", "api_key_env unset"):
        assert not (tmp_path / "live.sqlite").exists()
    if case.endswith("unset"):  # refused before any call
        assert rejecting_server.received == received
    if case == "example without answer":
        assert re.search(r"the scoring calls failed: arm \d \(.*\), example \d: NonRetryableError", lines[0])
