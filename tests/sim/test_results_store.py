"""The results store: export (each run once, atomic, safe against concurrent exports), the report from a store equal
to the report from its sweep folders, runs skipped when stored with the same config, and the commit of every run."""

import copy
import functools
import json
import multiprocessing
import re
import shutil
import stat
import subprocess
import sys
from pathlib import Path

import botorch
import gpytorch
import numpy as np
import pytest
import scipy
import torch
from hydra import compose, initialize_config_dir

import gittinseval.sim.experiment as experiment_module
import gittinseval.sim.results_store as store_module
from gittinseval.cli.configs import CONFIG_DIR
from gittinseval.cli.report import main as report_main
from gittinseval.cli.store import main as store_main
from gittinseval.results.curves import aggregate_group
from gittinseval.results.panels import panels
from gittinseval.results.report import write_report
from gittinseval.sim.experiment import CODE_ROOT, code_commit, config_digest, run_experiment
from gittinseval.sim.results_store import RunRow, export, export_rows, find_runs, load_rows, read_store, stored_run
from gittinseval.sim.simulator import RunResult
from gittinseval.utils.validation import ConfigError

MMLU_SWEEP = [
    "benchmark.subject=abstract_algebra,computer_security", "method=gittins_s,ucbe", "cost=unit,aware", "seed=0,1",
    "budget=0.02",
]
# GSM8K stand-in with a BO method, whose rows carry the initial-design endpoint.
BO_SWEEP = ["benchmark=gsm8k", "method=logei,ucbe", "seed=0,1"]


def sweep(directory: Path, *overrides: str) -> subprocess.CompletedProcess:
    command = [sys.executable, "-m", "gittinseval", "-m", *overrides, "logger=none", "hydra/launcher=basic",
               f"hydra.sweep.dir={directory}"]
    return subprocess.run(command, check=True, capture_output=True, text=True, timeout=600)


def compose_config(*overrides):
    with initialize_config_dir(config_dir=str(CONFIG_DIR), version_base="1.3"):
        return compose(config_name="config", overrides=list(overrides))


@pytest.fixture(scope="module")
def sweeps(tmp_path_factory) -> tuple[Path, Path]:
    """Two finished sweeps: 16 MMLU runs (two buckets, two methods, both cost modes) and 4 GSM8K runs (LogEI, UCB-E)."""
    root = tmp_path_factory.mktemp("sweeps")
    sweep(root / "mmlu", *MMLU_SWEEP)
    sweep(root / "gsm8k", *BO_SWEEP)
    return root / "mmlu", root / "gsm8k"


@pytest.fixture
def stored(sweeps, tmp_path) -> Path:
    """A store holding both sweeps, exported one after the other."""
    path = tmp_path / "results" / "paper.parquet"
    for sweep_dir in sweeps:
        export([sweep_dir], path)
    return path


def test_a_sweep_exported_twice_stores_each_run_once(sweeps, tmp_path):
    mmlu, gsm8k = sweeps
    path = tmp_path / "store.parquet"
    assert export([mmlu], path) == (16, 0)
    written = path.read_bytes()
    assert export([mmlu], path) == (0, 16)
    assert path.read_bytes() == written  # nothing new: the file is not rewritten
    assert export([mmlu, gsm8k], path) == (4, 16)
    digests = [row.summary["config_digest"] for row in read_store(path)]
    folder_digests = [run.summary["config_digest"] for sweep_dir in sweeps for run in find_runs(sweep_dir)]
    assert digests == folder_digests and len(set(digests)) == 20
    assert not list(tmp_path.glob(".store.parquet.*.tmp"))  # the temporary file was renamed
    assert stat.S_IMODE(path.stat().st_mode) == 0o644  # readable by all, like the repository's other files


def test_stored_rows_read_back_as_the_rows_of_the_run_folders(sweeps, stored):
    from_folders = [row for sweep_dir in sweeps for row in load_rows(sweep_dir)]
    from_store = read_store(stored)
    assert len(from_store) == len(from_folders) == 20
    for folder_row, store_row in zip(from_folders, from_store, strict=True):
        # Same values and types (1 stays 1, 1.0 stays 1.0; nested dicts intact), absent fields as None.
        assert {k: v for k, v in store_row.summary.items() if k in folder_row.summary} == folder_row.summary
        assert all(v is None for k, v in store_row.summary.items() if k not in folder_row.summary)
        np.testing.assert_array_equal(store_row.linear, folder_row.linear)
        np.testing.assert_array_equal(store_row.log, folder_row.log)
        for name in ("start_pct", "start_regret", "end_pct", "end_regret", "init_pct", "init_regret"):
            assert getattr(store_row, name) == getattr(folder_row, name)
    assert sum(row.init_pct is not None for row in from_store) == 2  # the LogEI runs


def test_the_report_from_the_store_equals_the_report_from_the_sweep_folders(sweeps, stored, tmp_path):
    """Every table byte for byte, and every curve number for number, in each panel layout and on both cost axes."""
    for mmlu_panels, log_cost in (("bucket", True), ("subject", False)):
        out_folders, out_store = tmp_path / f"folders_{mmlu_panels}", tmp_path / f"store_{mmlu_panels}"
        write_report(list(sweeps), out_folders, mmlu_panels, log_cost, versus=("UCB-E",))
        write_report([stored], out_store, mmlu_panels, log_cost, versus=("UCB-E",))
        tables = sorted(p.name for p in out_folders.glob("*.md"))
        assert tables == sorted(p.name for p in out_store.glob("*.md")) and len(tables) >= 7
        for name in tables:
            folder_text, store_text = ((out / name).read_text() for out in (out_folders, out_store))
            if name == "report.md":  # its header names the sources
                folder_text, store_text = (text.split("\n", 3)[3] for text in (folder_text, store_text))
            assert folder_text == store_text, name
        assert "Paired differences against UCB-E" in (out_store / "report.md").read_text()
        folder_panels = panels([row for s in sweeps for row in load_rows(s)], mmlu_panels)
        store_panels = panels(load_rows(stored), mmlu_panels)
        assert [p.key for p in folder_panels] == [p.key for p in store_panels]
        for folder_panel, store_panel in zip(folder_panels, store_panels, strict=True):
            assert list(folder_panel.curves) == list(store_panel.curves)
            for label, members in folder_panel.curves.items():
                from_folders = aggregate_group(label, members, log_grid=log_cost)
                from_store = aggregate_group(label, store_panel.curves[label], log_grid=log_cost)
                for field in ("grid", "mean", "stderr", "count"):
                    np.testing.assert_array_equal(getattr(from_store, field), getattr(from_folders, field))
                assert (from_store.stop_pct, from_store.init_pct) == (from_folders.stop_pct, from_folders.init_pct)


def test_the_store_command_exports_and_the_report_command_reads_a_store(sweeps, tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    store_main(["export", str(sweeps[1]), "--to", "docs/results/gsm8k.parquet"])
    assert "docs/results/gsm8k.parquet: added 4 runs, 0 stored already" in capsys.readouterr().out
    report_main(["docs/results/gsm8k.parquet"])
    assert "### gsm8k_standin (aware cost) [stand-in data]" in capsys.readouterr().out
    assert (tmp_path / "outputs" / "report" / "gsm8k" / "overview.md").is_file()  # not beside the store
    bad_export = ["export", str(sweeps[1]), "--to", "store.csv"]
    for command, argv in ((report_main, ["missing.parquet"]), (store_main, bad_export)):
        with pytest.raises(SystemExit) as error:
            command(argv)
        assert error.value.code == 2
    assert "no results store at missing.parquet" in capsys.readouterr().err


def test_an_export_holding_two_runs_of_one_config_stores_the_first(sweeps, tmp_path):
    """Two copies of one run (e.g. a sweep folder and its copy, exported together) are one run."""
    first, other = (RunRow.of(run) for run in find_runs(sweeps[1])[:2])
    twin = RunRow.of(find_runs(sweeps[1])[0])
    twin.summary["wall_time_s"] = -1.0  # told apart from the first, with the same config digest
    path = tmp_path / "store.parquet"
    assert export_rows([first, twin, other], path) == (2, 1)
    stored = read_store(path)
    assert [row.summary["config_digest"] for row in stored] == [first.summary["config_digest"],
                                                                other.summary["config_digest"]]
    assert stored[0].summary["wall_time_s"] == first.summary["wall_time_s"]


def test_a_corrupt_store_is_refused_in_one_line_naming_the_file(tmp_path):
    for content in (b"", b"PAR1 and nothing else", b"x" * 100):
        path = tmp_path / "store.parquet"
        path.write_bytes(content)
        with pytest.raises(ValueError, match=f"^{path} is not a readable results store \\(a corrupt or truncated "
                                             "Parquet file: ") as error:
            read_store(path)
        assert "\n" not in str(error.value)
        store_module._store_index.cache_clear()
        with pytest.raises(ValueError, match=f"^{path} is not a readable results store"):
            stored_run(path, "0" * 64)


def test_a_run_without_a_config_digest_is_not_stored(sweeps, tmp_path):
    run = find_runs(sweeps[1])[0]
    del run.summary["config_digest"]
    with pytest.raises(ValueError, match="1 run without a config_digest cannot be stored"):
        export_rows([RunRow.of(run)], tmp_path / "store.parquet")
    assert not (tmp_path / "store.parquet").exists()


def test_fields_of_mixed_types_read_back_as_they_were(sweeps, tmp_path):
    first, second = (RunRow.of(run) for run in find_runs(sweeps[1])[:2])
    first.summary |= {"kappa": 1, "note": None, "tags": ["a", 1]}
    second.summary |= {"kappa": 0.5, "note": "x"}
    export_rows([first, second], tmp_path / "store.parquet")
    read_first, read_second = read_store(tmp_path / "store.parquet")
    assert (read_first.summary["kappa"], read_second.summary["kappa"]) == (1, 0.5)
    assert type(read_first.summary["kappa"]) is int and read_first.summary["tags"] == ["a", 1]
    assert (read_first.summary["note"], read_second.summary["note"], read_second.summary["tags"]) == (None, "x", None)


def _export_one_by_one(rows: list[RunRow], path: Path) -> None:
    for row in rows:
        export_rows([row], path)


def _read_until(done, path: Path) -> None:
    while not done.is_set():
        if path.exists():
            read_store(path)


def test_concurrent_exports_lose_no_run_and_readers_never_see_half_a_store(sweeps, tmp_path):
    """Three processes add their runs one at a time to one store while a fourth reads it: every run ends up in it."""
    rows = [row for sweep_dir in sweeps for row in load_rows(sweep_dir)]
    path = tmp_path / "store.parquet"
    context = multiprocessing.get_context("fork")
    done = context.Event()
    reader = context.Process(target=_read_until, args=(done, path))
    reader.start()
    workers = [context.Process(target=_export_one_by_one, args=(rows[i::3], path)) for i in range(3)]
    for worker in workers:
        worker.start()
    for worker in workers:
        worker.join(timeout=300)
    done.set()
    reader.join(timeout=60)
    assert [worker.exitcode for worker in [*workers, reader]] == [0, 0, 0, 0]
    assert {row.summary["config_digest"] for row in read_store(path)} == {r.summary["config_digest"] for r in rows}
    assert len(read_store(path)) == 20


def test_a_run_stored_with_the_same_config_is_skipped_and_one_of_another_config_is_not(sweeps, stored, tmp_path):
    same = compose_config("benchmark=gsm8k", "method=ucbe", "seed=1", "logger=none", f"results_store={stored}")
    result = run_experiment(same, tmp_path / "same")
    assert isinstance(result, RunRow) and result.summary["config_digest"] == config_digest(same)
    assert not (tmp_path / "same").exists()  # nothing run, nothing written
    for other in (["seed=2"], ["seed=1", "budget=0.05"]):
        cfg = compose_config("benchmark=gsm8k", "method=ucbe", "logger=none", f"results_store={stored}", *other)
        result = run_experiment(cfg, tmp_path / "other")
        assert isinstance(result, RunResult) and not result.reused
        assert json.loads((tmp_path / "other" / "summary.json").read_text())["config_digest"] == config_digest(cfg)
        shutil.rmtree(tmp_path / "other")
    with pytest.raises(ConfigError, match="results_store must be a .parquet file"):
        run_experiment(compose_config("logger=none", "results_store=docs/results"), tmp_path / "bad")


def test_a_run_held_by_any_store_of_a_list_is_skipped_and_a_bad_entry_is_named(sweeps, tmp_path):
    mmlu, gsm8k = sweeps
    first, second = tmp_path / "first.parquet", tmp_path / "second.parquet"
    export([mmlu], first)
    export([gsm8k], second)
    stores = f"results_store=['{first}','{second}']"
    held = compose_config("benchmark=gsm8k", "method=ucbe", "seed=1", "logger=none", stores)
    result = run_experiment(held, tmp_path / "held")
    assert isinstance(result, RunRow) and result.summary["config_digest"] == config_digest(held)
    assert not (tmp_path / "held").exists()
    assert config_digest(held) == config_digest(compose_config("benchmark=gsm8k", "method=ucbe", "seed=1",
                                                               "logger=none"))
    for bad, named in (("[docs/results/a.parquet,3]", "entry 2 of the list is 3"), ("{a: 1}", "got {'a': 1}"),
                       ("[docs/results/a.parquet,docs/results]", "entry 2 of the list is 'docs/results'")):
        with pytest.raises(ConfigError, match=f"^results_store must be a .parquet file, a list of them, or null; "
                                              f"{re.escape(named)}$"):
            run_experiment(compose_config("logger=none", f"results_store={bad}"), tmp_path / "bad")


def test_a_store_made_before_a_summary_field_reads_and_takes_rows_that_have_it(tmp_path):
    """stop_wall_time_s and packages came after the store of the paper's main grid: it reads without them, and a store
    of old and new rows gives the old ones None."""
    old = read_store(CODE_ROOT / "docs" / "results" / "main.parquet")[:2]
    assert all("stop_wall_time_s" not in row.summary and "packages" not in row.summary for row in old)
    new = copy.deepcopy(old[0])
    versions = {"torch": "2.13.0+cpu", "botorch": None}
    new.summary |= {"config_digest": "f" * 64, "stop_wall_time_s": 0.25, "packages": versions}
    export_rows([*old, new], tmp_path / "mixed.parquet")
    mixed = read_store(tmp_path / "mixed.parquet")
    assert [row.summary["stop_wall_time_s"] for row in mixed] == [None, None, 0.25]
    assert [row.summary["packages"] for row in mixed] == [None, None, versions]


def test_the_store_path_does_not_change_the_digest():
    plain = compose_config("logger=none")
    assert config_digest(compose_config("logger=none", "results_store=docs/results/x.parquet")) == config_digest(plain)


def test_the_store_is_read_once_per_process_and_again_when_it_changes(sweeps, stored, monkeypatch):
    reads = []
    original = store_module.read_store
    monkeypatch.setattr(store_module, "read_store", lambda path: reads.append(path) or original(path))
    store_module._store_index.cache_clear()
    rows = read_store(stored)
    for row in rows:
        assert stored_run(stored, row.summary["config_digest"]).summary == row.summary
    assert stored_run(stored, "0" * 64) is None
    assert len(reads) == 1
    export([sweeps[0]], stored.with_name("other.parquet"))
    stored.with_name("other.parquet").replace(stored)  # the store changes (as a pull or an export replaces it)
    assert stored_run(stored, rows[0].summary["config_digest"]) is not None
    assert stored_run(stored, rows[-1].summary["config_digest"]) is None  # a GSM8K run, not in the new file
    assert len(reads) == 2
    assert stored_run(stored.with_name("absent.parquet"), "0" * 64) is None


def test_a_rerun_sweep_skips_the_runs_of_its_store_and_counts_them(sweeps, stored, tmp_path):
    """seed=0,1 of this sweep are in the store (from the MMLU sweep), seed=2 is not."""
    result = sweep(tmp_path / "rerun", "benchmark.subject=abstract_algebra", "method=ucbe", "cost=unit",
                   "seed=0,1,2", "budget=0.02", f"results_store={stored}")
    assert "Skipped 2 runs finished earlier with the same config; ran 1." in result.stdout
    assert "sweep progress: 3 of 3 runs finished" in result.stderr + result.stdout
    # The stored runs were left out before anything was launched, as the first lines say.
    log = (result.stdout + result.stderr).splitlines()
    checking = next(i for i, line in enumerate(log) if f"Checking 3 jobs for runs stored in {stored} or " in line)
    launched = [line.split(" : ")[1] for line in log if " : " in line and "] \t#" in line]
    assert launched == [f"benchmark.subject=abstract_algebra method=ucbe cost=unit seed=2 budget=0.02 "
                        f"results_store={stored} logger=none"]
    assert checking < next(i for i, line in enumerate(log) if "Launching 1 jobs" in line)
    (ran,) = (tmp_path / "rerun").rglob("summary.json")
    assert json.loads(ran.read_text())["seed"] == 2
    assert f"gittinseval-store export {tmp_path / 'rerun'} --to {stored}" in result.stdout


def test_a_job_of_trials_with_one_run_missing_is_launched_and_makes_only_that_run(sweeps, stored, tmp_path):
    """The store holds seeds 0 and 1 (from the MMLU sweep): the job of seeds 0-2 makes seed 2 alone, and the job
    of seeds 0-1 is not launched."""
    job = ["benchmark.subject=abstract_algebra", "method=ucbe", "cost=unit", "seed=0", "budget=0.02",
           f"results_store={stored}"]
    result = sweep(tmp_path / "trials", *job, "trials=3,2")
    log = result.stdout + result.stderr
    launched = [line.split(" : ")[1] for line in log.splitlines() if " : " in line and "] \t#" in line]
    assert launched == [" ".join([*job, "trials=3", "logger=none"])]
    assert "Skipped 4 runs finished earlier with the same config; ran 1." in result.stdout
    (ran,) = (tmp_path / "trials").rglob("summary.json")
    assert ran.parent.name == "seed=2" and json.loads(ran.read_text())["seed"] == 2


def test_a_run_records_the_commit_of_its_code_and_the_versions_of_the_packages_its_numbers_depend_on(tmp_path):
    run_experiment(compose_config("benchmark.subject=abstract_algebra", "budget=0.003", "logger=none"), tmp_path)
    summary = json.loads((tmp_path / "summary.json").read_text())
    recorded = summary["commit"]
    # Each package's own version string, read by the package, not from the installed metadata.
    assert summary["packages"] == {
        "torch": torch.__version__, "botorch": botorch.__version__, "gpytorch": gpytorch.__version__,
        "numpy": np.__version__, "scipy": scipy.__version__,
    }
    head = subprocess.run(["git", "-C", str(CODE_ROOT), "rev-parse", "HEAD"], capture_output=True, text=True)
    if head.returncode:
        assert recorded is None  # not a git clone (an installed wheel)
    else:
        assert recorded in (head.stdout.strip(), head.stdout.strip() + "-dirty")


def test_the_commit_names_uncommitted_changes_to_the_code_only(tmp_path):
    def git(*args):
        command = ["git", "-C", str(tmp_path), "-c", "user.name=t", "-c", "user.email=t@t", *args]
        return subprocess.run(command, check=True, capture_output=True, text=True).stdout.strip()

    git("init", "-q")
    (tmp_path / "gittinseval").mkdir()
    (tmp_path / "gittinseval" / "core.py").write_text("x = 1\n")
    (tmp_path / "notes.md").write_text("a\n")
    git("add", ".")
    git("commit", "-q", "-m", "first")
    sha = git("rev-parse", "HEAD")
    assert code_commit(tmp_path) == sha
    (tmp_path / "notes.md").write_text("b\n")  # not code
    (tmp_path / "gittinseval" / "new.py").write_text("")  # untracked
    code_commit.cache_clear()
    assert code_commit(tmp_path) == sha
    (tmp_path / "gittinseval" / "core.py").write_text("x = 2\n")
    code_commit.cache_clear()
    assert code_commit(tmp_path) == f"{sha}-dirty"
    assert code_commit(tmp_path / "gittinseval") is None  # inside a repository, not its top
    outside = tmp_path.parent / f"{tmp_path.name}_plain"
    outside.mkdir()
    assert code_commit(outside) is None
    code_commit.cache_clear()


def test_a_run_is_stamped_with_the_commit_checked_out_when_it_started(tmp_path, monkeypatch):
    """A commit made while a run goes on (a sweep beside ongoing work) is not the code the run loaded."""
    def git(*args):
        command = ["git", "-C", str(tmp_path / "repo"), "-c", "user.name=t", "-c", "user.email=t@t", *args]
        return subprocess.run(command, check=True, capture_output=True, text=True).stdout.strip()

    (tmp_path / "repo" / "gittinseval").mkdir(parents=True)
    git("init", "-q")
    (tmp_path / "repo" / "gittinseval" / "core.py").write_text("x = 1\n")
    git("add", ".")
    git("commit", "-q", "-m", "the code the run loads")
    loaded = git("rev-parse", "HEAD")
    # The same cache as the real one, for the toy repository.
    toy_commit = functools.cache(lambda: code_commit.__wrapped__(tmp_path / "repo"))
    monkeypatch.setattr(experiment_module, "code_commit", toy_commit)
    run_the_simulation = experiment_module.simulate_config

    def simulate_while_someone_commits(cfg):
        (tmp_path / "repo" / "gittinseval" / "core.py").write_text("x = 2\n")
        git("commit", "-q", "-am", "committed during the run")
        return run_the_simulation(cfg)

    monkeypatch.setattr(experiment_module, "simulate_config", simulate_while_someone_commits)
    cfg = compose_config("benchmark.subject=abstract_algebra", "budget=0.003", "logger=none")
    run_experiment(cfg, tmp_path / "run")
    assert git("rev-parse", "HEAD") != loaded
    assert json.loads((tmp_path / "run" / "summary.json").read_text())["commit"] == loaded
