"""The conf/task examples for numeric answers (LastNumber) and multiple choice (ChoiceLetter), run end to end
against the local fake chat endpoint."""

import json

import pytest
from fake_chat import FakeChatServer
from hydra import compose, initialize_config_dir
from hydra.utils import instantiate

from gittinseval.cli import CONFIG_DIR
from gittinseval.live.app import dry_run, run_live
from gittinseval.live.prompts import PromptTemplate
from gittinseval.live_cli import LIVE_CONFIG_NAME


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
        result = run_live(cfg, tmp_path / "run")
    finally:
        server.close()
    summary = json.loads((tmp_path / "run" / "summary.json").read_text())
    assert result.stop_reason != "error" and summary["recommended_label"] == best
    assert result.recommendation.mean > 0.9
    assert server.received > 0 and best in (tmp_path / "run" / "status.txt").read_text()


def test_the_inspect_task_config_builds_the_bundled_task_and_its_dry_run(monkeypatch):
    """conf/task/inspect.yaml: the bundled inspect task's 20 samples, the named arms, costs from the token
    estimates at the bundled prices file's prices; its dry run makes no call."""
    pytest.importorskip("inspect_ai")
    monkeypatch.setenv("OPENAI_API_KEY", "sk-dry-run")  # inspect builds the models at once; nothing is sent
    cfg = compose_live("task=inspect", "budget_usd=0.002")
    task = instantiate(cfg.task)
    assert len(task.examples) == 20 and task.binary and task.name == "arithmetic"
    # 40 input and 8 output tokens at USD 0.15 / 0.60 (gpt-4o-mini) and 2.50 / 10.00 (gpt-4o) per 1M tokens.
    mini, big = (40 * 0.15 + 8 * 0.60) / 1e6, (40 * 2.50 + 8 * 10.00) / 1e6
    assert task.costs == pytest.approx([mini, mini, big], rel=1e-12)
    report = dry_run(cfg).splitlines()
    assert report[0] == "dry run of task 'arithmetic': no call is made"
    assert [line.split()[1] for line in report[4:7]] == ["mini-terse", "mini-free", "4o-terse"]
    assert f"exhaustive cost (every arm on every example): ${20 * (2 * mini + big):.4g}" in report
