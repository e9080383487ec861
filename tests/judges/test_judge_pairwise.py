"""Pairwise judging in both orders against the real in-process judge server."""

from __future__ import annotations

import asyncio
import json
import re
from typing import Any

import openai
import pytest
from fake_judge_api import FakeJudgeServer, Reply, completion

from collector.retry import RetryPolicy
from judges.errors import JudgeParseError
from judges.pairwise import PairwiseResult, judge_pair, resolve_pair
from judges.rubrics import builtin_rubric
from judges.semconv import evaluation_attributes
from judges.transport import JudgePrice

FAST = RetryPolicy(
    max_attempts=2, base_delay_s=0.01, max_delay_s=0.05, jitter=0.0, request_timeout_s=5.0
)
GOOD = "Paris is the capital of France."
BAD = "I think it might be Lyon."


def _answers(body: dict[str, Any]) -> tuple[str, str]:
    user = body["messages"][1]["content"]
    a = re.search(r"<answer_a>\n(.*?)\n</answer_a>", user, re.DOTALL)
    b = re.search(r"<answer_b>\n(.*?)\n</answer_b>", user, re.DOTALL)
    assert a is not None and b is not None
    return a.group(1), b.group(1)


def _verdict(winner: str) -> Reply:
    return Reply(body=completion(json.dumps({"reasoning": "compared", "winner": winner})))


def fair_judge(body: dict[str, Any]) -> Reply:
    """Prefers the correct answer wherever it stands."""
    a, b = _answers(body)
    if a == b:
        return _verdict("tie")
    return _verdict("A" if a == GOOD else "B")


def position_biased_judge(body: dict[str, Any]) -> Reply:
    """Always prefers the first answer."""
    return _verdict("A")


async def _pair(server: FakeJudgeServer, baseline: str, candidate: str) -> PairwiseResult:
    client = openai.AsyncOpenAI(api_key="k", base_url=server.base_url, max_retries=0)
    try:
        return await judge_pair(
            client,
            model="judge-model",
            rubric=builtin_rubric("correctness"),
            prompt="What is the capital of France?",
            baseline=baseline,
            candidate=candidate,
            price=JudgePrice(1.0, 2.0),
            retry=FAST,
        )
    finally:
        await client.close()


@pytest.mark.parametrize(
    ("baseline", "candidate", "outcome", "score"),
    [(BAD, GOOD, "win", 1.0), (GOOD, BAD, "loss", 0.0), (GOOD, GOOD, "tie", 0.5)],
)
def test_consistent_judge_in_both_orders(
    judge_server: FakeJudgeServer, baseline: str, candidate: str, outcome: str, score: float
) -> None:
    judge_server.handler = fair_judge
    result = asyncio.run(_pair(judge_server, baseline, candidate))
    assert result.outcome == outcome
    assert result.score == score
    assert result.consistent is True
    orders = sorted(_answers(r) for r in judge_server.requests)
    assert orders == sorted([(baseline, candidate), (candidate, baseline)])
    assert [j.order for j in result.judgements] == ["baseline_first", "candidate_first"]
    assert result.input_tokens == 240 and result.output_tokens == 60
    assert result.cost_usd == pytest.approx((240 * 1.0 + 60 * 2.0) / 1e6)


def test_position_bias_makes_an_inconsistent_pair_a_tie(judge_server: FakeJudgeServer) -> None:
    judge_server.handler = position_biased_judge
    result = asyncio.run(_pair(judge_server, BAD, GOOD))
    assert [j.preferred for j in result.judgements] == ["baseline", "candidate"]
    assert result.consistent is False
    assert result.outcome == "tie"
    attributes = evaluation_attributes(result)
    assert attributes["gen_ai.evaluation.name"] == "correctness_pairwise"
    assert attributes["gen_ai.evaluation.score.value"] == 0.5
    assert attributes["gen_ai.evaluation.score.label"] == "tie"


def test_a_bad_verdict_in_either_order_raises(judge_server: FakeJudgeServer) -> None:
    def handler(body: dict[str, Any]) -> Reply:
        a, _ = _answers(body)
        if a == GOOD:
            return Reply(body=completion('{"reasoning": "x", "winner": "both"}'))
        return fair_judge(body)

    judge_server.handler = handler
    with pytest.raises(JudgeParseError) as caught:
        asyncio.run(_pair(judge_server, BAD, GOOD))
    assert caught.value.raw_text is not None and "both" in caught.value.raw_text


@pytest.mark.parametrize(
    ("first", "second", "expected"),
    [
        ("candidate", "candidate", ("win", True)),
        ("baseline", "baseline", ("loss", True)),
        ("tie", "tie", ("tie", True)),
        ("candidate", "baseline", ("tie", False)),
        ("candidate", "tie", ("tie", False)),
    ],
)
def test_resolve_pair(first: Any, second: Any, expected: tuple[str, bool]) -> None:
    assert resolve_pair(first, second) == expected
