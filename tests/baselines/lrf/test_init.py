"""The UCB-E-LRF package (gittinseval.baselines.lrf): its public classes answer to the package's path, which
the configs' ``_target_``s, the recorded hyperparameters and pickling all use."""

import importlib
import pickle

import numpy as np
from hydra.utils import instantiate

import gittinseval.baselines.lrf as lrf
from gittinseval.core.params import get_params, target_of

DEFINED_IN = {
    "EnsembleFit": "ensemble",
    "FitDraws": "dropout",
    "LowRankEnsemble": "ensemble",
    "LRFPolicy": "policy",
    "ObservedMatrix": "observed",
}
"""Each public class and the module that defines it."""


def test_the_public_names_are_the_classes_of_their_modules_under_the_packages_path():
    assert sorted(lrf.__all__) == sorted(DEFINED_IN)
    for name, module in DEFINED_IN.items():
        cls = getattr(lrf, name)
        assert cls is getattr(importlib.import_module(f"gittinseval.baselines.lrf.{module}"), name)
        assert cls.__module__ == "gittinseval.baselines.lrf" and cls.__qualname__ == name


def test_a_policy_is_named_built_and_pickled_by_the_public_path():
    policy = lrf.LRFPolicy(batch_size=4, ensemble=lrf.LowRankEnsemble(ensemble_size=6, rank=2))
    assert target_of(policy) == "gittinseval.baselines.lrf.LRFPolicy"
    params = get_params(policy)
    assert params["ensemble"]["_target_"] == "gittinseval.baselines.lrf.LowRankEnsemble"
    rebuilt = instantiate({"_target_": target_of(policy), **{k: v for k, v in params.items() if k != "_target_"}})
    assert type(rebuilt) is lrf.LRFPolicy and rebuilt.ensemble.rank == 2 and rebuilt.batch_size == 4
    # pickle finds a class by its __module__: the rewritten one must lead back to the same class.
    copy = pickle.loads(pickle.dumps(policy))
    assert type(copy) is lrf.LRFPolicy and type(copy.ensemble) is lrf.LowRankEnsemble
    assert get_params(copy) == params


def test_an_observed_matrix_survives_a_pickle_with_its_cells():
    observed = lrf.ObservedMatrix(3, 5)
    observed.add(1, np.array([0, 4]), np.array([1.0, 0.5]))
    copy = pickle.loads(pickle.dumps(observed))
    assert type(copy) is lrf.ObservedMatrix and copy.shape == (3, 5)
    np.testing.assert_array_equal(np.argwhere(copy.observed), [[1, 0], [1, 4]])
    np.testing.assert_array_equal(copy.values[1], [1.0, 0.0, 0.0, 0.0, 0.5])
