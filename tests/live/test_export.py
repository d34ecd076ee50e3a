"""``gittinseval-live export``: a store's cells and ledger leave it as tables, and come back as a matrix.

The run is exhaustive on the bundled arithmetic examples against the fake server, with a batch that fails
half-way and is retried: its tables are checked against the store's own rows and the server's bill, and
read back by ``benchmark=matrix`` for the simulator to replay.
"""

import json
import shutil
import sqlite3
import sys

import numpy as np
import pyarrow.compute as pc
import pyarrow.csv as pa_csv
import pyarrow.parquet as pq
import pytest
from hydra import compose, initialize_config_dir
from hydra.errors import InstantiationException
from hydra.utils import instantiate

from gittinseval import GaussianPrior
from gittinseval.baselines.uniform import UniformPolicy
from gittinseval.cli.configs import CONFIG_DIR
from gittinseval.cli.live import main
from gittinseval.data import load_matrix
from gittinseval.data.long_table import read_long_table
from gittinseval.live import Evaluator, LiveConfig, LiveTask, RunStore, TransientError
from gittinseval.live.export import export_paths, export_store, store_tables
from gittinseval.live.fake_server import FakeChatServer
from gittinseval.sim.simulator import simulate
from tests.live.test_ledger import ARMS, PRICES, PROMPT_TOKENS, answers, run


@pytest.fixture(scope="module")
def live_run(tmp_path_factory):
    """``(result, store, server bill)`` of an exhaustive run whose first batch fails after two answers."""
    from gittinseval.live.tasks.scoring import read_jsonl

    examples = read_jsonl()
    store = tmp_path_factory.mktemp("export") / "run.sqlite"
    server = FakeChatServer(answers(examples), prompt_tokens=PROMPT_TOKENS)
    try:
        server.plan = ["ok", "ok", 503, 503]
        result = run(examples, server, store)
        bill = server.cost_of_calls()
    finally:
        server.close()
    assert result.stop_reason == "exhausted" and result.attempts["failed"] == 1
    return result, store, bill


def store_rows(store, query):
    with sqlite3.connect(store) as db:
        return db.execute(query).fetchall()


def test_the_ledger_table_sums_to_the_spend_and_the_bill_after_a_half_failed_batch(live_run, tmp_path):
    result, store, bill = live_run
    cells_path, attempts_path = export_store(store, "parquet", tmp_path / "run")
    assert (cells_path.name, attempts_path.name) == ("run.cells.parquet", "run.attempts.parquet")
    attempts = pq.read_table(attempts_path).to_pylist()
    assert len(attempts) == 11 and sum(row["dollars"] for row in attempts) == pytest.approx(result.spent, rel=1e-12)
    assert result.spent == pytest.approx(bill, rel=1e-12)
    (failed,) = [row for row in attempts if row["status"] == "failed"]
    (retry,) = [row for row in attempts if row["request"] == failed["request"] and row["status"] == "scored"]
    assert "503" in failed["error"] and (failed["attempt_number"], retry["attempt_number"]) == (1, 2)
    assert ARMS[failed["arm"]]["model"] in failed["arm_label"]
    cells = pq.read_table(cells_path)
    kept = {row["example"] for row in cells.to_pylist() if row["attempt"] == failed["attempt"]}
    assert len(kept) == 2 and retry["n_examples"] == 2
    assert set(json.loads(retry["examples"])) == set(json.loads(failed["examples"])) - kept
    # Every request was told, so the cells (each its request's cost over its size) sum to the spend too.
    assert cells.num_rows == 2 * 20 and sum(cells.column("dollars").to_pylist()) == pytest.approx(result.spent)
    assert cells.column("arm.model").to_pylist() == [ARMS[arm]["model"] for arm in cells.column("arm").to_pylist()]


def test_the_ledger_charges_a_lost_or_timed_out_call_its_expected_cost_and_sums_to_the_spend(tmp_path):
    """The attempts table's ``dollars`` are each call's charge, not what it reported: a call that timed out
    (it reported $0, its cost unknown) and one lost in flight are charged as expected, and the column sums to
    the run's ``spent``, which a column of reported costs (null for the lost call) would not."""
    store = tmp_path / "run.sqlite"
    task = LiveTask(["a", "b"], range(8), costs=[0.25, 0.5])
    with Evaluator(task, LiveConfig(store=store, policy=UniformPolicy(4))) as evaluator:
        request = evaluator.ask()
        timed_out = evaluator.start_attempt(request)
        evaluator.fail_attempt(timed_out, TransientError("timed out", cost=0.0, uncosted=request.size))
        evaluator.finish_attempt(evaluator.start_attempt(request), [1.0] * request.size, cost=0.1)
        evaluator.start_attempt(evaluator.ask())  # in flight when the session ends
    with Evaluator(task, LiveConfig(store=store, policy=UniformPolicy(4))) as reopened:  # settles it as lost
        spent = reopened.spent
    written = read_long_table(export_store(store, "csv", tmp_path / "run")[1]).to_pylist()
    for attempts in (store_tables(store)[1].to_pylist(), written):
        failed, scored, lost = attempts
        assert [row["status"] for row in attempts] == ["failed", "scored", "lost"]
        assert failed["reported_dollars"] == 0
        assert failed["dollars"] == failed["expected_dollars"] == failed["charged_as_expected"] > 0
        assert lost["reported_dollars"] is None and lost["dollars"] == lost["expected_dollars"] > 0
        assert scored["dollars"] == scored["reported_dollars"] == 0.1
        assert sum(row["dollars"] for row in attempts) == pytest.approx(spent, rel=1e-12)
        assert sum(row["reported_dollars"] or 0.0 for row in attempts) < spent  # reported costs miss the unknown


def test_the_simulator_replays_the_exported_run_cell_for_cell_at_the_ledgers_cost(live_run, tmp_path):
    result, store, _ = live_run
    cells_path, _ = export_store(store, "parquet", tmp_path / "run")
    benchmark = load_matrix(str(cells_path))
    live = {(arm, example): score for arm, example, score in store_rows(store, "SELECT arm, example, score FROM cells")}
    assert benchmark.scores.shape == (2, 20) and len(live) == 40
    assert all(benchmark.scores[arm, example] == score for (arm, example), score in live.items())
    # Each cell costs its request's calls (from the ledger's rows) over the request's size.
    charged = dict(store_rows(store, "SELECT request, SUM(charged) FROM attempts GROUP BY request"))
    sizes = {request: len(json.loads(ids)) for request, ids in store_rows(store, "SELECT id, examples FROM requests")}
    for arm, example, request in store_rows(store, "SELECT arm, example, request FROM cells"):
        assert benchmark.cell_costs[arm, example] == pytest.approx(charged[request] / sizes[request], rel=1e-12)

    observed = {}

    class Recording(UniformPolicy):
        def observe(self, request, scores):
            observed.update(zip(((request.arm, int(e)) for e in request.examples), scores.tolist(), strict=True))
            super().observe(request, scores)

    replay = simulate(
        benchmark, Recording(4), benchmark.prices, GaussianPrior(), budget_fraction=1.0,
        cell_costs=benchmark.cell_costs,
    )
    assert observed == live and replay.summary["total_cost"] == pytest.approx(result.spent, rel=1e-12)


def test_csv_and_jsonl_exports_equal_the_parquet_one(live_run, tmp_path):
    _, store, _ = live_run
    tables = {}
    for file_format in ("parquet", "csv", "jsonl"):
        for name, path in zip(("cells", "attempts"), export_store(store, file_format, tmp_path / "run"), strict=True):
            tables[file_format, name] = read_long_table(path).to_pylist()
    for name in ("cells", "attempts"):
        assert tables["csv", name] == tables["parquet", name] == tables["jsonl", name]
    assert len(tables["parquet", "cells"]) == 40 and any(row["error"] for row in tables["csv", "attempts"])


def test_an_export_reads_one_snapshot_while_a_run_writes_the_store(live_run, tmp_path, monkeypatch):
    """The export takes no lock, and a write committed between two of its reads is in neither table."""
    _, store, _ = live_run
    copy = tmp_path / "writing.sqlite"
    shutil.copy(store, copy)
    writer = RunStore(copy)  # holds the store's lock, as a running run does
    connect = sqlite3.connect

    class WrittenAfterTheFirstRead:
        def __init__(self, *args, **kwargs):
            self.connection, self.reads = connect(*args, **kwargs), 0

        def execute(self, query):
            found = self.connection.execute(query)
            self.reads += query.startswith("SELECT")
            if self.reads == 1:
                with writer._transaction() as cursor:
                    cursor.execute("DELETE FROM cells")
                    cursor.execute("DELETE FROM usage")
                    cursor.execute("DELETE FROM attempts WHERE id NOT IN (SELECT MIN(id) FROM attempts)")
            return found

        def close(self):
            self.connection.close()

    monkeypatch.setattr(sqlite3, "connect", WrittenAfterTheFirstRead)
    try:
        cells, attempts = store_tables(copy)
    finally:
        writer.close()
    assert cells.num_rows == 40 and attempts.num_rows == 11


def test_missing_cells_are_refused_naming_the_arms_unless_the_examples_every_arm_has_are_kept(live_run, tmp_path):
    _, store, _ = live_run
    cells, _ = store_tables(store)
    rows = [row for row in cells.to_pylist() if not (row["arm"] == 1 and row["example"] in (3, 7))]
    partial = tmp_path / "partial.jsonl"
    partial.write_text("".join(json.dumps(row) + "\n" for row in rows))
    label = rows[-1]["arm_label"]
    with pytest.raises(ValueError, match=rf"2 cells of 40 missing \({label}: 2\); give \+benchmark.complete=intersect"):
        load_matrix(str(partial))
    kept = load_matrix(str(partial), complete="intersect")
    every_arm = [e for e in range(20) if e not in (3, 7)]
    assert kept.scores.shape == (2, 18) and kept.details["example_ids"].tolist() == every_arm
    full = load_matrix(str(export_store(store, "jsonl", tmp_path / "run")[0]))
    assert np.array_equal(kept.scores, full.scores[:, every_arm])
    assert np.array_equal(kept.cell_costs, full.cell_costs[:, every_arm])
    partial.write_text("".join(json.dumps(row) + "\n" for row in [*rows, rows[0]]))
    with pytest.raises(ValueError, match="has 2 rows for example"):
        load_matrix(str(partial))


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["run.sqlite", "--format", "xlsx"], "argument --format: invalid choice: 'xlsx'"),
        (["absent.sqlite", "--format", "csv"], "store not found: absent.sqlite"),
    ],
)
def test_a_bad_format_or_a_missing_store_is_a_one_line_error(argv, message, monkeypatch, capsys, tmp_path):
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(sys, "argv", ["gittinseval-live", "export", *argv])
    with pytest.raises(SystemExit) as exit_:
        main()
    error = capsys.readouterr().err
    assert exit_.value.code == 2 and error == f"gittinseval-live export: error: {error.split('error: ', 1)[1]}"
    assert message in error and error.count("\n") == 1


def test_benchmark_matrix_keeps_its_keys_and_takes_the_intersection_with_a_plus(live_run, tmp_path):
    """``+benchmark.complete=intersect`` reaches the loader; without it the config, and so the digest of runs
    on a full matrix, is what it was."""
    _, store, _ = live_run
    cells, _ = store_tables(store)
    partial = tmp_path / "partial.csv"
    pa_csv.write_csv(cells.filter(pc.not_equal(cells.column("example"), 5)).slice(1), partial)
    with initialize_config_dir(config_dir=str(CONFIG_DIR), version_base="1.3"):
        plain = compose(config_name="config", overrides=["benchmark=matrix", f"benchmark.path={partial}"])
        kept = compose(config_name="config", overrides=["benchmark=matrix", f"benchmark.path={partial}",
                                                        "+benchmark.complete=intersect"])
    assert set(plain.benchmark) == {"_target_", "path", "costs", "name"}
    with pytest.raises(InstantiationException, match=r"1 cell of 38 missing \(bad-model: 1\)"):
        instantiate(plain.benchmark)
    assert instantiate(kept.benchmark).scores.shape == (2, 18)


COMPLETION = {"good-model": 7, "bad-model": 2}


@pytest.fixture(scope="module")
def billed_run(tmp_path_factory):
    """``(result, store, server, examples)`` of an exhaustive run whose calls are billed the words of their prompt
    and ``COMPLETION[model]`` reply tokens, so that every cell has a bill of its own."""
    from gittinseval.live.tasks.scoring import read_jsonl

    examples = read_jsonl()
    store = tmp_path_factory.mktemp("billed") / "run.sqlite"
    server = FakeChatServer(answers(examples), completion_tokens=COMPLETION)
    try:
        result = run(examples, server, store)
    finally:
        server.close()
    assert result.stop_reason == "exhausted" and result.attempts["failed"] == 0
    return result, store, server, examples


def test_each_cell_carries_the_tokens_and_dollars_the_server_billed_for_it(billed_run, tmp_path):
    result, store, server, examples = billed_run
    cells = pq.read_table(export_store(store, "parquet", tmp_path / "run")[0]).to_pylist()
    billed = {(body["model"], body["messages"][-1]["content"]): tokens for body, _, tokens in server.calls}
    assert len(billed) == len(server.billed) == len(cells) == 40  # one call per cell
    for cell in cells:
        model = ARMS[cell["arm"]]["model"]
        tokens_in, tokens_out = billed[model, examples[cell["example"]]["prompt"]], COMPLETION[model]
        assert (cell["tokens_in"], cell["tokens_out"]) == (tokens_in, tokens_out)
        dollars = (tokens_in * PRICES[model]["input"] + tokens_out * PRICES[model]["output"]) / 1e6
        assert cell["billed_dollars"] == pytest.approx(dollars, rel=1e-12)
    assert len({cell["tokens_in"] for cell in cells}) > 1  # the prompts differ in length, and so do the bills
    assert sum(cell["billed_dollars"] for cell in cells) == pytest.approx(result.spent, rel=1e-12)
    assert result.spent == pytest.approx(server.cost_of_calls(), rel=1e-12)


def test_each_call_of_the_ledger_carries_the_sum_of_its_examples_bills(billed_run, tmp_path):
    _, store, server, examples = billed_run
    attempts = pq.read_table(export_store(store, "parquet", tmp_path / "run")[1]).to_pylist()
    # The server's own record of each HTTP call: (model, prompt) -> prompt tokens, one example each.
    billed = {(body["model"], body["messages"][-1]["content"]): tokens for body, _, tokens in server.calls}
    assert sum(call["n_examples"] for call in attempts) == len(billed) == 40
    for call in attempts:
        model = ARMS[call["arm"]]["model"]
        prompts = [billed[model, examples[example]["prompt"]] for example in json.loads(call["examples"])]
        tokens_out = COMPLETION[model] * len(prompts)
        assert (call["tokens_in"], call["tokens_out"]) == (sum(prompts), tokens_out)
        dollars = (sum(prompts) * PRICES[model]["input"] + tokens_out * PRICES[model]["output"]) / 1e6
        assert call["billed_dollars"] == pytest.approx(dollars, rel=1e-12) == pytest.approx(call["dollars"], rel=1e-12)


def test_the_simulator_replays_each_cell_at_its_own_bill_with_the_billed_dollars_column(billed_run, tmp_path):
    result, store, *_ = billed_run
    cells_path = export_store(store, "csv", tmp_path / "run")[0]
    cells = read_long_table(cells_path).to_pylist()
    benchmark = load_matrix(str(cells_path), cost_column="billed_dollars")
    shares = load_matrix(str(cells_path))
    assert np.array_equal(benchmark.scores, shares.scores)
    for cell in cells:
        assert benchmark.cell_costs[cell["arm"], cell["example"]] == pytest.approx(cell["billed_dollars"], rel=1e-12)
    replay = simulate(benchmark, UniformPolicy(4), benchmark.prices, GaussianPrior(), budget_fraction=1.0,
                      cell_costs=benchmark.cell_costs)
    assert replay.summary["total_cost"] == pytest.approx(result.spent, rel=1e-12)


def test_the_failed_calls_bill_is_in_the_shares_and_the_scored_cells_bills_in_billed_dollars(live_run, tmp_path):
    """In the half-failed run the 503s were not billed, so the scored cells' bills still sum to the spend."""
    result, store, _ = live_run
    cells = store_tables(store)[0].to_pylist()
    assert all(cell["tokens_in"] == PROMPT_TOKENS and cell["tokens_out"] == 3 for cell in cells)
    assert all(cell["tokens_reasoning"] == 0 for cell in cells)  # replies without completion token details
    assert sum(cell["billed_dollars"] for cell in cells) == pytest.approx(result.spent, rel=1e-12)


def test_a_store_made_before_the_usage_table_exports_empty_bills_and_replays_at_the_shares(live_run, tmp_path):
    _, store, _ = live_run
    old = tmp_path / "old.sqlite"
    shutil.copy(store, old)
    with sqlite3.connect(old) as db:
        db.execute("DROP TABLE usage")
    cells_path = export_store(old, "parquet", tmp_path / "old")[0]
    cells = pq.read_table(cells_path)
    ledger = pq.read_table(export_paths(tmp_path / "old", "parquet")[1])
    for column in ("billed_dollars", "tokens_in", "tokens_out", "tokens_reasoning"):
        assert cells.column(column).null_count == cells.num_rows == 40
        assert ledger.column(column).null_count == ledger.num_rows > 0
    assert cells.column("dollars") == store_tables(store)[0].column("dollars")
    assert load_matrix(str(cells_path)).cell_costs.shape == (2, 20)
    with pytest.raises(ValueError, match=r"40 cells of 40 have no billed_dollars .*; use the dollars column"):
        load_matrix(str(cells_path), cost_column="billed_dollars")
    with pytest.raises(ValueError, match=r"\['arm', 'example', 'score', 'cents'\]; \['cents'\] are missing"):
        load_matrix(str(cells_path), cost_column="cents")


def test_the_billed_dollars_are_the_costs_with_a_plus_and_the_matrix_keeps_its_keys(billed_run, tmp_path):
    _, store, *_ = billed_run
    cells_path = export_store(store, "jsonl", tmp_path / "run")[0]
    with initialize_config_dir(config_dir=str(CONFIG_DIR), version_base="1.3"):
        config = compose(config_name="config", overrides=["benchmark=matrix", f"benchmark.path={cells_path}",
                                                          "+benchmark.cost_column=billed_dollars"])
    assert instantiate(config.benchmark).cell_costs == pytest.approx(
        load_matrix(str(cells_path), cost_column="billed_dollars").cell_costs)
