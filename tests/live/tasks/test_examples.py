"""The conf/task examples for numeric answers (LastNumber) and multiple choice (ChoiceLetter), run end to end
against the local fake chat endpoint."""

import json
import math
import shlex
import sqlite3
import subprocess

import pytest
from hydra import compose, initialize_config_dir
from hydra.utils import instantiate

from gittinseval.cli.configs import CONFIG_DIR
from gittinseval.cli.live import LIVE_CONFIG_NAME
from gittinseval.live.app import dry_run, run_live
from gittinseval.live.fake_server import FakeChatServer
from gittinseval.live.tasks import inspect_task as inspect_adapter
from gittinseval.live.tasks.inspect_loader import load_inspect_task
from gittinseval.live.tasks.prices import load_prices
from gittinseval.live.tasks.prompts import PromptTemplate
from tests.conftest import ROOT, page_block
from tests.live.tasks.test_mockllm import right_by_the_documented_rule
from tests.test_docs import app_overrides

TASK_PAGE = "docs/adding_a_live_task.md"
"""The task page, of the inspect examples (the offline run's certificate line is read on docs/live.md)."""


def compose_live(*overrides):
    with initialize_config_dir(config_dir=str(CONFIG_DIR), version_base="1.3"):
        return compose(config_name=LIVE_CONFIG_NAME, overrides=["logger=none", "progress=false", *overrides])


@pytest.mark.parametrize(
    ("task", "reply", "best"),
    [
        # Replies that reason first and end on the number; the other models reply "0".
        ("gsm8k_chat", "Working it out step by step, the result is {answer}.", "4o-steps"),
        # "A good answer is ..." before the marker must not count: only the letter after ANSWER: does.
        ("multiple_choice", "A good answer is not obvious. ANSWER: {answer}", "gpt-4o nosys"),
    ],
)
def test_the_task_example_runs_and_finds_the_arm_that_answers(tmp_path, task, reply, best):
    cfg = compose_live(f"task={task}", f"store={tmp_path / 'run.sqlite'}", "budget_usd=1.0")
    template = PromptTemplate(cfg.task.score_fn.prompt)
    examples = instantiate(cfg.task.examples)
    assert len(examples) == 12
    server = FakeChatServer({template.render(e): e["answer"] for e in examples}, good_model="gpt-4o", reply=reply)
    try:
        cfg.task.score_fn.base_url = server.base_url
        cfg.task.score_fn.api_key_env = None  # the fake server needs no key
        result = run_live(cfg, tmp_path / "run")
    finally:
        server.close()
    summary = json.loads((tmp_path / "run" / "summary.json").read_text())
    assert result.stop_reason != "error" and summary["recommended_label"] == best
    assert result.recommendation.mean > 0.9
    assert server.received > 0 and best in (tmp_path / "run" / "status.txt").read_text()


def no_model(*args, **kwargs):
    raise AssertionError("a model was built")


def test_the_inspect_task_config_builds_the_bundled_task_and_its_dry_run_needs_no_key(monkeypatch):
    """conf/task/inspect.yaml: the bundled inspect task's 20 samples, the named arms, costs from the token
    estimates at the bundled prices file's prices; its dry run builds no model, so needs no API key."""
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    monkeypatch.setattr(inspect_adapter, "get_model", no_model)
    cfg = compose_live("task=inspect", "budget_usd=0.002")
    task = instantiate(cfg.task)
    assert len(task.examples) == 20 and task.binary and task.name == "arithmetic"
    assert task.score_fn.max_retries == cfg.max_retries == 3  # the top-level setting is inspect's
    # 40 input and 8 output tokens at USD 0.15 / 0.60 (gpt-4o-mini) and 2.50 / 10.00 (gpt-4o) per 1M tokens.
    mini, big = (40 * 0.15 + 8 * 0.60) / 1e6, (40 * 2.50 + 8 * 10.00) / 1e6
    assert task.costs == pytest.approx([mini, mini, big], rel=1e-12)
    report = dry_run(cfg).splitlines()
    assert report[0] == "dry run of task 'arithmetic': no call is made"
    assert [line.split()[1] for line in report[4:7]] == ["mini-terse", "mini-free", "4o-terse"]
    assert f"exhaustive cost (every arm on every example): ${20 * (2 * mini + big):.4g}" in report


def documented_inspect_commands():
    """The overrides of the two gittinseval-live commands of the offline inspect example of the task page."""
    block = page_block(TASK_PAGE, ".venv/bin/gittinseval-live task=inspect_offline")
    lines = block.replace("\\\n", " ").splitlines()
    return [shlex.split(line)[1:] for line in lines if line.startswith(".venv/bin/gittinseval-live")]


def compose_as_given(overrides):
    with initialize_config_dir(config_dir=str(CONFIG_DIR), version_base="1.3"):
        return compose(config_name=LIVE_CONFIG_NAME, overrides=overrides)


def right_answers(accuracy):
    """Which of the 20 questions a scripted arm answers right, counted here from its stated rule."""
    return [math.floor((i + 1) * accuracy) > math.floor(i * accuracy) for i in range(20)]


def test_the_documented_inspect_example_runs_offline_and_finds_the_best_arm(tmp_path, monkeypatch):
    """The commands of the task page as written (the store and run folder moved to tmp_path): the dry run builds no
    model; the run recommends the arm whose scripted replies are best; each call is charged its samples'
    scripted usage at the prices file's prices, and each score is the scripted reply's."""
    dry, run = documented_inspect_commands()
    assert "dry_run=true" in dry and "progress=false" not in run
    with monkeypatch.context() as patched:
        patched.setattr(inspect_adapter, "get_model", no_model)
        report = dry_run(compose_as_given(dry))
    assert "small-terse" in report and "large-terse" in report
    overrides = [o for o in run if not o.startswith(("store=", "hydra."))]
    cfg = compose_as_given(
        [*overrides, f"store={tmp_path / 'run.sqlite'}", f"task.log_dir={tmp_path / 'logs'}", "progress=false"]
    )
    result = run_live(cfg, tmp_path / "run")
    summary = json.loads((tmp_path / "run" / "summary.json").read_text())
    assert result.stop_reason == "budget" and summary["recommended_label"] == "large-terse"
    assert result.charged_as_expected == 0
    # The documented status table and certificate line are this run's (the replies and the policy are deterministic).
    table = page_block(TASK_PAGE, "   arm  name           seen    mean       M   sd(V)     lcb      lo")
    status = (tmp_path / "run" / "status.txt").read_text().splitlines()
    assert all(line in status for line in table.splitlines())
    line = f"certificate of large-terse: {result.certificate.format()}"
    assert page_block("docs/live.md", "certificate of large-terse") == line + "\n"
    assert summary["certificate"] == result.certificate.as_dict() and summary["certificate"]["arm"] == 2
    prices = load_prices(cfg.task.prices)
    scripted = [arm.model_args.custom_outputs for arm in cfg.task.arms]
    per_example = [
        (s.input_tokens * prices[arm.model].input + s.output_tokens * prices[arm.model].output) / 1e6
        for s, arm in zip(scripted, cfg.task.arms, strict=True)
    ]
    with sqlite3.connect(tmp_path / "run.sqlite") as db:
        calls = db.execute(
            "SELECT requests.arm, attempts.examples, attempts.charged FROM attempts "
            "JOIN requests ON attempts.request = requests.id WHERE attempts.outcome = 'scored'"
        ).fetchall()
        cells = db.execute("SELECT arm, example, score FROM cells").fetchall()
    assert {arm for arm, *_ in calls} == {0, 1, 2}
    for arm, examples, charged in calls:
        assert charged == pytest.approx(len(json.loads(examples)) * per_example[arm], rel=1e-12)
    assert result.spent == pytest.approx(sum(charged for *_, charged in calls), rel=1e-12)
    for arm, example, score in cells:
        assert score == float(right_answers(scripted[arm].accuracy)[example])


def documented_quiz_commands(folder):
    """The scripted-replies example of the task page: its files written to ``folder`` by the page's own block (the
    bundled prices file reached by its relative path, as from the repository's folder), and the overrides of its
    two gittinseval-live commands, ``--config-dir`` given as Hydra's search path."""
    subprocess.run(["bash", "-c", page_block(TASK_PAGE, "mkdir -p my_quiz/conf/task")], cwd=folder, check=True)
    (folder / "gittinseval").symlink_to(ROOT / "gittinseval")
    block = page_block(TASK_PAGE, ".venv/bin/gittinseval-live --config-dir my_quiz/conf task=quiz")
    lines = block.replace("\\\n", " ").splitlines()
    commands = [shlex.split(line) for line in lines if line.startswith(".venv/bin/gittinseval-live")]
    return [app_overrides("gittinseval-live", tuple(words[1:]), folder)[0] for words in commands]


def test_the_documented_scripted_replies_of_your_own_task_run_offline_as_scripted(tmp_path, monkeypatch):
    """The task file, task config and commands of the task page as written: the dry run builds no model and expects
    the documented costs; the run recommends the documented arm; each call is charged its samples' scripted usage
    (cache tokens at the cache price) and each score is the scripted reply's, drawn or listed."""
    monkeypatch.chdir(tmp_path)
    dry, run = documented_quiz_commands(tmp_path)
    with monkeypatch.context() as patched:
        patched.setattr(inspect_adapter, "get_model", no_model)
        report = dry_run(compose_as_given(dry))
    assert "exhaustive cost (every arm on every example): $0.001814" in report
    assert [line.split()[1:3] for line in report.splitlines()[4:7]] == [
        ["small-drawn", "8.1e-06"], ["small-listed", "8.1e-06"], ["large-cached", "0.000135"]
    ]
    cfg = compose_as_given([*(o for o in run if not o.startswith("hydra.run.")), "progress=false"])
    result = run_live(cfg, tmp_path / "my_quiz" / "run")
    summary = json.loads((tmp_path / "my_quiz" / "run" / "summary.json").read_text())
    assert result.stop_reason == "budget" and summary["recommended_label"] == "large-cached"
    assert result.charged_as_expected == 0
    # The documented spend and status table (the replies and the policy are deterministic).
    page = " ".join((ROOT / TASK_PAGE).read_text().split())
    assert f"The run spent ${result.spent:.5g} on {len(result.trace['step'])} calls, each charged" in page
    header = (
        "   arm  name            seen    mean       M   sd(V)     lcb      lo      hi  P(best)      guess    learned\n"
    )
    table = page_block(TASK_PAGE, header + "     2  large-cached")
    status = (tmp_path / "my_quiz" / "run" / "status.txt").read_text().splitlines()
    assert all(line in status for line in table.splitlines())
    prices = load_prices(cfg.task.prices)
    scripts = [arm.model_args.custom_outputs for arm in cfg.task.arms]
    per_example = [
        (
            s.input_tokens * prices[arm.model].input
            + s.output_tokens * prices[arm.model].output
            + s.get("input_tokens_cache_read", 0) * prices[arm.model].input_cache_read
        ) / 1e6
        for s, arm in zip(scripts, cfg.task.arms, strict=True)
    ]
    samples = list(load_inspect_task(cfg.task.task).dataset)
    with sqlite3.connect(tmp_path / "my_quiz" / "run.sqlite") as db:
        calls = db.execute(
            "SELECT requests.arm, attempts.examples, attempts.charged FROM attempts "
            "JOIN requests ON attempts.request = requests.id WHERE attempts.outcome = 'scored'"
        ).fetchall()
        cells = db.execute("SELECT arm, example, score FROM cells").fetchall()
    assert {arm for arm, *_ in calls} == {0, 1, 2}
    for arm, examples, charged in calls:
        assert charged == pytest.approx(len(json.loads(examples)) * per_example[arm], rel=1e-12)
    assert result.spent == pytest.approx(sum(charged for *_, charged in calls), rel=1e-12)
    for arm, example, score in cells:
        sample, script = samples[example], scripts[arm]
        if "replies" in script:
            right = script.replies[sample.id] == sample.target
        else:
            right = right_by_the_documented_rule(script.accuracy, script.get("seed", 0), sample.id)
        assert score == float(right), (cfg.task.arms[arm].name, sample.id)
