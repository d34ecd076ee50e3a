"""Hydra launchers: submitit_local and a local Ray cluster give the basic launcher's runs, each
with a finished W&B run; missing plugins, Slurm launchers without Slurm and unreachable Ray
clusters fail in one line."""

import json
import os
import shutil
import socket
import struct
import subprocess
import sys
import tempfile
import time

import numpy as np
import pytest
from hydra import compose, initialize_config_dir
from omegaconf import OmegaConf
from wandb.proto import wandb_internal_pb2

from gittinseval.cli.simulate import CONFIG_DIR, RayClusterCheck, main
from gittinseval.sim.launchers import LAUNCHER_EXTRAS, check_launcher, check_ray_cluster, check_slurm
from gittinseval.utils.errors import UsageError

SEEDS = (0, 1)


@pytest.fixture(scope="module")
def scores_path(tmp_path_factory):
    rng = np.random.default_rng(0)
    scores = (rng.uniform(size=(10, 24)) < rng.uniform(0.2, 0.8, size=(10, 1))).astype(float)
    path = tmp_path_factory.mktemp("bench") / "scores.npy"
    np.save(path, scores)
    return path


def run_sweep(sweep_dir, scores_path, *overrides, env=None):
    """``gittinseval -m`` over SEEDS on a tiny matrix; returns the completed process."""
    command = [
        sys.executable, "-m", "gittinseval", "-m",
        "benchmark=matrix", f"benchmark.path={scores_path}", "cost=unit", "prior=general", "policy.batch_size=4",
        f"seed={','.join(map(str, SEEDS))}", f"hydra.sweep.dir={sweep_dir}", *overrides,
    ]
    environment = {**os.environ, "WANDB_MODE": "offline", **(env or {})}
    return subprocess.run(command, capture_output=True, text=True, timeout=240, cwd=sweep_dir.parent, env=environment)


def summaries(sweep_dir):
    """summary.json of each run by seed, without the wall time and the thread count."""
    runs = [json.loads(path.read_text()) for path in sweep_dir.glob("*/summary.json")]
    return {run["seed"]: {key: value for key, value in run.items() if key not in ("wall_time_s", "threads")}
            for run in runs}


def thread_counts(sweep_dir):
    """torch's thread count inside each run of the sweep, as its summary records it."""
    return sorted(json.loads(path.read_text())["threads"] for path in sweep_dir.glob("*/summary.json"))


def wandb_records(path):
    """The protobuf records of an offline ``.wandb`` file (a LevelDB-style log: a 7-byte file
    header, then 32 KiB blocks of chunks, each with a 7-byte header: crc32, length, type)."""
    data = path.read_bytes()
    assert data[:4] == b":W&B", path
    block, header = 32768, 7
    records, payload, position = [], b"", header
    while position + header <= len(data):
        if block - position % block < header:  # the block's tail is padding
            position += block - position % block
            continue
        _, length, kind = struct.unpack("<IHB", data[position : position + header])
        payload += data[position + header : position + header + length]
        position += header + length
        if kind in (1, 4):  # a full record, or the last chunk of one
            record = wandb_internal_pb2.Record()
            record.ParseFromString(payload)
            records.append(record)
            payload = b""
    return records


def assert_wandb_runs_finished(sweep_dir):
    """Each run directory holds one offline W&B run that exited with code 0 and whose
    summary has the run's final regret."""
    for run_dir in sorted(p.parent for p in sweep_dir.glob("*/summary.json")):
        files = list(run_dir.glob("wandb/offline-run-*/run-*.wandb"))
        assert len(files) == 1, run_dir
        records = wandb_records(files[0])
        exits = [r.exit for r in records if r.WhichOneof("record_type") == "exit"]
        assert len(exits) == 1 and exits[0].exit_code == 0, run_dir
        logged = {item.key: json.loads(item.value_json)
                  for r in records if r.WhichOneof("record_type") == "summary" for item in r.summary.update}
        assert logged["final_regret"] == json.loads((run_dir / "summary.json").read_text())["final_regret"]


@pytest.fixture(scope="module")
def basic_summaries(scores_path, tmp_path_factory):
    sweep = tmp_path_factory.mktemp("basic") / "sweep"
    completed = run_sweep(sweep, scores_path, "logger=none", "hydra/launcher=basic")
    assert completed.returncode == 0, completed.stderr
    assert thread_counts(sweep) == [1, 1]  # nothing configured, no Slurm or Ray: one thread
    return summaries(sweep)


def test_submitit_local_sweep_matches_the_basic_launcher(scores_path, basic_summaries, tmp_path):
    sweep = tmp_path / "sweep"
    completed = run_sweep(sweep, scores_path, "hydra/launcher=submitit_local", "threads=2")
    assert completed.returncode == 0, completed.stderr
    assert thread_counts(sweep) == [2, 2]  # the configured count reaches each job's process
    assert set(basic_summaries) == set(SEEDS)
    assert summaries(sweep) == basic_summaries
    assert_wandb_runs_finished(sweep)
    assert f"wandb sync {sweep}/*/wandb/offline-run-*" in completed.stdout


def ray_processes(temp_dir):
    """Pids of the processes of the Ray cluster whose temp dir is ``temp_dir``."""
    listing = subprocess.run(["ps", "-eo", "pid=,args="], capture_output=True, text=True, check=True).stdout
    return [line.split()[0] for line in listing.splitlines() if str(temp_dir) in line]


def test_ray_sweep_on_a_local_cluster_matches_the_basic_launcher(scores_path, basic_summaries, tmp_path, request):
    sweep = tmp_path / "sweep"
    # The cluster's own temp dir tells its processes apart from any other Ray cluster here;
    # it is short because Ray's socket paths under it must fit in 107 bytes.
    ray_dir = tempfile.mkdtemp(prefix="ray-", dir="/tmp")
    request.addfinalizer(lambda: shutil.rmtree(ray_dir, ignore_errors=True))
    completed = run_sweep(sweep, scores_path, "hydra/launcher=ray", f"+hydra.launcher.ray.init._temp_dir={ray_dir}",
                          "+hydra.launcher.ray.init._node_ip_address=127.0.0.1",
                          "+hydra.launcher.ray.init.include_dashboard=false", "+hydra.launcher.ray.remote.num_cpus=2")
    assert completed.returncode == 0, completed.stderr
    assert thread_counts(sweep) == [2, 2]  # no count configured: the CPUs Ray gave each task
    assert "Started a local Ray instance" in completed.stderr
    assert summaries(sweep) == basic_summaries
    assert_wandb_runs_finished(sweep)
    deadline = time.monotonic() + 20
    while ray_processes(ray_dir) and time.monotonic() < deadline:  # the cluster ends with the sweep
        time.sleep(0.5)
    assert ray_processes(ray_dir) == []


@pytest.mark.parametrize("launcher", sorted(LAUNCHER_EXTRAS))
def test_missing_launcher_plugin_names_the_extra(launcher, monkeypatch, capsys):
    plugin, extra = LAUNCHER_EXTRAS[launcher]
    monkeypatch.setitem(sys.modules, plugin, None)  # as if the extra were not installed
    monkeypatch.setattr(sys, "argv", ["gittinseval", "-m", "seed=0,1", f"hydra/launcher={launcher}"])
    with pytest.raises(SystemExit) as exit_info:
        main()
    assert exit_info.value.code == 2
    (message,) = capsys.readouterr().err.splitlines()
    assert message.startswith(f"gittinseval: error: hydra/launcher={launcher} needs the")
    assert f"pip install 'gittinseval[{extra}]'" in message


def test_installed_launchers_and_other_arguments_pass_the_check(monkeypatch):
    monkeypatch.delenv("RAY_ADDRESS", raising=False)
    for launcher in [*LAUNCHER_EXTRAS, "joblib", "basic"]:
        check_launcher(["-m", "seed=0,1", f"hydra/launcher={launcher}"])
    check_launcher(["seed=3", "hydra.launcher.ray.init.address=127.0.0.1:1"])  # no Ray launcher chosen


def test_the_local_ray_launcher_with_a_cluster_address_points_to_ray_cluster(monkeypatch):
    monkeypatch.delenv("RAY_ADDRESS", raising=False)
    with pytest.raises(UsageError, match="use hydra/launcher=ray_cluster"):
        check_launcher(["-m", "hydra/launcher=ray", "hydra.launcher.ray.init.address=127.0.0.1:6379"])
    monkeypatch.setenv("RAY_ADDRESS", "127.0.0.1:6379")
    with pytest.raises(UsageError, match="use hydra/launcher=ray_cluster"):
        check_launcher(["-m", "hydra/launcher=ray"])


def free_port():
    """A loopback port with nothing listening on it."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def test_unreachable_ray_cluster_fails_fast_and_writes_nothing(scores_path, tmp_path):
    sweep = tmp_path / "sweep"
    address = f"127.0.0.1:{free_port()}"
    started = time.monotonic()
    completed = run_sweep(sweep, scores_path, "logger=none", "hydra/launcher=ray_cluster",
                          f"hydra.launcher.ray.init.address={address}")
    assert time.monotonic() - started < 60  # Ray alone would retry for ever
    assert completed.returncode == 2
    assert completed.stderr.strip().splitlines()[-1].startswith(
        f"gittinseval: error: Ray cluster at {address} cannot be reached"
    )
    assert not sweep.exists()


def ray_cluster_config(address, sweep_dir):
    return OmegaConf.create({"hydra": {"launcher": {"ray": {"init": {"address": address}}},
                                       "sweep": {"dir": str(sweep_dir)}}})


def test_ray_cluster_check_bounds_the_wait_and_needs_an_absolute_sweep_dir(tmp_path, capsys):
    with socket.create_server(("127.0.0.1", 0), backlog=8) as listener:
        host, port = listener.getsockname()
        address = f"{host}:{port}"
        check_ray_cluster(ray_cluster_config(address, tmp_path), timeout=2)
        check_ray_cluster(ray_cluster_config(f"ray://{address}", tmp_path), timeout=2)
        with pytest.raises(UsageError, match="hydra.sweep.dir=outputs/x is relative"):
            check_ray_cluster(ray_cluster_config(address, "outputs/x"), timeout=2)
    with pytest.raises(UsageError, match="is not host:port, ray://host:port or auto"):
        check_ray_cluster(ray_cluster_config("localhost", tmp_path), timeout=2)
    # The callback stops the sweep itself: Hydra would make a warning of an exception.
    with pytest.raises(SystemExit) as exit_info:
        RayClusterCheck(timeout=2).on_multirun_start(ray_cluster_config("localhost", tmp_path))
    assert exit_info.value.code == 2
    assert capsys.readouterr().err == (
        "gittinseval: error: hydra.launcher.ray.init.address='localhost' is not host:port, ray://host:port or auto\n"
    )


def test_ray_cluster_check_gives_up_on_an_unanswering_address_after_its_timeout(tmp_path):
    # A listener whose backlog is full leaves new connections unanswered, like a host
    # that drops packets.
    with socket.create_server(("127.0.0.1", 0), backlog=0) as listener:
        host, port = listener.getsockname()
        pending = [socket.socket() for _ in range(3)]
        for connection in pending:
            connection.setblocking(False)
            connection.connect_ex((host, port))
        time.sleep(0.2)
        started = time.monotonic()
        with pytest.raises(UsageError, match=f"Ray cluster at {host}:{port} cannot be reached"):
            check_ray_cluster(ray_cluster_config(f"{host}:{port}", tmp_path), timeout=2)
        assert 1.5 < time.monotonic() - started < 5
        for connection in pending:
            connection.close()


def compose_hydra(*overrides):
    with initialize_config_dir(config_dir=str(CONFIG_DIR), version_base="1.3"):
        return compose(config_name="config", overrides=list(overrides), return_hydra_config=True)


def fake_srun(folder):
    """A folder holding an executable ``srun``, to put on the PATH."""
    folder.mkdir()
    (folder / "srun").write_text("#!/bin/sh\n")
    (folder / "srun").chmod(0o755)
    return str(folder)


@pytest.mark.parametrize("launcher", ["slurm", "submitit_slurm"])
def test_a_slurm_launcher_needs_slurm(launcher, tmp_path, monkeypatch):
    config = compose_hydra(f"hydra/launcher={launcher}")
    monkeypatch.setenv("PATH", fake_srun(tmp_path / "slurm"))
    check_slurm(config)
    monkeypatch.setenv("PATH", str(tmp_path))
    with pytest.raises(UsageError, match=f"^hydra/launcher={launcher} submits to Slurm, but srun is not on the PATH"):
        check_slurm(config)
    check_slurm(compose_hydra("hydra/launcher=submitit_local"))  # submitit on this machine needs no Slurm


def test_a_slurm_sweep_without_slurm_stops_in_one_line_and_writes_nothing(tmp_path, monkeypatch, capsys):
    sweep, tools = tmp_path / "sweep", tmp_path / "bin"
    tools.mkdir()
    (tools / "git").symlink_to(shutil.which("git"))  # the commit of the code is still read, srun is not there
    monkeypatch.setenv("PATH", str(tools))
    argv = ["gittinseval", "-m", "seed=0,1", "logger=none", "hydra/launcher=slurm", f"hydra.sweep.dir={sweep}"]
    monkeypatch.setattr(sys, "argv", argv)
    with pytest.raises(SystemExit) as exit_info:
        main()
    assert exit_info.value.code == 2
    (message,) = capsys.readouterr().err.splitlines()
    assert message.startswith("gittinseval: error: hydra/launcher=slurm submits to Slurm, but srun is not on the PATH")
    assert not sweep.exists()


def test_slurm_launcher_config_exposes_the_cluster_settings():
    launcher = compose_hydra("hydra/launcher=slurm", "hydra.launcher.partition=cpu").hydra.launcher
    assert launcher._target_ == "hydra_plugins.hydra_submitit_launcher.submitit_launcher.SlurmLauncher"
    assert launcher.partition == "cpu"
    settings = (launcher.timeout_min, launcher.cpus_per_task, launcher.mem_gb, launcher.array_parallelism)
    assert settings == (60, 2, 4, 256)


def test_ray_cluster_launcher_config_joins_a_running_cluster(monkeypatch):
    monkeypatch.delenv("RAY_ADDRESS", raising=False)
    hydra_cfg = compose_hydra("hydra/launcher=ray_cluster").hydra
    assert hydra_cfg.launcher._target_ == "hydra_plugins.hydra_ray_launcher.ray_launcher.RayLauncher"
    assert hydra_cfg.launcher.ray.init.address == "auto"
    assert hydra_cfg.launcher.ray.init.object_store_memory is None  # see check_launcher
    assert hydra_cfg.callbacks.ray_cluster_check._target_ == "gittinseval.cli.simulate.RayClusterCheck"
    monkeypatch.setenv("RAY_ADDRESS", "127.0.0.1:6379")
    assert compose_hydra("hydra/launcher=ray_cluster").hydra.launcher.ray.init.address == "127.0.0.1:6379"


@pytest.mark.parametrize("launcher", ["joblib", "submitit_local", "slurm", "ray", "ray_cluster"])
def test_the_main_experiment_goes_to_any_launcher(launcher):
    hydra_cfg = compose_hydra("experiment=main", f"hydra/launcher={launcher}").hydra
    assert hydra_cfg.runtime.choices["hydra/launcher"] == launcher
    assert hydra_cfg.sweeper.params.seed == "range(20)"
