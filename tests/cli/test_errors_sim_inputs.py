"""The simulator's input errors name every fix at once, on one line: a user's own matrix, its cost file,
an unknown experiment.  (The command line prints ``one_line(error)``: tests/cli/test_errors.py.)"""

import numpy as np
import pytest
from hydra import compose, initialize_config_dir
from hydra.errors import InstantiationException, MissingConfigException
from hydra.utils import instantiate

from gittinseval.cli.configs import CONFIG_DIR
from gittinseval.cli.errors import one_line
from gittinseval.sim.experiment import simulate_config


def compose_config(*overrides):
    with initialize_config_dir(config_dir=str(CONFIG_DIR), version_base="1.3"):
        return compose(config_name="config", overrides=list(overrides))


@pytest.fixture(scope="module")
def matrix(tmp_path_factory):
    folder = tmp_path_factory.mktemp("matrix")
    np.save(folder / "scores.npy", (np.random.default_rng(0).uniform(size=(5, 40)) < 0.5).astype(float))
    np.save(folder / "prices.npy", np.array([0.15, 0.6, 0.6, 2.5, 10.0]))
    (folder / "broken.json").write_text("[0.15, 0.6,")
    return folder


def test_a_matrix_without_prior_or_prices_names_both_fixes_at_once(matrix):
    cfg = compose_config("benchmark=matrix", f"benchmark.path={matrix / 'scores.npy'}")  # prior=specific, cost=aware
    with pytest.raises(ValueError) as raised:
        simulate_config(cfg)
    message = one_line(raised.value)  # what the command line prints, after "gittinseval: error: "
    assert message == str(raised.value)  # one line already
    assert "has none; set prior.mean and prior.var, or use prior=general" in message
    assert "no prices either: with cost=aware (the default) give benchmark.costs=<prices file>, or use cost=unit" in (
        message
    )
    # Each fix alone then runs.
    for fixed in (["prior=general", "cost=unit"], ["prior=general", f"benchmark.costs={matrix / 'prices.npy'}"]):
        cfg = compose_config("benchmark=matrix", f"benchmark.path={matrix / 'scores.npy'}", "budget=0.05", *fixed)
        assert simulate_config(cfg).summary["n_steps"] > 0


def test_a_matrix_with_prices_is_told_only_about_the_prior(matrix):
    cfg = compose_config("benchmark=matrix", f"benchmark.path={matrix / 'scores.npy'}",
                         f"benchmark.costs={matrix / 'prices.npy'}")
    with pytest.raises(ValueError, match="or use prior=general$"):
        simulate_config(cfg)


def test_a_malformed_cost_file_is_named_through_the_config(matrix):
    cfg = compose_config("benchmark=matrix", f"benchmark.path={matrix / 'scores.npy'}",
                         f"benchmark.costs={matrix / 'broken.json'}")
    with pytest.raises(InstantiationException) as raised:
        instantiate(cfg.benchmark)
    assert one_line(raised.value).startswith(f"{matrix / 'broken.json'}: cannot read the costs (Expecting value")


def test_an_unknown_experiment_lists_the_nested_ones():
    with pytest.raises(MissingConfigException) as raised:
        compose_config("experiment=paper/nope")
    message = one_line(raised.value)
    options = message.split("available options in 'experiment': ")[1].split(", ")
    nested = sorted(path.relative_to(CONFIG_DIR / "experiment").with_suffix("").as_posix()
                    for path in (CONFIG_DIR / "experiment").rglob("*.yaml"))
    assert sorted(options) == nested and "paper/main" in options and "main" in options
