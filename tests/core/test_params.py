"""The baselines' `_target_`s from before their move into the package: named so for digests and live store
identities, and built again from either name."""

from gittinseval.baselines.lrf import LowRankEnsemble, LRFPolicy
from gittinseval.baselines.ucbe import UCBEPolicy
from gittinseval.core.params import (
    LEGACY_BASELINE_MODULES,
    build,
    current_target,
    current_targets,
    get_params,
    legacy_target,
    legacy_targets,
)


def test_a_bundled_baseline_is_named_by_its_old_path_and_back():
    pairs = [
        ("gittinseval.baselines.ucbe.UCBEPolicy", "baselines.ucbe.UCBEPolicy"),
        ("gittinseval.baselines.lrf.LowRankEnsemble", "baselines.lrf.LowRankEnsemble"),
        ("gittinseval.baselines.bo.policy.ConfigurationBOPolicy", "baselines.bo.policy.ConfigurationBOPolicy"),
    ]
    for target, old in pairs:
        assert legacy_target(target) == old and current_target(old) == target
    assert LEGACY_BASELINE_MODULES == {
        "_common", "bo", "logei", "logeipc", "lrf", "pbgi", "prompteval", "sysrs", "ucbe", "uniform"
    }  # fmt: skip


def test_other_targets_keep_their_names():
    for target in (
        "gittinseval.GittinsPolicy",
        "gittinseval.core.gittins.GittinsPolicy",
        "gittinseval.baselines.greedy.GreedyMean",  # a baseline added since the move has no old name
        "my_baselines.ucbe.UCBEPolicy",
        "baselines.ppo2.Model",  # another package named baselines
        "gittinseval.baselines.ucbe",
    ):
        assert legacy_target(target) == target and current_target(target) == target


def test_nested_targets_are_renamed_and_nothing_else():
    recorded = {"_target_": "gittinseval.baselines.lrf.LRFPolicy", "label": "gittinseval.baselines.lrf.LRFPolicy",
                "ensemble": {"_target_": "gittinseval.baselines.lrf.LowRankEnsemble", "rank": 1},
                "members": [{"_target_": "gittinseval.baselines.ucbe.UCBEPolicy"}], "none": None}
    old = legacy_targets(recorded)
    assert old == {"_target_": "baselines.lrf.LRFPolicy", "label": "gittinseval.baselines.lrf.LRFPolicy",
                   "ensemble": {"_target_": "baselines.lrf.LowRankEnsemble", "rank": 1},
                   "members": [{"_target_": "baselines.ucbe.UCBEPolicy"}], "none": None}
    assert current_targets(old) == recorded and recorded["_target_"] == "gittinseval.baselines.lrf.LRFPolicy"


def test_a_record_under_either_name_builds_the_same_policy():
    policy = LRFPolicy(batch_size=4, ensemble=LowRankEnsemble(ensemble_size=6, iterations=3))
    params = get_params(policy)
    for target, recorded in (("gittinseval.baselines.lrf.LRFPolicy", params),
                             ("baselines.lrf.LRFPolicy", legacy_targets(params))):
        rebuilt = build(target, recorded)
        assert type(rebuilt) is LRFPolicy and type(rebuilt.ensemble) is LowRankEnsemble
        assert get_params(rebuilt) == params
    assert type(build("baselines.ucbe.UCBEPolicy", {"a": 2.0})) is UCBEPolicy
