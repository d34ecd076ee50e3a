"""Honest failures: no scores, no costs, two writers, a failed write, resume after out-of-order tells."""

import json
import sqlite3
import subprocess
import sys
import textwrap

import numpy as np
import pytest

from gittinseval import GittinsPolicy
from gittinseval.baselines.lrf import LowRankEnsemble, LRFPolicy
from gittinseval.baselines.pbgi import PBGIPolicy
from gittinseval.baselines.prompteval import PromptEvalPolicy
from gittinseval.baselines.ucbe import UCBEPolicy
from gittinseval.baselines.uniform import UniformPolicy
from gittinseval.live import Evaluator, LiveConfig, LiveTask, MatrixScorer, StoreLockedError, evaluate
from tests.conftest import binary_benchmark

K, N, B = 10, 32, 4


@pytest.fixture(scope="module")
def bench():
    return binary_benchmark(K, N, seed=4)


def task_of(bench):
    return LiveTask(range(K), range(N), costs=bench.prices)


def scores_of(bench, request):
    return bench.scores[request.arm, request.examples]


def snapshot(evaluator):
    """Everything a failed write must leave unchanged."""
    status = evaluator.status()
    return (
        evaluator.spent,
        evaluator.recommend(),
        evaluator.stop_signal,
        evaluator.n_outstanding,
        {name: values.tolist() for name, values in evaluator.trace().items()},
        status.n_seen.tolist(),
        status.mean.tolist(),
        status.variance.tolist(),
    )


def test_nothing_scored_means_no_recommendation(bench):
    def down(arm, examples):
        raise ConnectionError("connection refused")

    result = evaluate(
        range(K), range(N), down, 1e9, costs=bench.prices, max_retries=1, retry_backoff=0.001, progress=False
    )
    assert result.recommendation is None and result.stop_reason == "error"
    # A plain exception says nothing of what was paid: each of the two calls is charged as expected.
    arm = int(result.error_where.split()[1])
    assert result.spent == result.charged_as_expected == pytest.approx(2 * 8 * bench.prices[arm])
    assert result.failure.startswith(f"no recommendation: nothing was scored; the scoring calls failed: arm {arm} (")
    assert result.failure.endswith("ConnectionError: connection refused")
    summary = result.summary()
    assert summary["recommended"] is None and summary["failure"] == result.failure and summary["n_cells"] == 0


def test_a_missing_cost_is_an_error_unless_costs_are_units(bench):
    scorer = MatrixScorer(bench.scores)
    result = evaluate(range(K), range(N), scorer, 1.0, progress=False)
    assert result.recommendation is None and isinstance(result.error, ValueError)
    assert "no costs were given" in str(result.error) and "costs='unit'" in str(result.error)
    counted = evaluate(range(K), range(N), scorer, 40, costs="unit", policy=GittinsPolicy(B), progress=False)
    assert counted.stop_reason == "budget" and counted.spent == 40 and counted.recommendation is not None
    with pytest.raises(ValueError, match="costs must be dollars per example, 'unit' or None"):
        evaluate(range(K), range(N), scorer, 1.0, costs="units")


def test_policies_that_cannot_run_live_say_so_when_chosen(bench):
    with pytest.raises(ValueError, match="'pbgi' cannot run a live evaluation: configuration-level BO"):
        Evaluator(task_of(bench), LiveConfig(policy=PBGIPolicy()))
    with pytest.raises(ValueError, match="'prompteval' needs binary"):
        Evaluator(task_of(bench), LiveConfig(policy=PromptEvalPolicy()))
    binary_task = LiveTask(range(K), range(N), costs=bench.prices, binary=True)
    with Evaluator(binary_task, LiveConfig(budget_usd=1.0, policy=PromptEvalPolicy())) as evaluator:
        request = evaluator.ask()
        with pytest.raises(ValueError, match="declares binary scores"):
            evaluator.tell(request, np.full(request.size, 0.5))
        evaluator.tell(request, scores_of(bench, request))


def test_a_second_writer_is_refused_while_the_first_holds_the_store(bench, tmp_path):
    path = tmp_path / "run.sqlite"
    first = Evaluator(task_of(bench), LiveConfig(store=path))
    with pytest.raises(StoreLockedError, match=f"store {path} is open for writing by another process"):
        Evaluator(task_of(bench), LiveConfig(store=path))
    holder = textwrap.dedent(
        f"""
        import sys
        from gittinseval.live import Evaluator, LiveConfig, LiveTask, StoreLockedError
        try:
            Evaluator(LiveTask(range({K}), range({N}), costs=[1.0] * {K}), LiveConfig(store={str(path)!r}))
        except StoreLockedError as error:
            print(error)
            sys.exit(3)
        """
    )
    other = subprocess.run([sys.executable, "-c", holder], capture_output=True, text=True, timeout=60)
    assert other.returncode == 3 and "open for writing by another process" in other.stdout
    request = first.ask()
    first.tell(request, scores_of(bench, request))
    first.close()
    with Evaluator(task_of(bench), LiveConfig(store=path)) as second:
        assert second.spent == first.spent


def test_the_store_syncs_every_commit(bench, tmp_path):
    with Evaluator(task_of(bench), LiveConfig(store=tmp_path / "run.sqlite")) as evaluator:
        connection = evaluator.store.connection
        assert connection.execute("PRAGMA synchronous").fetchone()[0] == 2  # FULL
        assert connection.execute("PRAGMA journal_mode").fetchone()[0] == "wal"


def test_a_failed_tell_write_leaves_the_request_outstanding_and_nothing_changed(bench, tmp_path):
    path = tmp_path / "run.sqlite"
    evaluator = Evaluator(task_of(bench), LiveConfig(policy=GittinsPolicy(B), store=path))
    for _ in range(6):
        request = evaluator.ask()
        evaluator.tell(request, scores_of(bench, request))
    request = evaluator.ask()
    before = snapshot(evaluator)
    # The write fails after the request's row is updated and its first cells inserted.
    failing_example = int(request.examples[-1])
    with sqlite3.connect(path) as db:
        db.execute(
            f"CREATE TRIGGER disk_full BEFORE INSERT ON cells WHEN NEW.example = {failing_example} "
            "BEGIN SELECT RAISE(ABORT, 'disk full'); END"
        )
    with pytest.raises(sqlite3.IntegrityError, match="disk full"):
        evaluator.tell(request, scores_of(bench, request))
    assert snapshot(evaluator) == before
    with sqlite3.connect(path) as db:
        told = {example for (example,) in db.execute("SELECT example FROM cells WHERE arm = ?", (request.arm,))}
        assert not told & set(request.examples.tolist())
        assert db.execute("SELECT COUNT(*) FROM requests WHERE closed_seq IS NULL").fetchone()[0] == 1
        db.execute("DROP TRIGGER disk_full")
    evaluator.tell(request, scores_of(bench, request))
    assert evaluator.n_outstanding == 0 and len(evaluator.trace()["step"]) == 7
    evaluator.close()


def test_a_failed_issue_write_gives_the_request_back(bench, tmp_path):
    path = tmp_path / "run.sqlite"
    reference = Evaluator(task_of(bench), LiveConfig(policy=GittinsPolicy(B)))
    evaluator = Evaluator(task_of(bench), LiveConfig(policy=GittinsPolicy(B), store=path))
    with sqlite3.connect(path) as db:
        db.execute("CREATE TRIGGER full BEFORE INSERT ON requests BEGIN SELECT RAISE(ABORT, 'disk full'); END")
    with pytest.raises(sqlite3.IntegrityError, match="disk full"):
        evaluator.ask()
    assert evaluator.n_outstanding == 0
    with sqlite3.connect(path) as db:
        db.execute("DROP TRIGGER full")
    for _ in range(10):
        expected, request = reference.ask(), evaluator.ask()
        assert request.arm == expected.arm and np.array_equal(request.examples, expected.examples)
        reference.tell(expected, scores_of(bench, expected))
        evaluator.tell(request, scores_of(bench, request))
    evaluator.close()


def out_of_order_session(bench, evaluator, rng, n_rounds):
    """Keep up to four requests in flight; tell or cancel a random one of them each round.

    A reopened evaluator hands its untold requests out again first, so the
    session starts with none in hand."""
    in_flight = []
    for _ in range(n_rounds):
        while len(in_flight) < 4 and (request := evaluator.ask()) is not None:
            in_flight.append(request)
        if not in_flight:
            return
        request = in_flight.pop(int(rng.integers(len(in_flight))))
        if rng.uniform() < 0.15 and evaluator.policy.cancellable:
            evaluator.cancel(request)
        else:
            evaluator.tell(request, scores_of(bench, request), cost=float(rng.uniform(0.5, 2.0)))


@pytest.mark.parametrize(
    "make_policy",
    [
        lambda: GittinsPolicy(B, 1e-3),
        lambda: UCBEPolicy(B),
        lambda: UniformPolicy(B),
        lambda: LRFPolicy(batch_size=B, ensemble=LowRankEnsemble(ensemble_size=4, iterations=2)),
    ],
    ids=["gittins", "ucbe", "uniform", "lrf"],
)
def test_resume_after_out_of_order_tells_reproduces_the_live_run(bench, tmp_path, make_policy):
    path = tmp_path / "run.sqlite"
    live = Evaluator(task_of(bench), LiveConfig(policy=make_policy(), seed=9, store=path))
    out_of_order_session(bench, live, np.random.default_rng(1), 25)
    in_flight = [(r.arm, r.examples.tolist()) for r in live.outstanding]
    before = snapshot(live)
    live.close()

    resumed = Evaluator(task_of(bench), LiveConfig(policy=make_policy(), seed=9, store=path))
    assert snapshot(resumed) == before
    assert [(r.arm, r.examples.tolist()) for r in resumed.outstanding] == in_flight
    # Both go on identically: the in-memory run (reopened state) and a second resume.
    out_of_order_session(bench, resumed, np.random.default_rng(2), 15)
    after = snapshot(resumed)
    resumed.close()
    with Evaluator(task_of(bench), LiveConfig(policy=make_policy(), seed=9, store=path)) as again:
        assert snapshot(again) == after


def test_a_policy_that_cannot_take_a_request_back_refuses_cancel_and_a_failed_issue_closes(bench, tmp_path):
    path = tmp_path / "run.sqlite"
    policy = LRFPolicy(batch_size=B, ensemble=LowRankEnsemble(ensemble_size=4, iterations=2))
    evaluator = Evaluator(task_of(bench), LiveConfig(policy=policy, store=path))
    request = evaluator.ask()
    with pytest.raises(ValueError, match="'lrf' cannot take back a request; tell its scores instead"):
        evaluator.cancel(request)
    evaluator.tell(request, scores_of(bench, request))
    with sqlite3.connect(path) as db:
        db.execute("CREATE TRIGGER full BEFORE INSERT ON requests BEGIN SELECT RAISE(ABORT, 'disk full'); END")
    with pytest.raises(RuntimeError, match="cannot take back its selection: this evaluator is closed"):
        evaluator.ask()
    with sqlite3.connect(path) as db:
        db.execute("DROP TRIGGER full")
    policy = LRFPolicy(batch_size=B, ensemble=LowRankEnsemble(ensemble_size=4, iterations=2))
    with Evaluator(task_of(bench), LiveConfig(policy=policy, store=path)) as reopened:
        assert reopened.spent == evaluator.spent and reopened.ask() is not None


def test_a_store_that_does_not_replay_is_refused(bench, tmp_path):
    path = tmp_path / "run.sqlite"
    with Evaluator(task_of(bench), LiveConfig(policy=GittinsPolicy(B), store=path)) as evaluator:
        request = evaluator.ask()
        evaluator.tell(request, scores_of(bench, request))
    with sqlite3.connect(path) as db:
        (examples,) = db.execute("SELECT examples FROM requests").fetchone()
        db.execute("UPDATE requests SET examples = ?", (json.dumps(json.loads(examples)[::-1]),))
    with pytest.raises(ValueError, match="replaying request 1, the policy selects arm"):
        Evaluator(task_of(bench), LiveConfig(policy=GittinsPolicy(B), store=path))
