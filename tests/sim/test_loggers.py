"""W&B logging: curve thinning, the offline fallback when the server is unreachable, and no noise."""

import os
import sys
import types

import numpy as np
import pytest

from gittinseval import Benchmark, GaussianPrior, GittinsPolicy, simulate
from gittinseval.sim.loggers import WEAVE_SWITCH, WandbLogger, logged_steps


def test_logged_steps_keep_every_recommendation_change_and_both_ends():
    recommended = np.array([0] * 50 + [3] * 7 + [1] * 43)
    steps = logged_steps(recommended, max_points=5)
    assert {0, 50, 57, 99} <= set(steps.tolist())
    assert np.all(np.diff(steps) > 0)
    assert len(steps) <= 5 + 3
    np.testing.assert_array_equal(logged_steps(recommended, max_points=1000), np.arange(100))
    assert logged_steps(np.zeros(0, int), 10).size == 0


def test_unreachable_server_falls_back_to_offline(tmp_path, monkeypatch):
    # A closed port on loopback stands in for "no network".
    monkeypatch.setenv("WANDB_BASE_URL", "http://127.0.0.1:9")
    monkeypatch.setenv("WANDB_API_KEY", "x" * 40)
    benchmark = Benchmark("toy", np.random.default_rng(0).uniform(size=(4, 12)))
    result = simulate(benchmark, GittinsPolicy(batch_size=4), np.ones(4), GaussianPrior(), seed=0)
    WandbLogger(mode="online", init_timeout=3).log_run(result, {"seed": 0}, tmp_path, name="x")
    assert len(list((tmp_path / "wandb").glob("offline-run-*"))) == 1


@pytest.mark.parametrize(
    ("imported", "user_setting", "during_init"),
    [
        ("openai", None, "true"),  # the simulator traces no LLM call: no advert for W&B Weave
        ("weave", None, None),  # a user who imported weave keeps W&B's Weave integration
        ("openai", "false", "false"),  # and so does one who asks for it
    ],
)
def test_wandb_advertises_no_weave_unless_asked(tmp_path, monkeypatch, capsys, imported, user_setting, during_init):
    import wandb
    from wandb.integration import weave

    monkeypatch.setitem(sys.modules, imported, types.ModuleType(imported))
    if user_setting is None:
        monkeypatch.delenv(WEAVE_SWITCH, raising=False)
    else:
        monkeypatch.setenv(WEAVE_SWITCH, user_setting)
    seen = []

    def init(**kwargs):
        seen.append(os.environ.get(WEAVE_SWITCH))
        if imported == "openai":
            weave.init_weave_if_imported(kwargs["entity"], kwargs["project"])  # what wandb.init does last
        return "run"

    monkeypatch.setattr(wandb, "init", init)
    assert WandbLogger(mode="offline").start_run(tmp_path) == "run"
    assert seen == [during_init]
    assert os.environ.get(WEAVE_SWITCH) == user_setting  # set only while the run starts
    if during_init == "true":
        assert "Weave" not in capsys.readouterr().err
