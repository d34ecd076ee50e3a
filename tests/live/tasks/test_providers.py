"""Several providers in one chat task (issue 50, item 4): each arm's endpoint, and the limits its provider keeps.

An arm may set its own ``base_url``, ``api_key_env``, ``rpm`` and ``tpm``; they are never sent, and not a
part of the arm's name in the store.  Two fake servers in one task: each gets its own arms' calls, the limit
of a provider holds across the arms that share it, and the spend per provider equals each server's bill.
"""

import pytest

from gittinseval.live import OpenAIChatScorer
from gittinseval.live.fake_server import PRICES, FakeChatServer
from gittinseval.live.status import status_text
from gittinseval.utils.errors import UsageError
from tests.live.test_rate_limits import CAP, EXAMPLES, answers, run, scorer_of


def test_two_providers_in_one_task_each_get_their_arms_calls_and_bill_their_spend(tmp_path):
    first = FakeChatServer(answers())
    second = FakeChatServer(answers(), rpm=CAP)
    try:
        arms = [
            {"model": "bad-model", "base_url": first.base_url},
            # Two arms of the second provider: the limit one sets is the provider's, shared by both (each alone
            # at the cap would send twice the server's cap).
            {"model": "good-model", "base_url": second.base_url, "rpm": CAP},
            {"model": "good-model", "temperature": 0.5, "base_url": second.base_url},
        ]
        scorer = scorer_of(first)
        task, result = run(arms, scorer, tmp_path / "run.sqlite")
        assert result.stop_reason == "exhausted" and result.error is None
        assert {body["model"] for body, _, _ in first.calls} == {"bad-model"}
        assert {(body["model"], body.get("temperature")) for body, _, _ in second.calls} == {
            ("good-model", None), ("good-model", 0.5)
        }
        assert len(first.calls) == len(EXAMPLES) and len(second.calls) == 2 * len(EXAMPLES)
        assert second.rate_limited == 0  # the limit held across the two arms
        # The endpoint settings are never sent, and are not a part of the arms' names in the store.
        assert not {"base_url", "rpm", "api_key_env"} & {key for body, _, _ in second.calls for key in body}
        assert task.arms == [{k: v for k, v in arm.items() if k not in ("base_url", "rpm")} for arm in arms]
        assert result.spent_by_provider == pytest.approx(
            {first.base_url: first.cost_of_calls(), second.base_url: second.cost_of_calls()}, rel=1e-12
        )
        line = status_text(result.ledger_line(), result.warnings, result.status).splitlines()[0]
        assert f"by provider: {first.base_url} $" in line and f", {second.base_url} $" in line
    finally:
        first.close()
        second.close()


def test_a_provider_has_one_set_of_limits_and_arms_that_differ_only_in_their_endpoint_need_names():
    here, other = "http://127.0.0.1:9/v1", "http://127.0.0.1:10/v1"
    scorer = OpenAIChatScorer(here, PRICES, api_key_env=None, rpm=100)
    with pytest.raises(ValueError, match=r"arm 2 sets rpm=60.0 for the provider http://127.0.0.1:10/v1 \(key None\), "
                                         r"and arm 1 rpm=50.0: the arms of a provider share its limits"):
        scorer.route([{"model": "a"}, {"model": "b", "base_url": other, "rpm": 50}, {"model": "c", "base_url": other,
                                                                                    "rpm": 60}])
    scorer = OpenAIChatScorer(here, PRICES, api_key_env=None, rpm=100, tpm=5000)
    routed = scorer.route(
        [{"model": "a"}, {"model": "b", "base_url": other}, {"model": "c", "base_url": other + "/", "rpm": 50}]
    )
    assert routed == [{"model": "a"}, {"model": "b"}, {"model": "c"}]
    # A provider's limits: those one of its arms sets, else the score_fn's.
    limits = {arm["model"]: scorer.providers.limiter(scorer.providers.endpoint(arm)) for arm in routed}
    assert [(limits[model].rpm, limits[model].tpm) for model in "abc"] == [(100, 5000), (50, 5000), (50, 5000)]
    with pytest.raises(ValueError, match="arms 0 and 1 differ only in their endpoint .* give each a name"):
        OpenAIChatScorer("http://127.0.0.1:9/v1", PRICES).route([{"model": "a"}, {"model": "a", "base_url": other}])
    named = [{"model": "a", "name": "here"}, {"model": "a", "name": "there", "base_url": other}]
    scorer = OpenAIChatScorer("http://127.0.0.1:9/v1", PRICES, api_key_env=None)
    assert scorer.route(named) == [{"model": "a", "name": "here"}, {"model": "a", "name": "there"}]
    assert scorer.provider_label({"model": "a", "name": "there"}) == other


def test_a_store_resumes_across_a_change_of_an_arms_endpoint(tmp_path):
    before, after = FakeChatServer(answers()), FakeChatServer(answers())
    try:
        store = tmp_path / "run.sqlite"
        arms = [{"model": "bad-model"}, {"model": "good-model", "base_url": before.base_url, "rpm": CAP}]
        _, first = run(arms, scorer_of(before), store)
        moved = [arms[0], {"model": "good-model", "base_url": after.base_url}]
        _, resumed = run(moved, scorer_of(before), store)
    finally:
        before.close()
        after.close()
    assert first.stop_reason == resumed.stop_reason == "exhausted"
    assert after.received == 0 and resumed.spent == first.spent  # every cell was told: nothing asked again


def test_every_providers_key_variable_must_be_set_before_a_call(monkeypatch):
    monkeypatch.setenv("FIRST_KEY", "sk-1")
    monkeypatch.delenv("SECOND_KEY", raising=False)
    scorer = OpenAIChatScorer("http://127.0.0.1:9/v1", PRICES, api_key_env="FIRST_KEY")
    scorer.check_ready()
    scorer.route([{"model": "a"}, {"model": "b", "base_url": "http://127.0.0.1:10/v1", "api_key_env": "SECOND_KEY"}])
    with pytest.raises(UsageError, match="environment variable SECOND_KEY .* is unset"):
        scorer.check_ready()
