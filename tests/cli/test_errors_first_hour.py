"""The bad inputs of a new user's first hour that were a traceback, silent or vague (issue 51, items 9 and 10): each
is one line ``<program>: error: ...`` naming the problem and the remedy, with exit code 2 and no traceback; and the
inputs that now run (a task smaller than the default batch) or say what they do (a results store yet to be made)."""

import csv
import gzip
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from gittinseval.cli import data as data_cli
from gittinseval.cli import report as report_cli
from gittinseval.cli import store as store_cli
from gittinseval.live.app import dry_run, run_live

BIN = Path(sys.executable).parent
SCORES = Path(__file__).resolve().parents[2] / "gittinseval" / "data" / "files" / "examples" / "scores.csv"  # 8 x 200

TASKS = {
    # A flow sequence left open: PyYAML's error, which Hydra let through as a traceback.
    "broken.yaml": "_target_: gittinseval.live.chat_task\narms: [a, b\nname: x\n",
    "mapped.yaml": """\
_target_: gittinseval.live.chat_task
_convert_: all
name: mapped
arms:
  small: {model: gpt-4o-mini, max_tokens: 16}
  big: {model: gpt-4o, max_tokens: 16}
examples: {_target_: gittinseval.live.tasks.scoring.read_jsonl}
score_fn:
  _target_: gittinseval.live.OpenAIChatScorer
  base_url: http://127.0.0.1:9/v1
  prompt: "{prompt}"
  prices: {gpt-4o-mini: {input: 0.15, output: 0.6}, gpt-4o: {input: 2.5, output: 10.0}}
""",
    "untargeted.yaml": "name: untargeted\narms:\n  - {model: gpt-4o-mini}\n  - {model: gpt-4o}\n",
}


@pytest.fixture(scope="module")
def inputs(tmp_path_factory):
    """Every bad file of the table below, in one folder (``conf/task/`` holds the task files)."""
    folder = tmp_path_factory.mktemp("inputs")
    (folder / "conf" / "task").mkdir(parents=True)
    for name, text in TASKS.items():
        (folder / "conf" / "task" / name).write_text(text)
    rng = np.random.default_rng(0)
    (folder / "binary.csv").write_bytes(b"\x93NUMPY\x01\x00v\x00" + rng.bytes(200))  # an .npy renamed .csv
    (folder / "latin1.csv").write_bytes("arm,q1,q2\ngroße,1,0\nklein,0,1\n".encode("latin-1"))
    (folder / "corrupt.npz").write_bytes(b"not a zip archive at all")
    np.savez(folder / "whole.npz", scores=np.ones((3, 40)))
    (folder / "truncated.npz").write_bytes((folder / "whole.npz").read_bytes()[:300])
    (folder / "prices3.csv").write_text("arm,usd_per_1m_tokens\na,0.15\nb,0.6\nc,2.5\n")
    (folder / "a_file").write_text("a file where a folder should be\n")
    (folder / "reports").mkdir()
    (folder / "reports" / "reports.yaml").write_text("main: {versus: [GittinsEval-S]\nlambda: {}\n")
    np.save(folder / "small.npy", (rng.uniform(size=(3, 6)) < 0.5).astype(float))
    return folder


def hydra_command(case, inputs, tmp_path):
    """The command line of one Hydra-app row of the table, its files in ``inputs``, its outputs in ``tmp_path``."""
    sim = [str(BIN / "gittinseval"), "logger=none", f"hydra.run.dir={tmp_path / 'run'}"]
    matrix = [*sim, "benchmark=matrix", "prior=general", "cost=unit"]
    live = [str(BIN / "gittinseval-live"), "--config-dir", str(inputs / "conf"), "logger=none", "progress=false",
            f"store={tmp_path / 'live.sqlite'}", f"hydra.run.dir={tmp_path / 'run'}"]
    return {
        "live task file with a YAML syntax error": [*live, "task=broken"],
        "policy.kappa=abc": [*matrix, f"benchmark.path={SCORES}", "policy.kappa=abc"],
        "prior.mean=high (prior=general)": [*matrix, f"benchmark.path={SCORES}", "prior.mean=high"],
        "prior.mean=high (the default prior=specific)": [*sim, "prior.mean=high"],
        "live policy.kappa=abc": [*live, "task.latency=0", "policy.kappa=abc"],
        "binary CSV": [*matrix, f"benchmark.path={inputs / 'binary.csv'}"],
        "non-UTF-8 CSV": [*matrix, f"benchmark.path={inputs / 'latin1.csv'}"],
        "corrupt .npz": [*matrix, f"benchmark.path={inputs / 'corrupt.npz'}"],
        "truncated .npz": [*matrix, f"benchmark.path={inputs / 'truncated.npz'}"],
        "prices of the wrong length": [*sim, "benchmark=matrix", f"benchmark.path={SCORES}", "prior=general",
                                       f"benchmark.costs={inputs / 'prices3.csv'}"],
        "live task arms as a mapping": [*live, "task=mapped"],
        "live task without _target_": [*live, "task=untargeted"],
        "a flag after the overrides": [*matrix, f"benchmark.path={SCORES}", "-m", "seed=0,1"],
        "live flag after the overrides": [*live, "--cfg", "job", "task=mmlu"],
        "batch size larger than N": [*matrix, f"benchmark.path={inputs / 'small.npy'}", "policy.batch_size=8"],
        "a cost target that does not import": [*sim, "cost._target_=gittinseval.NoSuchCost"],
    }[case]


@pytest.mark.parametrize(
    ("case", "message"),
    [
        ("live task file with a YAML syntax error", "broken.yaml: not valid YAML (line 3, column 5): expected ',' or "
                                                    "']', but got ':' (while parsing a flow sequence); fix the "
                                                    "file's syntax there"),
        ("policy.kappa=abc", "policy.kappa must be a number, got 'abc'; e.g. policy.kappa=1.0, its default"),
        ("prior.mean=high (prior=general)", "prior.mean must be a number, got 'high'; e.g. prior.mean=0.5, its "
                                            "default"),
        ("prior.mean=high (the default prior=specific)", "prior.mean must be a number, got 'high'; "
                                                         "give prior.mean=<number>"),
        ("live policy.kappa=abc", "policy.kappa must be a number, got 'abc'"),
        ("binary CSV", "binary.csv: not a UTF-8 text CSV (byte 0 is b'\\x93'): save it as CSV UTF-8, or give a .npy, "
                       ".npz or .parquet file"),
        ("non-UTF-8 CSV", "latin1.csv: not a UTF-8 text CSV (byte 13 is b'\\xdf'): save it as CSV UTF-8"),
        ("corrupt .npz", "corrupt.npz: cannot read the matrix: the file is not a NumPy .npz archive; write it with "
                         "numpy.savez, or give a .csv or .parquet file"),
        ("truncated .npz", "truncated.npz: cannot read the matrix, a NumPy .npz archive that is damaged"),
        ("prices of the wrong length", "prices3.csv: 3 prices for 8 arms; give one price per arm, in the arms' order"),
        ("live task arms as a mapping", "task.arms is a mapping (small, big), and the arms are a list: write each as a "
                                        "list item with its key as its name, - {name: small, model: ...}"),
        ("live task without _target_", "task=untargeted has no _target_, so nothing builds the task: begin its file "
                                       "with _target_: gittinseval.live.chat_task"),
        ("a flag after the overrides", "unrecognized arguments: seed=0,1; flags (-m, --cfg job, --config-dir DIR, ...) "
                                       "go before the overrides (key=value)"),
        ("live flag after the overrides", "unrecognized arguments: task=mmlu; flags (-m, --cfg job"),
        ("batch size larger than N", "policy.batch_size (8) is larger than the number of examples N = 6; give "
                                     "policy.batch_size=6 or less"),
        ("a cost target that does not import", "Error loading 'gittinseval.NoSuchCost'"),
    ],
)
def test_a_bad_input_of_the_first_hour_is_one_line_with_the_remedy(inputs, tmp_path, case, message):
    command = hydra_command(case, inputs, tmp_path)
    env = {key: value for key, value in os.environ.items() if key != "HYDRA_FULL_ERROR"}
    result = subprocess.run(command, capture_output=True, text=True, env=env, timeout=180, cwd=tmp_path)
    program = Path(command[0]).name
    lines = result.stderr.strip().splitlines()
    assert result.returncode == 2, result.stderr
    assert len(lines) == 1 and lines[0].startswith(f"{program}: error: "), result.stderr
    assert message in lines[0]
    assert not (tmp_path / "live.sqlite").exists()


@pytest.fixture(scope="module")
def sweep(tmp_path_factory):
    """A finished sweep of two methods on the toy matrix: the runs that the report reads."""
    folder = tmp_path_factory.mktemp("sweep")
    command = [str(BIN / "gittinseval"), "-m", "benchmark=matrix", f"benchmark.path={SCORES}", "prior=general",
               "cost=unit", "logger=none", "budget=0.02", "policy=gittins,ucbe", f"hydra.sweep.dir={folder}"]
    subprocess.run(command, capture_output=True, text=True, timeout=300, check=True)
    return folder


@pytest.mark.parametrize(
    ("case", "message"),
    [
        ("report --all on a corrupt reports.yaml", "{inputs}/reports/reports.yaml: not valid YAML (line 2, column 1): "
                                                   "expected ',' or '}', but got '<scalar>' (while parsing a flow "
                                                   "mapping); fix the file's syntax there"),
        ("report --versus a method not run", "--versus 'NoSuchMethod': no runs of that method; the methods present: "
                                             "GittinsEval-G, UCB-E (give one of them, quoted if it has spaces)"),
        ("report --out under a file", "--out {inputs}/a_file/report: cannot write the folder {inputs}/a_file/report: "
                                      "{inputs}/a_file is a file; choose another --out"),
        ("data quality --out under a file", "--out {inputs}/a_file/figures: cannot write the folder "
                                            "{inputs}/a_file/figures: {inputs}/a_file is a file; choose another --out"),
        ("store export --to under a file", "--to {inputs}/a_file/runs.parquet: cannot write the folder "
                                           "{inputs}/a_file: {inputs}/a_file is a file; choose another --to"),
    ],
)
def test_a_bad_input_of_the_other_apps_is_one_line_with_the_remedy(inputs, sweep, case, message, capsys):
    main, argv = {
        "report --all on a corrupt reports.yaml": (report_cli.main, ["--all", str(inputs / "reports")]),
        "report --versus a method not run": (report_cli.main, [str(sweep), "--versus", "NoSuchMethod",
                                                               "--figures", "none", "--out", str(inputs / "report")]),
        "report --out under a file": (report_cli.main, [str(sweep), "--out", str(inputs / "a_file" / "report")]),
        "data quality --out under a file": (data_cli.main, ["quality", "piqa", "--out",
                                                            str(inputs / "a_file" / "figures")]),
        "store export --to under a file": (store_cli.main, ["export", str(sweep), "--to",
                                                            str(inputs / "a_file" / "runs.parquet")]),
    }[case]
    with pytest.raises(SystemExit) as exit_:
        main(argv)
    captured = capsys.readouterr()
    program = main.__module__.replace("gittinseval.cli.", "gittinseval-")
    assert exit_.value.code == 2 and captured.out == ""
    assert captured.err == f"{program}: error: {message.replace('{inputs}', str(inputs))}\n"
    assert not (inputs / "report").exists()


def test_a_results_store_yet_to_be_made_is_said_at_the_start(tmp_path):
    store = tmp_path / "not_yet.parquet"
    command = [str(BIN / "gittinseval"), "benchmark=matrix", f"benchmark.path={SCORES}", "prior=general",
               "cost=unit", "logger=none", "budget=0.02", f"results_store={store}", f"hydra.run.dir={tmp_path / 'run'}"]
    result = subprocess.run(command, capture_output=True, text=True, timeout=180)
    assert result.returncode == 0, result.stderr
    lines = result.stdout.splitlines()
    assert f"results_store={store} does not exist yet: no run is skipped as stored; gittinseval-store export " \
           f"<sweep folder> --to {store} creates it from finished runs" in lines[0]
    assert (tmp_path / "run" / "summary.json").is_file() and not store.exists()


def test_a_task_smaller_than_the_default_batch_runs_in_batches_of_the_task(inputs, tmp_path):
    """The default batch (8 here) is cut to N = 6 with a log line; a batch size that is set is not (above)."""
    command = [str(BIN / "gittinseval"), "benchmark=matrix", f"benchmark.path={inputs / 'small.npy'}", "prior=general",
               "cost=unit", "logger=none", "budget=1", f"hydra.run.dir={tmp_path / 'run'}"]
    result = subprocess.run(command, capture_output=True, text=True, timeout=180)
    assert result.returncode == 0, result.stderr
    assert "the default batch size 8 is larger than the task's N = 6 examples: batches of 6 (policy.batch_size " \
           "sets another)" in result.stdout
    with gzip.open(tmp_path / "run" / "trace.csv.gz", "rt") as trace:
        assert {row["batch_size"] for row in csv.DictReader(trace)} == {"6"}


def test_the_composed_live_config_shows_no_store_and_the_run_names_its_own(hydra_choices, tmp_path, monkeypatch):
    """``--cfg job --resolve`` showed ``None_gittins_aware_seed0.sqlite`` for an inspect task, whose name is its
    task's: the composed config says ``store: null`` and the run names the store as it always did."""
    result = subprocess.run([str(BIN / "gittinseval-live"), "task=inspect_offline", "--cfg", "job", "--resolve"],
                            capture_output=True, text=True, timeout=180, cwd=Path(__file__).resolve().parents[2])
    assert result.returncode == 0, result.stderr
    assert "store: null" in result.stdout.splitlines() and "None_" not in result.stdout
    inspect = hydra_choices("task=inspect_offline", "budget_usd=0.003")
    assert inspect.store is None
    dry_run(inspect)
    assert inspect.store == "outputs/live/arithmetic_gittins_aware_seed0.sqlite"
    chat = hydra_choices("task=openai_chat", "policy=ucbe", "cost=unit", "seed=2")
    with pytest.raises(ValueError, match="cost=unit counts examples"):
        dry_run(chat)  # refused after the task is built: the store is named all the same
    assert chat.store == "outputs/live/openai_chat_ucbe_unit_seed2.sqlite"
    monkeypatch.chdir(tmp_path)
    run = hydra_choices("task.latency=0", "progress=false", "logger=none", "budget_usd=0.01")
    assert run_live(run, tmp_path / "run").store == Path("outputs/live/mmlu_high_school_psychology_gittins_aware_seed0"
                                                         ".sqlite")
    assert (tmp_path / "outputs" / "live" / "mmlu_high_school_psychology_gittins_aware_seed0.sqlite").is_file()
