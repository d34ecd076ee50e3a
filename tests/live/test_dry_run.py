"""dry_run_report: the cost of a live run before any call."""

import re

import pytest

from gittinseval.live import OpenAIChatScorer, chat_task
from gittinseval.live.dry_run import dry_run_report
from gittinseval.live.task import LiveTask

ARMS = [
    {"model": "openai/gpt-4o-mini", "temperature": 0, "system": "Answer with a number."},
    {"model": "openai/gpt-4o-mini", "temperature": 0, "system": "Think step by step."},
    {"model": "openai/gpt-4o", "temperature": 0, "system": "Think step by step."},
]


class CountingScorer:
    """A score_fn that counts its calls: a dry run must make none."""

    def __init__(self):
        self.calls = 0

    def __call__(self, arm, batch):
        self.calls += 1
        return [1.0] * len(batch), 0.0


def make_task(costs=(1e-5, 2e-5, 7e-5), n_examples=20):
    examples = [{"prompt": f"q{i}", "answer": str(i)} for i in range(n_examples)]
    return LiveTask(arms=ARMS, examples=examples, score_fn=CountingScorer(), costs=costs, name="numbers")


def test_report_figures_against_a_hand_computation():
    task = make_task()
    report = dry_run_report(task, budget_usd=5e-4, batch_size=8)
    # Per round of one example per arm: 1e-5 + 2e-5 + 7e-5 = 1e-4 dollars; 20 rounds.
    assert "3 arms, 20 examples, batches of 8, budget $0.0005" in report
    assert "exhaustive cost (every arm on every example): $0.002" in report
    assert "budget: $0.0005 = 25% of the exhaustive cost" in report  # 5e-4 / 2e-3
    assert "about 5 of the 20 examples per arm" in report  # 5e-4 / 1e-4
    # One batch of every arm: 8 * 1e-4 = 8e-4 > 5e-4.
    assert "WARNING: the budget $0.0005 cannot cover one batch of every arm (8 examples each: $0.0008)" in report
    rows = {
        m.group(1): (float(m.group(2)), float(m.group(3)))
        for m in re.finditer(r"^\s+\d+\s+(.+?)\s{2,}(\S+)\s+(\S+)$", report, re.MULTILINE)
    }
    assert rows == {
        "gpt-4o-mini sys1": (1e-5, 2e-4),
        "gpt-4o-mini sys2": (2e-5, 4e-4),
        "gpt-4o sys2": (7e-5, pytest.approx(1.4e-3)),
    }
    assert task.score_fn.calls == 0


def test_no_warning_when_one_batch_of_every_arm_fits():
    report = dry_run_report(make_task(), budget_usd=0.01, batch_size=8)
    assert "WARNING" not in report
    assert "budget: $0.01 = 500% of the exhaustive cost" in report
    assert "about 20 of the 20 examples per arm (the budget covers every example)" in report
    # A batch larger than the dataset is the dataset: 20 * 1e-4 = 2e-3 <= 2e-3.
    assert "WARNING" not in dry_run_report(make_task(), budget_usd=2e-3, batch_size=64)
    assert "WARNING" in dry_run_report(make_task(), budget_usd=1.9e-3, batch_size=64)


def test_labels_and_a_task_without_expected_costs():
    report = dry_run_report(make_task(costs=None), budget_usd=1.0, batch_size=4, labels=["a", "b", "c"])
    assert "no estimate" in report and "exhaustive" not in report
    assert [line.split()[-1] for line in report.splitlines() if re.match(r"^\s+\d+\s", line)] == ["a", "b", "c"]


def test_bad_input():
    with pytest.raises(ValueError, match="budget must be positive"):
        dry_run_report(make_task(), budget_usd=0, batch_size=8)
    with pytest.raises(ValueError, match="batch_size must be a positive integer"):
        dry_run_report(make_task(), budget_usd=1, batch_size=0)
    with pytest.raises(ValueError, match="expected cost of arm 1 must be non-negative"):
        dry_run_report(make_task(costs=(1e-5, float("nan"), 1e-5)), budget_usd=1, batch_size=8)
    with pytest.raises(ValueError, match="2 labels for 3 arms"):
        dry_run_report(make_task(), budget_usd=1, batch_size=8, labels=["a", "b"])


def test_the_arms_column_is_called_name_as_in_the_status_table():
    for costs in (None, (1e-5, 2e-5, 7e-5)):
        headers = [
            line.split()
            for line in dry_run_report(make_task(costs=costs), 1.0, 4).splitlines()
            if line.strip().startswith("arm ")
        ]
        assert len(headers) == 1 and headers[0][:2] == ["arm", "name"]


class ModeScorer(CountingScorer):
    def __init__(self, mode):
        super().__init__()
        self.mode = mode


def by_mode_lines(report):
    return report.split("estimates by mode (task.score_fn.mode):\n")[1].splitlines()[:2]


def test_the_run_mode_is_marked_by_its_mode_even_at_equal_prices_and_a_mode_without_estimate_says_why():
    costs = [1e-5, 2e-5, 7e-5]
    task = make_task(costs)
    for mode in ("chat", "batch"):
        equal = LiveTask(task.arms, task.examples, ModeScorer(mode), costs, costs_by_mode={"chat": costs,
                                                                                           "batch": costs})
        marked = [line.split(":")[0].strip() for line in by_mode_lines(dry_run_report(equal, 1.0, 4))]
        assert marked == [f"{m} (this run)" if m == mode else m for m in ("chat", "batch")]
    why = "model 'openai/gpt-4o' has no batch price: give it batch_input and batch_output"
    unpriced = LiveTask(task.arms, task.examples, ModeScorer("chat"), costs, costs_by_mode={"chat": costs,
                                                                                            "batch": why})
    assert by_mode_lines(dry_run_report(unpriced, 1.0, 4))[1] == f"  batch: no estimate ({why})"


def test_a_chat_task_in_chat_mode_names_the_model_without_a_batch_price():
    prices = {"openai/gpt-4o-mini": {"input": 0.15, "output": 0.6, "batch_input": 0.075, "batch_output": 0.3},
              "openai/gpt-4o": {"input": 2.5, "output": 10.0}}
    scorer = OpenAIChatScorer("http://127.0.0.1:1/v1", prices, api_key_env=None)
    task = chat_task(ARMS, make_task().examples, scorer)
    batch = by_mode_lines(dry_run_report(task, 1.0, 4))[1]
    assert batch.startswith("  batch: no estimate (prices: model 'openai/gpt-4o' has no batch price: give it")
