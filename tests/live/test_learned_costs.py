"""Costs learned from usage in a live run, against a local fake server whose replies for one arm are 10x longer."""

import json
import sqlite3

import numpy as np
import pytest

from gittinseval import CostLearning, GittinsPolicy
from gittinseval.live import Evaluator, LiveConfig, LiveTask, OpenAIChatScorer, evaluate
from gittinseval.live.fake_server import COMPLETION_TOKENS, FakeChatServer
from gittinseval.live.tasks.chat import expected_chat_costs
from gittinseval.live.tasks.scoring import read_jsonl

MODELS = ("terse", "plain", "verbose")
PRICES = {model: {"input": 1.0, "output": 10.0} for model in MODELS}
ARMS = [{"model": model} for model in MODELS]
BUDGET = 0.004
TOKENS_PER_EXAMPLE = 33.0


def run(tmp_path, name, learn_costs):
    """A run of GittinsEval at concurrency 1 in which every arm answers wrong and ``verbose`` writes 10x the tokens
    of the guess; returns the result, the server's bill of each model and the store's ledger."""
    examples = read_jsonl()
    guess = expected_chat_costs(ARMS, PRICES, prompt_tokens=1, completion_tokens=COMPLETION_TOKENS)
    server = FakeChatServer(
        {e["prompt"]: e["answer"] for e in examples},
        good_model="none",
        prices=PRICES,
        prompt_tokens=1,
        completion_tokens={"verbose": 10 * COMPLETION_TOKENS},
    )
    store = tmp_path / f"{name}.sqlite"
    try:
        result = evaluate(
            ARMS,
            examples,
            OpenAIChatScorer(server.base_url, PRICES, api_key_env=None, timeout=10),
            BUDGET,
            costs=guess,
            tokens_per_example=TOKENS_PER_EXAMPLE,
            policy=GittinsPolicy(2, lam=1e-2),
            learn_costs=learn_costs,
            store=store,
            progress=False,
        )
    finally:
        server.close()
    bill = {
        model: sum(tokens * 1.0 + completion * 10.0 for m, tokens, completion in server.billed if m == model) / 1e6
        for model in MODELS
    }
    with sqlite3.connect(store) as db:
        calls = db.execute(
            "SELECT r.arm, a.started_seq, a.finished_seq, a.expected, a.charged, a.examples FROM attempts a "
            "JOIN requests r ON r.id = a.request ORDER BY a.started_seq"
        ).fetchall()
    return result, bill, calls, np.array(guess)


def test_a_verbose_arms_learned_cost_becomes_its_bill_and_the_allocation_moves_away_from_it(tmp_path):
    learned, bill, calls, guess = run(tmp_path, "learned", CostLearning(pseudo_count=1.0, refresh_share=0.1))
    fixed, _, fixed_calls, _ = run(tmp_path, "fixed", None)
    verbose = MODELS.index("verbose")
    told = learned.status.n_seen[verbose]
    billed_per_example = bill["verbose"] / told
    assert billed_per_example == pytest.approx(301 / 31 * guess[verbose], rel=1e-9)  # 1 + 300 tokens' worth, not 1 + 30
    # (n0 g + S) / (n0 + n): the guess fades as the arm's charges come in.
    assert learned.status.learned_cost[verbose] == pytest.approx(
        (guess[verbose] + bill["verbose"]) / (1 + told), rel=1e-9
    )
    assert abs(learned.status.learned_cost[verbose] / billed_per_example - 1) < 0.1
    np.testing.assert_allclose(learned.status.learned_cost[:verbose], guess[:verbose], rtol=1e-9)
    np.testing.assert_array_equal(learned.status.guessed_cost, guess)
    assert fixed.status.learned_cost is None
    # Planned at its bill, the verbose arm is sampled less, and the terse arms more, than at the guess.
    assert learned.status.n_seen[verbose] < fixed.status.n_seen[verbose]
    assert learned.status.n_seen[:verbose].sum() > fixed.status.n_seen[:verbose].sum()
    # The ledger and the budget rule are unchanged: spend is the bill, each call expected at the guess, and no call
    # started once the spend had reached the budget.
    for result, rows in ((learned, calls), (fixed, fixed_calls)):
        assert result.stop_reason == "budget" and result.spent == pytest.approx(sum(r[4] for r in rows), rel=1e-12)
        for arm, started, _, expected, _, examples in rows:
            assert expected == pytest.approx(guess[arm] * len(json.loads(examples)), rel=1e-12)
            assert sum(r[4] for r in rows if r[2] < started) < BUDGET
        assert result.spent >= BUDGET
    assert learned.spent == pytest.approx(sum(bill.values()), rel=1e-12)


def test_a_resumed_run_re_plans_as_the_recorded_one_and_a_store_without_learning_is_refused_with_it(tmp_path):
    """The store's charges replayed give the same estimates; a store made without learned costs refuses them."""
    learned, *_ = run(tmp_path, "learned", CostLearning())
    task = LiveTask([str(arm) for arm in ARMS], read_jsonl(), costs=[3.1e-5] * 3, tokens_per_example=TOKENS_PER_EXAMPLE)
    with Evaluator.from_store(tmp_path / "learned.sqlite") as reopened:
        np.testing.assert_array_equal(reopened.status().learned_cost, learned.status.learned_cost)
        assert reopened.learned_costs.n_refreshes > 0
    fixed_store = tmp_path / "fixed.sqlite"
    Evaluator(task, LiveConfig(store=fixed_store, learn_costs=None)).close()
    with pytest.raises(ValueError, match=r"learn_costs: store has None, given \{'pseudo_count': 1.0"):
        Evaluator(task, LiveConfig(store=fixed_store))


def test_a_reply_served_by_the_cache_is_learned_at_its_list_price_not_its_0_charge_and_replayed_so(tmp_path):
    """A second identical run, served by the response cache, is charged $0 and learns the costs the first learned
    (what its calls would cost, the list price beside the charge in the ledger); its store replays to them."""
    arms = [{**arm, "temperature": 0.0} for arm in ARMS]  # cached: their replies repeat
    examples = read_jsonl()
    guess = expected_chat_costs(arms, PRICES, prompt_tokens=1, completion_tokens=COMPLETION_TOKENS)
    server = FakeChatServer({e["prompt"]: e["answer"] for e in examples}, good_model="none", prices=PRICES,
                            prompt_tokens=1, completion_tokens={"verbose": 10 * COMPLETION_TOKENS})
    results = []
    try:
        for name in ("paid", "cached"):
            scorer = OpenAIChatScorer(server.base_url, PRICES, api_key_env=None, timeout=10)
            results.append(evaluate(
                arms, examples, scorer, None, costs=guess, tokens_per_example=TOKENS_PER_EXAMPLE,
                policy=GittinsPolicy(2, lam=1e-2), learn_costs=CostLearning(pseudo_count=1.0, refresh_share=0.1),
                store=tmp_path / f"{name}.sqlite", progress=False,
            ))
    finally:
        server.close()
    paid, cached = results
    assert cached.spent == 0 and paid.spent == pytest.approx(server.cost_of_calls(), rel=1e-12)
    np.testing.assert_allclose(cached.status.learned_cost, paid.status.learned_cost, rtol=1e-12)
    assert cached.status.learned_cost[MODELS.index("verbose")] > 5 * guess[MODELS.index("verbose")]
    np.testing.assert_array_equal(cached.trace["arm"], paid.trace["arm"])
    with sqlite3.connect(tmp_path / "cached.sqlite") as db:
        charged, listed = db.execute("SELECT SUM(charged), SUM(list_cost) FROM attempts").fetchone()
    assert charged == 0 and listed == pytest.approx(paid.spent, rel=1e-12)
    with Evaluator.from_store(tmp_path / "cached.sqlite") as reopened:
        np.testing.assert_array_equal(reopened.status().learned_cost, cached.status.learned_cost)
