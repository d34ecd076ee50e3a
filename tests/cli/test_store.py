"""gittinseval-store: ``export`` adds the runs of sweep folders to a results store, each once, and says how many."""

import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from gittinseval.cli.store import main
from gittinseval.sim.results_store import read_store
from gittinseval.sim.simulator import RunResult


def save_run(folder: Path, seed: int, wall_time: float = 1.0) -> None:
    """A finished run of seed ``seed`` (its config digest names the seed) in ``folder``."""
    cost = np.array([0.5, 1.0, 2.0])
    trace = {
        "step": np.arange(1, 4), "arm": np.zeros(3, int), "batch_size": np.full(3, 8), "cost": cost,
        "cost_pct": cost, "recommended": np.zeros(3, int), "regret": np.array([0.3, 0.1, 0.0]),
    }
    summary = {"benchmark": "toy", "label": "UCB-E", "seed": seed, "cost_mode": "unit", "budget_fraction": 0.1,
               "config_digest": f"{seed:064x}", "wall_time_s": wall_time}
    RunResult(trace, summary).save(folder)


def test_export_adds_each_run_once_and_says_how_many(tmp_path, capsys):
    for seed in range(3):
        save_run(tmp_path / "first" / f"s{seed}", seed)
    save_run(tmp_path / "second" / "s9", 9)
    store = tmp_path / "results" / "toy.parquet"
    main(["export", str(tmp_path / "first"), "--to", str(store)])
    assert capsys.readouterr().out == f"{store}: added 3 runs, 0 stored already\n"
    main(["export", str(tmp_path / "first"), str(tmp_path / "second"), "--to", str(store)])
    assert capsys.readouterr().out == f"{store}: added 1 run, 3 stored already\n"
    assert [row.summary["seed"] for row in read_store(store)] == [0, 1, 2, 9]


def wall_times(store: Path) -> dict[int, float]:
    return {row.summary["seed"]: row.summary["wall_time_s"] for row in read_store(store)}


def test_export_with_replace_swaps_the_stored_runs_of_the_same_configs(tmp_path, capsys):
    for seed in range(3):
        save_run(tmp_path / "before" / f"s{seed}", seed)
    save_run(tmp_path / "rerun" / "s1", 1, wall_time=5.0)
    save_run(tmp_path / "rerun" / "s7", 7, wall_time=5.0)
    store = tmp_path / "toy.parquet"
    main(["export", str(tmp_path / "before"), "--to", str(store)])
    capsys.readouterr()
    main(["export", str(tmp_path / "rerun"), "--to", str(store)])
    assert capsys.readouterr().out == f"{store}: added 1 run, 1 stored already\n"
    assert wall_times(store) == {0: 1.0, 1: 1.0, 2: 1.0, 7: 5.0}
    main(["export", str(tmp_path / "rerun"), "--to", str(store), "--replace"])
    assert capsys.readouterr().out == f"{store}: added 2 runs, replacing 2 stored runs of the same configs\n"
    # Nothing lost: the runs the rerun has not are kept, each config once.
    assert wall_times(store) == {0: 1.0, 2: 1.0, 1: 5.0, 7: 5.0}
    assert len(read_store(store)) == 4


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["export", "missing", "--to", "x.parquet"], "gittinseval-store: error: missing is neither a sweep folder"),
        (["export", "{sweep}", "--to", "x.csv"], "gittinseval-store: error: a results store is a .parquet file"),
        (["export", "{sweep}"], "the following arguments are required: --to"),
        ([], "the following arguments are required: COMMAND"),
    ],
)
def test_a_wrong_command_exits_with_2_and_says_why(tmp_path, monkeypatch, capsys, argv, message):
    monkeypatch.chdir(tmp_path)
    save_run(tmp_path / "sweep" / "s0", 0)
    with pytest.raises(SystemExit) as error:
        main([arg.format(sweep=tmp_path / "sweep") for arg in argv])
    assert error.value.code == 2 and message in capsys.readouterr().err
    assert not list(tmp_path.glob("x.*"))


def test_a_corrupt_store_is_named_in_one_line(tmp_path, capsys):
    save_run(tmp_path / "sweep" / "s0", 0)
    store = tmp_path / "store.parquet"
    store.write_bytes(b"not a parquet file")
    with pytest.raises(SystemExit) as error:
        main(["export", str(tmp_path / "sweep"), "--to", str(store)])
    assert error.value.code == 2
    (message,) = capsys.readouterr().err.splitlines()
    assert message.startswith(f"gittinseval-store: error: {store} is not a readable results store")
    assert store.read_bytes() == b"not a parquet file"


def test_the_console_script_runs_the_command(tmp_path):
    save_run(tmp_path / "sweep" / "s0", 0)
    store = tmp_path / "store.parquet"
    command = [str(Path(sys.executable).with_name("gittinseval-store")), "export", str(tmp_path / "sweep"), "--to",
               str(store)]
    result = subprocess.run(command, capture_output=True, text=True, check=True, timeout=300)
    assert result.stdout == f"{store}: added 1 run, 0 stored already\n"
