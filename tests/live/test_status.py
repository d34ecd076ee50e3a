"""What a live run reports of itself: the arms' table in status.txt and the grading's warnings, logged once."""

import logging

import numpy as np
import pytest

from gittinseval.core.posterior import FiniteBenchmarkPosterior
from gittinseval.live.status import COST_LEGEND, LEGEND, ArmStatus, GradingWarnings, status_text


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
