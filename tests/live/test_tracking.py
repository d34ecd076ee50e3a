"""Live runs log to W&B as they go, a resumed run continues its W&B run, and no API key is written anywhere."""

import json
import subprocess
import sys
import time

import numpy as np
import pytest
from omegaconf import OmegaConf

from gittinseval import GittinsPolicy
from gittinseval.cli.configs import CONFIG_DIR
from gittinseval.live import MatrixScorer, evaluate
from gittinseval.live.fake_server import FakeChatServer
from gittinseval.live.tasks.scoring import read_jsonl
from gittinseval.sim.loggers import WandbLogger
from tests.conftest import binary_benchmark

K, N, B = 8, 24, 4


class RecordedRun:
    """Stands in for a W&B run: keeps what is logged."""

    def __init__(self, **init):
        self.init = init
        self.rows = []
        self.metrics = {}
        self.summary = {}
        self.finished = False

    def define_metric(self, name, step_metric=None):
        self.metrics[name] = step_metric

    def log(self, row):
        self.rows.append(row)

    def finish(self):
        self.finished = True


class RecordingLogger(WandbLogger):
    def __init__(self):
        super().__init__(mode="offline")
        self.runs = []

    def start_run(self, directory, **kwargs):
        self.runs.append(RecordedRun(directory=directory, **kwargs))
        return self.runs[-1]


@pytest.fixture(scope="module")
def bench():
    return binary_benchmark(K, N, seed=6)


def run(bench, store, budget, logger, concurrency=3):
    return evaluate(
        range(K),
        range(N),
        MatrixScorer(bench.scores),
        budget,
        costs=bench.prices,
        policy=GittinsPolicy(B, 1e-3),
        concurrency=concurrency,
        store=store,
        progress=False,
        logger=logger,
        log_config={"budget": budget},
    )


def test_each_tell_is_logged_against_spend_and_a_resumed_run_continues_the_w_and_b_run(bench, tmp_path):
    store, logger = tmp_path / "run.sqlite", RecordingLogger()
    budget = 0.3 * N * bench.prices.sum()
    first = run(bench, store, budget / 2, logger)
    second = run(bench, store, budget, logger)
    opened, resumed = logger.runs
    assert opened.init["id"] == resumed.init["id"] and opened.init["resume"] == resumed.init["resume"] == "allow"
    assert opened.init["directory"] == tmp_path and opened.init["config"] == {"budget": budget / 2}
    assert opened.metrics["spent"] is None and opened.metrics["recommended_lcb"] == "spent"
    assert opened.finished and resumed.finished
    rows = opened.rows + resumed.rows
    # One row per tell, in tell order, continuing across the sessions.
    assert [row["n_requests"] for row in rows] == list(range(1, len(second.trace["step"]) + 1))
    np.testing.assert_allclose([row["spent"] for row in rows], second.trace["cost"])
    assert [row["recommended"] for row in rows] == second.trace["recommended"].tolist()
    assert [row["stop_signal"] for row in rows] == second.trace["stop_signal"].astype(int).tolist()
    assert max(row["in_flight"] for row in rows) == 2  # the other requests still in flight at a tell
    last = rows[-1]
    assert last["recommended_lcb"] == pytest.approx(second.recommendation.lcb)
    assert resumed.summary["spent"] == second.spent and opened.summary["spent"] == first.spent


def test_a_real_offline_w_and_b_run_is_resumed_by_id(bench, tmp_path):
    store, logger = tmp_path / "run.sqlite", WandbLogger(mode="offline")
    budget = 0.2 * N * bench.prices.sum()
    run(bench, store, budget / 2, logger)
    time.sleep(1.1)  # W&B names offline run directories by the second they start
    run(bench, store, budget, logger)
    runs = sorted((tmp_path / "wandb").glob("offline-run-*"))
    assert len(runs) == 2 and len({path.name.rsplit("-", 1)[1] for path in runs}) == 1


def test_the_api_key_is_written_nowhere(tmp_path, monkeypatch):
    """A key set in the environment reaches the server and nothing else: not the store, logs or W&B files."""
    secret = "sk-live-test-9f8e7d6c5b4a39281706"
    examples = read_jsonl()
    prices = OmegaConf.to_container(OmegaConf.load(CONFIG_DIR / "task" / "openai_chat.yaml").score_fn.prices)
    fake = FakeChatServer({e["prompt"]: e["answer"] for e in examples}, good_model="gpt-4o", prices=prices)
    monkeypatch.setenv("OPENAI_API_KEY", secret)
    try:
        command = [
            sys.executable,
            "-m",
            "gittinseval.cli.live",
            "task=openai_chat",
            f"task.score_fn.base_url={fake.base_url}",
            "budget_usd=0.001",
            "logger=wandb",
            f"store={tmp_path / 'chat.sqlite'}",
            f"hydra.run.dir={tmp_path / 'run'}",
        ]
        finished = subprocess.run(command, timeout=180, capture_output=True, text=True)
    finally:
        fake.close()
    assert finished.returncode == 0, finished.stderr
    assert fake.calls and all(auth == f"Bearer {secret}" for _, auth, _ in fake.calls)
    files = [path for path in tmp_path.rglob("*") if path.is_file()]
    assert any(".wandb" in path.name for path in files) and any(path.suffix == ".sqlite" for path in files)
    # Hydra names the job log after the app's module, gittinseval/cli/live.py.
    assert any(path.name == "live.log" for path in files)
    leaks = [str(path) for path in files if secret.encode() in path.read_bytes()]
    assert not leaks
    assert secret not in finished.stdout + finished.stderr
    assert json.loads((tmp_path / "run" / "summary.json").read_text())["recommended"] is not None


def test_the_certificate_is_logged_at_most_once_a_second_and_the_summary_carries_the_final_one(bench, tmp_path):
    logger = RecordingLogger()
    result = run(bench, tmp_path / "run.sqlite", 0.3 * N * bench.prices.sum(), logger)
    (recorded,) = logger.runs
    assert recorded.metrics["prob_eps_best"] == "spent" and recorded.metrics["interval_upper"] == "spent"
    rows = recorded.rows
    # The run takes well under a second: every row shows the first tell's certificate, computed once.
    first = {key: rows[0][key] for key in ("prob_best", "prob_eps_best", "interval_lower", "interval_upper")}
    assert all({key: row[key] for key in first} == first for row in rows)
    final = result.certificate
    assert recorded.summary["certificate"] == final.as_dict() != {}
    assert first != {"prob_best": final.prob_best, "prob_eps_best": final.prob_eps_best,
                     "interval_lower": final.lower, "interval_upper": final.upper}
