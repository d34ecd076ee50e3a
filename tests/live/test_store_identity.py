"""A store's identity covers everything that makes a score; a change is refused, a fork starts afresh;
``Evaluator.from_store`` rebuilds every live policy from its record."""

import copy
import json
import re
import sqlite3
from dataclasses import replace

import numpy as np
import pytest
import yaml
from hydra import compose, initialize_config_dir
from hydra.utils import instantiate

from gittinseval.baselines.lrf import LowRankEnsemble, LRFPolicy
from gittinseval.cli.configs import CONFIG_DIR
from gittinseval.cli.live import LIVE_CONFIG_NAME
from gittinseval.core.gittins import GittinsPolicy
from gittinseval.core.params import target_of
from gittinseval.live import Evaluator, LiveConfig, LiveTask, MatrixScorer, RunStore, matrix_task
from gittinseval.live.tasks.scoring import bundled_prices, read_jsonl
from tests.conftest import binary_benchmark, built_live_run


def compose_live(*overrides):
    with initialize_config_dir(config_dir=str(CONFIG_DIR), version_base="1.3"):
        return compose(config_name=LIVE_CONFIG_NAME, overrides=["logger=none", *overrides])


def open_store(tmp_path, *overrides):
    """An evaluator of the composed live config on its store (no call is made), closed at once."""
    Evaluator(*built_live_run(compose_live(*overrides), tmp_path / "run")).close()


CHAT = ["task=openai_chat"]
INSPECT = ["task=inspect_offline"]

CHAT_CHANGES = [
    ("task.score_fn.grader.field=reference", "scorer.grader.field: store has 'answer', given 'reference'"),
    (
        "task.score_fn.grader._target_=gittinseval.live.tasks.graders.ExactMatch",
        "scorer.grader: store has 'gittinseval.live.tasks.graders.FirstWord', "
        "given 'gittinseval.live.tasks.graders.ExactMatch'",
    ),
    ("task.score_fn.prompt='Q: {prompt}'", "scorer.prompt: store has '{prompt}', given 'Q: {prompt}'"),
    ("task.score_fn.prices.gpt-4o.output=12", "scorer.prices.gpt-4o.output: store has 10.0, given 12.0"),
    ("task.arms.0.temperature=0.5", "arm 0's temperature: store has 0.0, given 0.5"),
    ("+task.arms.2.system=Be brief.", "arm 2's system: store has None, given 'Be brief.'"),
    ("task.prompt_tokens=50", "tokens_per_example: store has 44.0, given 54.0"),
    ("task.binary=false", "binary: store has True, given False"),
    ("EXAMPLES", "dataset: the examples differ from the store's"),
    ("policy.lam=0.001", "policy.lam: store has 0.0001, given 0.001"),
    ("policy=ucbe", "policy: store has 'gittinseval.core.gittins.GittinsPolicy', given 'baselines.ucbe.UCBEPolicy'"),
    ("prior.var=0.01", "prior_var: store has 0.04, given 0.01"),
    ("cost=unit", "cost_unit: store has 'dollars', given 'unit'"),
    ("seed=3", "seed: store has 0, given 3"),
]
# An inspect arm is recorded whole (its solver and model_args as JSON), with the task's scorer and prices.
INSPECT_CHANGES = [
    ("task.arms.1.solver.0.template='Q: {prompt}'", "arm 1's solver: store has [{'_target_': 'inspect_ai.solver"),
    (
        "task.arms.0.model_args.custom_outputs.accuracy=0.6",
        "arm 0's model_args.custom_outputs.accuracy: store has 0.5, given 0.6",
    ),
    ("task.scorer=match", "scorer.scorer: store has None, given 'match'"),
    ("PRICES", "scorer.prices.mockllm/large.output: store has 10.0, given 12.0"),
]


def changed_file(tmp_path, override):
    """``override``, or for EXAMPLES (PRICES) an override naming a copy of the bundled examples (prices) with
    one answer (price) changed."""
    if override == "EXAMPLES":
        examples = read_jsonl()
        examples[7]["answer"] = "13"
        path = tmp_path / "examples.jsonl"
        path.write_text("".join(json.dumps(example) + "\n" for example in examples))
        return f"task.examples.path={path}"
    if override == "PRICES":
        prices = yaml.safe_load(bundled_prices().read_text())
        prices["mockllm/large"]["output"] = 12
        (tmp_path / "prices.yaml").write_text(yaml.safe_dump(prices))
        return f"task.prices={tmp_path / 'prices.yaml'}"
    return override


@pytest.mark.parametrize(
    ("task", "override", "named"),
    [(CHAT, *change) for change in CHAT_CHANGES] + [(INSPECT, *change) for change in INSPECT_CHANGES],
)
def test_every_setting_that_makes_a_score_is_refused_by_name(tmp_path, task, override, named):
    store = tmp_path / "run.sqlite"
    open_store(tmp_path, *task, f"store={store}")
    with pytest.raises(ValueError, match="was made with other settings") as refused:
        open_store(tmp_path, *task, f"store={store}", changed_file(tmp_path, override))
    message = str(refused.value)
    assert named in message and "\n" not in message and "add fork=NEW_STORE" in message
    with sqlite3.connect(store) as db:  # the refused open changed nothing
        assert db.execute("SELECT COUNT(*) FROM requests").fetchone()[0] == 0


def test_inspect_logs_and_retries_make_no_score_and_a_store_resumes_across_them(tmp_path):
    store = tmp_path / "inspect.sqlite"
    open_store(tmp_path, *INSPECT, f"store={store}")
    open_store(tmp_path, *INSPECT, f"store={store}", "task.log_dir=elsewhere", "max_retries=0")


def test_endpoint_settings_make_no_score_and_a_store_resumes_across_them(tmp_path):
    store = tmp_path / "chat.sqlite"
    open_store(tmp_path, *CHAT, f"store={store}")
    open_store(
        tmp_path,
        *CHAT,
        f"store={store}",
        "task.score_fn.base_url=http://127.0.0.1:9/v1",
        "task.score_fn.timeout=5",
        "task.score_fn.api_key_env=OTHER_KEY",
        "concurrency=2",
        "budget_usd=9",
    )


def test_another_scoring_function_or_response_matrix_is_refused(tmp_path):
    bench = binary_benchmark(4, 20, seed=0)
    store = tmp_path / "run.sqlite"
    task = matrix_task(bench)
    Evaluator(task, LiveConfig(store=store)).close()
    changed = bench.scores.copy()
    changed[1, 3] = 1 - changed[1, 3]
    task.score_fn = MatrixScorer(changed, arm_names=bench.arm_names)
    with pytest.raises(ValueError, match="scorer.scores_sha256: the response matrix differs from the store's"):
        Evaluator(task, LiveConfig(store=store))

    def grade(arm, batch):
        return bench.scores[arm, batch]

    def other_grade(arm, batch):
        return bench.scores[arm, batch]

    functions = tmp_path / "functions.sqlite"
    Evaluator(LiveTask(range(4), range(20), grade, costs="unit"), LiveConfig(store=functions)).close()
    with pytest.raises(ValueError, match=r"scorer: store has '.*\.grade', given '.*\.other_grade'"):
        Evaluator(LiveTask(range(4), range(20), other_grade, costs="unit"), LiveConfig(store=functions))


def test_a_fork_starts_a_new_store_that_reuses_nothing(tmp_path):
    bench = binary_benchmark(4, 20, seed=0)
    store, fork = tmp_path / "run.sqlite", tmp_path / "fork.sqlite"
    task = matrix_task(bench)
    with Evaluator(task, LiveConfig(store=store, seed=1)) as evaluator:
        request = evaluator.ask()
        evaluator.tell(request, bench.scores[request.arm, request.examples])
    with pytest.raises(ValueError, match="seed: store has 1, given 2"):
        Evaluator(task, LiveConfig(store=store, seed=2))
    with Evaluator(task, LiveConfig(store=store, fork=fork, seed=2)) as forked:
        assert forked.spent == 0 and forked.store.path == fork and forked.store.get_meta("forked_from") == str(store)
        request = forked.ask()
        forked.tell(request, bench.scores[request.arm, request.examples])
    with Evaluator(task, LiveConfig(store=store, fork=fork, seed=2)) as again:  # the same command resumes the fork
        assert again.spent == forked.spent > 0
    with Evaluator(task, LiveConfig(store=store, seed=1)) as original:
        assert original.trace()["step"].size == 1
    with pytest.raises(ValueError, match="is the store it forks: give the fork a path of its own"):
        LiveConfig(store=store, fork=tmp_path / ".." / tmp_path.name / "run.sqlite")  # an existing store too
    # A fork of a store that does not exist (the default store of a new task) is a new store.
    with Evaluator(task, LiveConfig(store=tmp_path / "none.sqlite", fork=tmp_path / "new.sqlite")) as fresh:
        assert fresh.store.get_meta("forked_from") is None and not (tmp_path / "none.sqlite").exists()


def live_policies():
    """Every conf/policy/*.yaml, GittinsEval-EB (prior=empirical), and non-default settings."""
    names = sorted(path.stem for path in (CONFIG_DIR / "policy").glob("*.yaml"))
    cases = [(name, [f"policy={name}"]) for name in names]
    cases += [
        ("gittins-eb", ["policy=gittins", "prior=empirical", "prior.estimator.refit_growth=0.1"]),
        ("gittins-settings", ["policy=gittins", "policy.lam=0.001", "policy.kappa=0.5", "policy.batch_size=3"]),
        (
            "lrf-ensemble",
            [
                "policy=lrf",
                "policy.batch_size=4",
                "policy.ensemble.ensemble_size=6",
                "policy.ensemble.iterations=3",
                "policy.ensemble.pairing=independent",
                "policy.warm_start=true",
            ],
        ),
        ("ucbe-settings", ["policy=ucbe", "policy.a=2.5", "policy.batch_size=2"]),
    ]
    return cases


@pytest.mark.parametrize(("name", "overrides"), live_policies(), ids=[name for name, _ in live_policies()])
def test_from_store_rebuilds_every_live_policy_and_goes_on_as_the_original(tmp_path, name, overrides):
    bench = binary_benchmark(6, 40, seed=3)
    task = matrix_task(bench)
    cfg = compose_live(*overrides)

    def config(store=None):
        return LiveConfig(
            budget_usd=0.5 * bench.n_examples * float(np.sum(task.costs)),
            policy=instantiate(cfg.policy),
            store=store,
            seed=2,
        )

    store = tmp_path / "run.sqlite"
    probe = config().policy
    if probe.live_limitation is not None:
        with pytest.raises(ValueError, match=f"'{probe.name}' cannot run a live evaluation"):
            Evaluator(task, config(store))
        return

    def step(evaluator):
        request = evaluator.ask()
        if request is None:  # the budget is reached
            return None
        evaluator.tell(request, bench.scores[request.arm, request.examples])
        return request.arm, request.examples.tolist()

    reference = Evaluator(task, config())
    with Evaluator(task, config(store)) as first:
        recorded = {"_target_": target_of(first.policy), **first.policy.hyperparameters()}
        before = [step(first) for _ in range(6)]
    assert [step(reference) for _ in range(6)] == before
    reopened = Evaluator.from_store(store)
    rebuilt = {"_target_": target_of(reopened.policy), **reopened.policy.hyperparameters()}
    assert json.loads(json.dumps(rebuilt)) == json.loads(json.dumps(recorded))
    assert [step(reopened) for _ in range(6)] == [step(reference) for _ in range(6)]
    reopened.close()


def test_a_store_made_before_the_baselines_moved_into_the_package_resumes_or_is_refused_as_then(tmp_path):
    """Before the move a store recorded a baseline by its top-level path (`baselines.lrf.LRFPolicy`, its
    ensemble `baselines.lrf.LowRankEnsemble`); a store made now records the same, so the old one resumes
    with the same policy, is rebuilt by `from_store`, and is refused for another policy or setting."""
    bench = binary_benchmark(6, 40, seed=3)
    task = matrix_task(bench)
    budget = 0.5 * bench.n_examples * float(np.sum(task.costs))

    def config(store, iterations=3):
        ensemble = LowRankEnsemble(ensemble_size=6, iterations=iterations)
        return LiveConfig(budget_usd=budget, policy=LRFPolicy(batch_size=4, ensemble=ensemble), store=store, seed=2)

    with Evaluator(task, config(tmp_path / "now.sqlite")) as now:
        settings, names, costs = now.store.load_definition()
        meta = {key: now.store.get_meta(key) for key in ("policy_budget", "forked_from")}
    # The definition the evaluator of the top-level package wrote, with the store's own API.
    before = copy.deepcopy(settings)
    before["policy"]["_target_"] = "baselines.lrf.LRFPolicy"
    before["policy"]["ensemble"]["_target_"] = "baselines.lrf.LowRankEnsemble"
    assert before == settings  # a store made now records what one made then did
    old = tmp_path / "before.sqlite"
    writer = RunStore(old)
    writer.define(before, names, costs, meta=meta)
    writer.close()

    with Evaluator(task, config(old)) as resumed:
        assert resumed.resumed
        request = resumed.ask()
        resumed.tell(request, bench.scores[request.arm, request.examples])
    reopened = Evaluator.from_store(old)
    assert type(reopened.policy) is LRFPolicy and type(reopened.policy.ensemble) is LowRankEnsemble
    assert reopened.policy.get_params() == config(None).policy.get_params() and reopened.trace()["step"].size == 1
    reopened.close()
    with pytest.raises(ValueError, match=r"policy\.ensemble\.iterations: store has 3, given 4"):
        Evaluator(task, config(old, iterations=4))
    refused = "policy: store has 'baselines.lrf.LRFPolicy', given 'gittinseval.core.gittins"
    with pytest.raises(ValueError, match=refused):
        Evaluator(task, replace(config(old), policy=GittinsPolicy(4)))


def test_a_store_made_before_the_scorers_module_was_split_resumes_or_is_refused_as_then(tmp_path):
    """Before `gittinseval.live.tasks.scoring` was split into `matrix` and `chat`, a store recorded a bundled
    scorer as `gittinseval.live.tasks.scoring.MatrixScorer` (`.OpenAIChatScorer`); a store made now records
    the same, so the old one resumes, and another scorer is refused naming the old path."""
    bench = binary_benchmark(4, 24, seed=1)
    task = matrix_task(bench)
    assert type(task.score_fn).__module__ == "gittinseval.live.tasks.matrix"
    with Evaluator(task, LiveConfig(store=tmp_path / "now.sqlite")) as now:
        settings, names, costs = now.store.load_definition()
        meta = {key: now.store.get_meta(key) for key in ("policy_budget", "forked_from")}
    before = copy.deepcopy(settings)
    before["scorer"]["_target_"] = "gittinseval.live.tasks.scoring.MatrixScorer"
    assert before == settings  # a store made now records what one made then did
    old = tmp_path / "before.sqlite"
    writer = RunStore(old)
    writer.define(before, names, costs, meta=meta)
    writer.close()
    with Evaluator(task, LiveConfig(store=old)) as resumed:
        assert resumed.resumed
        request = resumed.ask()
        resumed.tell(request, bench.scores[request.arm, request.examples])
    other = LiveTask(task.arms, task.examples, lambda arm, batch: bench.scores[arm, batch], task.costs)
    with pytest.raises(ValueError, match=r"scorer: store has 'gittinseval\.live\.tasks\.scoring\.MatrixScorer'"):
        Evaluator(other, LiveConfig(store=old))

    chat = tmp_path / "chat.sqlite"
    open_store(tmp_path, *CHAT, f"store={chat}")
    reader = RunStore(chat)
    assert reader.load_definition()[0]["scorer"]["_target_"] == "gittinseval.live.tasks.scoring.OpenAIChatScorer"
    reader.close()


def test_a_refusal_names_a_changed_task_file_and_says_what_to_do_in_one_short_line(tmp_path):
    """An edited task file (even its docstring) is named with the remedy, not as a pair of SHA-256 digests;
    past three differences, the others are counted."""
    examples = CONFIG_DIR.parent / "gittinseval" / "live" / "examples"
    for name in ("inspect_arithmetic.py", "arithmetic.jsonl"):
        (tmp_path / name).write_text((examples / name).read_text())
    task_file = tmp_path / "inspect_arithmetic.py"
    store = tmp_path / "run.sqlite"
    task = [*INSPECT, f"task.task={task_file}@arithmetic", f"store={store}"]
    open_store(tmp_path, *task)
    task_file.write_text(task_file.read_text().replace('"""An inspect_ai task', '"""An edited inspect_ai task', 1))
    with pytest.raises(ValueError, match="was made with other settings") as refused:
        open_store(tmp_path, *task, "seed=3", "policy.lam=0.001", "prior.var=0.01")
    message = str(refused.value)
    assert f"the task file {task_file} changed since the store was made" in message
    assert "even of a docstring" in message
    assert message.endswith("keep it and add fork=NEW_STORE (a new store that reuses nothing of it)")
    assert "policy.lam: store has" in message and "prior_var: store has" in message and "; and 1 more;" in message
    assert "seed:" not in message and not re.search("[0-9a-f]{64}", message)
    assert "\n" not in message and len(message.replace(str(tmp_path), "")) < 400


def test_the_same_arms_in_another_order_are_refused_naming_the_arm_even_at_equal_costs(tmp_path):
    store = tmp_path / "run.sqlite"
    Evaluator(LiveTask(["a", "b", "c"], range(20), costs=[1.0, 1.0, 1.0]), LiveConfig(store=store)).close()
    with pytest.raises(ValueError, match=r"arm 0 \(b\) is the store's arm 1: the same arms in another order"):
        Evaluator(LiveTask(["b", "a", "c"], range(20), costs=[1.0, 1.0, 1.0]), LiveConfig(store=store))
