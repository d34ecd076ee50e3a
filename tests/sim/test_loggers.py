"""W&B logging: curve thinning and the offline fallback when the server is unreachable."""

import numpy as np

from gittinseval import Benchmark, GaussianPrior, GittinsPolicy, simulate
from gittinseval.sim.loggers import WandbLogger, logged_steps


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
