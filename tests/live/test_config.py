"""The settings of a live run (gittinseval.live.config): checked and normalised once when built, from Python
arguments or from a composed ``gittinseval-live`` config (by gittinseval.live.app.run_live)."""

from pathlib import Path

import pytest
from hydra import compose, initialize_config_dir

from gittinseval.baselines.ucbe import UCBEPolicy
from gittinseval.cli.configs import CONFIG_DIR
from gittinseval.cli.live import LIVE_CONFIG_NAME
from gittinseval.core.certificate import CertificateSettings
from gittinseval.core.confidence_stop import ConfidenceStop
from gittinseval.core.cost_learning import CostLearning
from gittinseval.core.gittins import GittinsPolicy
from gittinseval.core.objective import Objective
from gittinseval.core.priors import BenchmarkPrior, GaussianPrior
from gittinseval.data import load_mmlu
from gittinseval.live.config import LiveConfig
from gittinseval.sim.loggers import NullLogger
from tests.conftest import built_live_run


def test_the_defaults_are_gittinseval_under_the_general_prior_with_the_anytime_statement():
    config = LiveConfig()
    assert isinstance(config.policy, GittinsPolicy) and config.prior == GaussianPrior()
    assert config.budget_usd is None and config.store is None and config.run_store is None
    assert config.certificate == CertificateSettings(anytime=True) and config.stop_when is None
    assert config.learn_costs == CostLearning() and config.objective == Objective()
    assert (config.seed, config.concurrency, config.max_retries, config.retry_backoff) == (0, 1, 3, 1.0)


def test_values_are_normalised_when_the_settings_are_built():
    config = LiveConfig(budget_usd=2, store="runs/a.sqlite", fork="runs/b.sqlite", log_dir="logs",
                        certificate={"level": 0.9, "eps": 0.02}, stop_when={"prob_eps_best": 0.8, "eps": 0.05},
                        stop_at_signal=1, progress=0)
    assert config.budget_usd == 2.0 and isinstance(config.budget_usd, float)
    assert config.store == Path("runs/a.sqlite") and config.log_dir == Path("logs")
    assert config.run_store == Path("runs/b.sqlite")  # the fork is the store the run writes
    assert config.certificate == CertificateSettings(level=0.9, eps=0.02)
    assert config.stop_when == ConfidenceStop(prob_eps_best=0.8, eps=0.05)
    assert config.stop_at_signal is True and config.progress is False
    with pytest.raises(AttributeError):
        config.seed = 1  # frozen: built once, handed on unchanged


@pytest.mark.parametrize(
    ("settings", "message"),
    [
        ({"budget_usd": 0}, "budget_usd must be positive"),
        ({"seed": -1}, "seed must be a non-negative integer"),
        ({"concurrency": 0}, "concurrency must be a positive integer"),
        ({"max_retries": 1.5}, "max_retries must be a non-negative integer"),
        ({"retry_backoff": -1.0}, "retry_backoff must be non-negative"),
        ({"policy": "gittins"}, "policy must be a gittinseval.core.protocol.Policy, got str"),
        ({"objective": "value"}, "objective must be a gittinseval.core.objective.Objective, got 'value'"),
        ({"learn_costs": {"pseudo_count": 1.0}}, "learn_costs must be a CostLearning or None"),
        ({"prior": BenchmarkPrior("specific")}, "prior must be a GaussianPrior \\(resolve a BenchmarkPrior first\\)"),
        ({"certificate": {"level": 1.5}}, "level must be a number in"),
        ({"stop_when": {"eps": -0.1}}, "eps must be non-negative"),
    ],
)
def test_a_bad_setting_is_refused_by_name(settings, message):
    with pytest.raises(ValueError, match=message):
        LiveConfig(**settings)


def test_a_fork_that_is_the_store_itself_is_refused_however_it_is_written(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    with pytest.raises(ValueError, match="fork=.*run.sqlite is the store it forks: give the fork a path of its own"):
        LiveConfig(store="run.sqlite", fork=tmp_path / "run.sqlite")
    assert LiveConfig(fork="new.sqlite").run_store == Path("new.sqlite")  # a fork needs no store


def test_a_composed_config_gives_the_settings_it_names(tmp_path):
    overrides = ["policy=ucbe", "policy.batch_size=4", "prior=specific", "budget_usd=0.25", "seed=3",
                 "store=s.sqlite", "concurrency=2", "learn_costs=null", "max_retries=0", "progress=false",
                 "logger=none", "stop_when={prob_eps_best: 0.9, eps: 0.02}"]
    with initialize_config_dir(config_dir=str(CONFIG_DIR), version_base="1.3"):
        cfg = compose(config_name=LIVE_CONFIG_NAME, overrides=overrides)
    benchmark = load_mmlu(cfg.task.benchmark.subject)
    _, config = built_live_run(cfg, tmp_path / "run")
    assert isinstance(config.policy, UCBEPolicy) and config.policy.batch_size == 4
    mean, var = benchmark.specific_prior
    assert (config.prior.mean, config.prior.var) == (mean, var)  # prior=specific read from the task's benchmark
    assert (config.budget_usd, config.seed, config.store, config.concurrency) == (0.25, 3, Path("s.sqlite"), 2)
    assert config.learn_costs is None and config.max_retries == 0 and config.progress is False
    assert config.stop_when == ConfidenceStop(0.9, 0.02) and config.certificate.anytime
    assert config.log_dir == tmp_path / "run" and config.log_config["budget_usd"] == 0.25
    assert isinstance(config.logger, NullLogger) and config.objective == Objective()
