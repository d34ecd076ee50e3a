"""What a live run reports of itself: the arms' table in status.txt and the grading's warnings, logged once."""

import copy
import json
import logging
import sqlite3

import numpy as np
import pytest

from gittinseval.core.posterior import FiniteBenchmarkPosterior
from gittinseval.live.status import COST_LEGEND, LEGEND, VALUE_LEGEND, ArmStatus, GradingWarnings, status_text


def test_status_txt_is_the_ledger_line_the_warnings_and_the_arms_by_lcb():
    posterior = FiniteBenchmarkPosterior(3, 40, 0.5, 0.04, 0.25)
    posterior.update(0, np.array([1.0, 0.0]))
    posterior.update(2, np.array([1.0, 1.0, 1.0]))
    status = ArmStatus.of(posterior, ("zero", "one", "two"), [1], kappa=1.0)
    lines = status_text("spent $1 of a budget of $2", ["check the grading"], status).splitlines()
    assert lines[:3] == ["spent $1 of a budget of $2", "WARNING: check the grading", ""]
    assert [line.split()[1] for line in lines[4:7]] == ["two", "zero", "one"]
    assert lines[6].endswith("  *") and np.isnan(status.sample_mean[1])  # arm 1: in flight, nothing told
    assert lines[7:] == ["", LEGEND] and "*: a request in flight" in LEGEND


def test_cells_kept_from_a_failed_call_are_seen_before_their_request_is_told():
    """The table's seen and mean count the scores a failed call kept; M, sd(V) and lcb wait for the tell."""
    posterior = FiniteBenchmarkPosterior(2, 40, 0.5, 0.04, 0.25)
    posterior.update(0, np.array([1.0, 0.0]))
    status = ArmStatus.of(posterior, ("told", "kept"), [1], kappa=1.0, kept={1: [1.0, 1.0, 0.0]})
    assert status.n_scored.tolist() == [2, 3] and status.scored_mean.tolist() == [0.5, pytest.approx(2 / 3)]
    assert status.n_seen.tolist() == [2, 0] and status.mean[1] == 0.5  # the posterior has not seen them
    kept_row = next(line for line in status.format().splitlines() if line.split()[1] == "kept")
    assert kept_row.split()[2:4] == ["3", "0.667"]


def test_an_arm_whose_scores_are_all_the_same_is_logged_once(caplog):
    posterior = FiniteBenchmarkPosterior(2, 40, 0.5, 0.04, 0.25)
    posterior.update(0, np.zeros(20))
    posterior.update(1, np.r_[np.ones(10), np.zeros(10)])
    grading = GradingWarnings()
    with caplog.at_level(logging.WARNING, logger="gittinseval.live.status"):
        for _ in range(2):
            warnings = grading.update(posterior, ["a", "b"])
    assert warnings == ["1 arm (0) scored 0 on every one of 20 or more examples: check the grading against the replies"]
    assert [record.getMessage() for record in caplog.records] == [
        "arm 0 (a) scored 0 on each of its 20 examples so far: check the grading against the replies"
    ]


def test_the_table_shows_each_arm_s_interval_and_p_best_from_the_certificate():
    from gittinseval.core.certificate import certify, posterior_from_statistics
    from gittinseval.live.status import LEGEND, ArmStatus

    posterior = posterior_from_statistics([9.0, 3.0], [10, 10], 20, 0.5, 0.04)
    certificate = certify(posterior, 0)
    table = ArmStatus.of(posterior, ("a", "b"), [], 1.0, certificate=certificate).format().splitlines()
    assert table[0].split()[-3:] == ["lo", "hi", "P(best)"]
    assert table[1].split()[-3:] == [f"{certificate.arm_lower[0]:.3f}", f"{certificate.arm_upper[0]:.3f}",
                                     f"{certificate.arm_prob_best[0]:.3f}"]
    assert "P(best): the posterior probability that the arm is the best" in LEGEND
    without = ArmStatus.of(posterior, ("a", "b"), [], 1.0)
    assert np.isnan(without.prob_best).all()
def test_with_learned_costs_status_txt_shows_each_arms_guessed_and_learned_dollars():
    posterior = FiniteBenchmarkPosterior(2, 40, 0.5, 0.04, 0.25)
    posterior.update(1, np.array([1.0, 1.0]))
    costs = (np.array([3.1e-5, 3.1e-5]), np.array([3.1e-5, 2.76e-4]))
    status = ArmStatus.of(posterior, ("terse", "verbose"), [], kappa=1.0, costs=costs)
    lines = status_text("spent $1", [], status).splitlines()
    assert lines[2].split()[-2:] == ["guess", "learned"]
    row = lines[3].split()
    assert row[1:3] == ["verbose", "2"] and row[-2:] == ["3.1e-05", "0.000276"]
    assert lines[-2:] == [LEGEND, COST_LEGEND]
    assert "guess" not in status_text("spent $1", [], ArmStatus.of(posterior, ("terse", "verbose"), [], 1.0))


def test_under_value_the_table_ranks_by_the_values_lcb_beside_the_accuracy():
    posterior = FiniteBenchmarkPosterior(2, 40, 0.5, 0.04, 0.25)
    posterior.update(0, np.array([1.0, 1.0, 1.0, 0.0]))
    posterior.update(1, np.array([1.0, 0.0, 1.0, 0.0]))
    offsets = np.array([-0.3, -0.05])
    status = ArmStatus.of(posterior, ("dear", "cheap"), [], kappa=1.0, value_offsets=offsets)
    np.testing.assert_allclose(status.value, posterior.mean + offsets)
    np.testing.assert_allclose(status.value_lcb, posterior.mean + offsets - np.sqrt(posterior.variance))
    text = status_text("spent $1", [], status).splitlines()
    assert text[2].split()[5:9] == ["sd(V)", "lcb", "value", "v.lcb"]
    assert [line.split()[1] for line in text[3:5]] == ["cheap", "dear"]  # dear has the better accuracy lcb
    assert text[3].split()[7:9] == [f"{status.value[1]:.3f}", f"{status.value_lcb[1]:.3f}"]
    assert text[-1] == VALUE_LEGEND and "lo, hi and P(best) are of the value" in VALUE_LEGEND
    assert ArmStatus.of(posterior, ("dear", "cheap"), [], kappa=1.0).value is None


COMPLETION = {"gpt-4o": 9, "gpt-4o-mini": 3}


def test_a_live_run_under_value_shows_and_certifies_the_value_it_recommends_by(tmp_path, caplog, capsys):
    """On the GSM8K-style task against the fake server (gpt-4o right, gpt-4o-mini always wrong), a mu at which
    gpt-4o's price outweighs its accuracy: the run recommends the value-best arm, summary.json's certificate is
    certify() of the value's posterior built here from the store's cells, and the status shows the value."""
    from hydra.utils import instantiate

    from gittinseval.core.certificate import CertificateSettings, certify, posterior_from_statistics
    from gittinseval.live.app import run_live
    from gittinseval.live.fake_server import FakeChatServer
    from gittinseval.live.tasks.scoring import read_jsonl
    from tests.cli.test_live import compose_live

    examples = read_jsonl(bundled="gsm8k_style.jsonl")
    server = FakeChatServer({e["question"]: e["answer"] for e in examples}, good_model="gpt-4o",
                            reply="Step by step, the result is {answer}.", completion_tokens=COMPLETION)
    overrides = ["task=gsm8k_chat", f"task.score_fn.base_url={server.base_url}", "task.score_fn.api_key_env=null",
                 "budget_usd=0.0003",
                 "policy.batch_size=2", "concurrency=1", "progress=true", "logger=none",
                 f"store={tmp_path / 'run.sqlite'}"]
    prices = np.asarray(instantiate(compose_live(*overrides).task).costs)  # deployment prices: dollars per request
    mu = 1.5 / (prices.max() - prices.min())  # gpt-4o, right on every question, is 0.5 below the minis in value
    try:
        with caplog.at_level(logging.INFO, logger="gittinseval.live.app"):
            result = run_live(compose_live(*overrides, "objective.name=value", f"objective.mu={mu}"), tmp_path / "run")
    finally:
        server.close()
    summary = json.loads((tmp_path / "run" / "summary.json").read_text())
    with sqlite3.connect(tmp_path / "run.sqlite") as db:
        cells = db.execute("SELECT arm, score FROM cells").fetchall()
    sums, counts = np.zeros(3), np.zeros(3, dtype=np.int64)
    for arm, score in cells:
        sums[arm] += score
        counts[arm] += 1
    assert counts.min() > 0 and counts.sum() < 3 * len(examples)  # a run the budget cut short
    accuracy = posterior_from_statistics(sums, counts, len(examples), 0.5, 0.04)
    value = copy.copy(accuracy)  # the value's posterior: N(M - mu p, V), its score range shifted with it
    value.mean = accuracy.mean - mu * prices
    value.score_sum = accuracy.score_sum - len(examples) * mu * prices
    value_lcb = value.mean - np.sqrt(accuracy.variance)
    arm = int(np.argmax(value_lcb))
    assert summary["recommended"] == arm != int(np.argmax(accuracy.mean - np.sqrt(accuracy.variance)))
    defaults = CertificateSettings()
    expected = certify(value, arm, level=defaults.level, eps=defaults.eps, n_samples=defaults.samples)
    # Live, the anytime statement comes beside the posterior certificate, about the same arm's value.
    certificate = dict(summary["certificate"])
    anytime = certificate.pop("anytime")
    assert certificate == expected.as_dict()
    n = len(examples)
    sure = (value.score_sum[arm] / n, (value.score_sum[arm] + n - counts[arm]) / n)  # whatever the unseen scores
    assert anytime["arm"] == arm and sure[0] - 1e-12 <= anytime["lower"] <= anytime["upper"] <= sure[1] + 1e-12
    # Every arm's interval and P(best) in the table are of its value, the unfinished gpt-4o arm's too.
    assert counts[2] < len(examples) and expected.arm_upper[2] < 0
    for column in ("lower", "upper", "prob_best"):
        np.testing.assert_array_equal(getattr(result.status, column), getattr(expected, f"arm_{column}"))
    assert summary["recommended_value"] == pytest.approx(value.mean[arm], rel=1e-12)
    assert summary["recommended_value_lcb"] == pytest.approx(value_lcb[arm], rel=1e-12)
    assert summary["recommended_mean"] == pytest.approx(accuracy.mean[arm], rel=1e-12)
    np.testing.assert_allclose(result.status.value_lcb, value_lcb, rtol=1e-12)
    table = (tmp_path / "run" / "status.txt").read_text().splitlines()
    assert table[2].split()[7:9] == ["value", "v.lcb"] and table[3].split()[1] == result.recommendation.label
    assert VALUE_LEGEND in table
    assert f"value={value.mean[arm]:.3f}, value LCB={value_lcb[arm]:.3f}" in caplog.text
    progress = capsys.readouterr().err.splitlines()[-1]
    label, m = result.recommendation.label, accuracy.mean[arm]
    assert f"best {label} M={m:.3f} value={value.mean[arm]:.3f} value LCB={value_lcb[arm]:.3f} P(within" in progress
