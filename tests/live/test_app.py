"""A live run built from a composed ``gittinseval-live`` config (gittinseval.live.app): the default store named from
the command line's choices, and the files a run writes, against its result and its store."""

import json
import sqlite3

import pytest
from hydra import compose, initialize_config_dir
from omegaconf import open_dict

from gittinseval.cli.configs import CONFIG_DIR
from gittinseval.cli.live import LIVE_CONFIG_NAME
from gittinseval.live.app import DEFAULT_STORE, default_store, run_live
from gittinseval.live.status import Recommendation
from gittinseval.utils.errors import UsageError

QUICK = ["task.latency=0", "progress=false", "logger=none", "budget_usd=0.004", "policy.batch_size=4"]
"""The bundled MMLU task, replayed at once, for a few cents' worth of calls."""


def compose_live(*overrides):
    with initialize_config_dir(config_dir=str(CONFIG_DIR), version_base="1.3"):
        return compose(config_name=LIVE_CONFIG_NAME, overrides=list(overrides))


def test_the_default_store_is_named_by_the_task_and_the_choices_on_the_command_line(hydra_choices):
    cfg = hydra_choices("policy=ucbe", "cost=unit", "seed=5")
    with open_dict(cfg):
        cfg.task.name = "quiz"
    expected = DEFAULT_STORE.format(task="quiz", policy="ucbe", cost="unit", seed=5)
    assert default_store(cfg) == expected == "outputs/live/quiz_ucbe_unit_seed5.sqlite"


def test_outside_a_hydra_app_a_store_must_be_given():
    cfg = compose_live(*QUICK)
    with pytest.raises(UsageError, match="store: null names the store after the command line's policy= and cost=: "
                                         "give store=PATH"):
        default_store(cfg)
    with pytest.raises(UsageError, match="give store=PATH"):
        run_live(cfg, "unused")


def test_a_run_writes_its_summary_status_and_log_line_as_its_result_and_store_say(tmp_path, caplog):
    caplog.set_level("INFO", logger="gittinseval.live.app")
    store = tmp_path / "run.sqlite"
    result = run_live(compose_live(*QUICK, f"store={store}"), tmp_path / "run")
    assert result.stop_reason == "budget" and result.store == store
    summary = json.loads((tmp_path / "run" / "summary.json").read_text())
    assert summary == json.loads(json.dumps({"task": "mmlu_high_school_psychology", **result.summary()}))
    status = (tmp_path / "run" / "status.txt").read_text()
    assert status.startswith(result.ledger_line())
    with sqlite3.connect(store) as db:
        n_cells = db.execute("SELECT COUNT(*) FROM cells").fetchone()[0]
        charged = db.execute("SELECT SUM(charged) FROM attempts").fetchone()[0]
    assert summary["n_cells"] == n_cells > 0 and summary["spent"] == pytest.approx(charged, rel=1e-12)
    rec: Recommendation = result.recommendation
    assert f"stopped (budget); {result.ledger_line()}; recommended {rec.label} (M={rec.mean:.3f}, LCB={rec.lcb:.3f})" \
        in caplog.text
