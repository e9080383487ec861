"""judge_call against a real OpenAI-compatible HTTP server on 127.0.0.1 (see conftest.py)."""

from __future__ import annotations

import asyncio
import json
import math
from collections.abc import Coroutine
from typing import Any, TypeVar

import openai
import pytest
from fake_judge_api import FakeJudgeServer, Reply, completion, error_body

from collector.retry import RetryPolicy
from judges.errors import (
    JudgeError,
    JudgeParseError,
    JudgeRequestError,
    JudgeUnavailableError,
)
from judges.rubrics import builtin_rubric
from judges.runner import JudgeResult, judge_call
from judges.semconv import evaluation_attributes
from judges.transport import JudgePrice

T = TypeVar("T")
FAST = RetryPolicy(
    max_attempts=3, base_delay_s=0.01, max_delay_s=0.05, jitter=0.0, request_timeout_s=5.0
)
VERDICT = json.dumps({"reasoning": "Answers the question directly and fully.", "score": 4})


def run(coro: Coroutine[Any, Any, T]) -> T:
    return asyncio.run(coro)


async def _judge(server: FakeJudgeServer, **kwargs: Any) -> JudgeResult:
    client = openai.AsyncOpenAI(api_key="test-key", base_url=server.base_url, max_retries=0)
    params: dict[str, Any] = {
        "model": "judge-model",
        "rubric": builtin_rubric("helpfulness"),
        "prompt": "How do I list files in a directory with Python?",
        "answer": "Use os.listdir(path) or pathlib.Path(path).iterdir().",
        "retry": FAST,
    }
    params.update(kwargs)
    try:
        return await judge_call(client, **params)
    finally:
        await client.close()


def test_json_schema_server_gets_a_strict_schema_and_result_records_everything(
    judge_server: FakeJudgeServer,
) -> None:
    judge_server.handler = lambda body: Reply(body=completion(VERDICT))
    price = JudgePrice(input_usd_per_mtok=2.5, output_usd_per_mtok=10.0)
    result = run(_judge(judge_server, price=price))

    (request,) = judge_server.requests
    assert request["model"] == "judge-model"
    assert request["temperature"] == 0
    assert request["response_format"]["type"] == "json_schema"
    schema = request["response_format"]["json_schema"]
    assert schema["strict"] is True
    assert schema["schema"]["required"] == ["reasoning", "score"]
    assert request["logprobs"] is True
    assert "very_helpful" in request["messages"][0]["content"]  # anchored levels in the prompt
    assert "os.listdir" in request["messages"][1]["content"]

    assert result.output_mode == "json_schema"
    assert result.discrete_score == 4
    assert result.score == 4.0
    assert result.weighted_score is None  # the server returned no logprobs
    assert result.logprobs_used is False
    assert result.label == "helpful"
    assert result.explanation == "Answers the question directly and fully."

    assert (result.rubric_name, result.rubric_version) == ("helpfulness", "1")
    assert result.judge_model == "judge-model"
    assert result.response_model == "judge-model-2025"
    assert (result.input_tokens, result.output_tokens) == (120, 30)
    assert result.cost_usd == pytest.approx((120 * 2.5 + 30 * 10.0) / 1e6)
    assert result.latency_s > 0
    assert result.elapsed_s >= result.latency_s
    assert result.attempts == 1


def test_reasoning_cap_reaches_schema_and_prompt(judge_server: FakeJudgeServer) -> None:
    judge_server.handler = lambda body: Reply(body=completion(VERDICT))
    run(_judge(judge_server, reasoning_max_chars=240))
    (request,) = judge_server.requests
    reasoning = request["response_format"]["json_schema"]["schema"]["properties"]["reasoning"]
    assert reasoning == {"type": "string", "maxLength": 240}
    assert "under 240 characters" in request["messages"][0]["content"]
    judge_server.requests.clear()
    run(_judge(judge_server))
    (request,) = judge_server.requests
    assert (
        "maxLength"
        not in request["response_format"]["json_schema"]["schema"]["properties"]["reasoning"]
    )


def test_json_object_only_server_falls_back(judge_server: FakeJudgeServer) -> None:
    def handler(body: dict[str, Any]) -> Reply:
        if body.get("response_format", {}).get("type") == "json_schema":
            return Reply(400, error_body("response_format json_schema is not supported"))
        return Reply(body=completion(VERDICT))

    judge_server.handler = handler
    result = run(_judge(judge_server))
    kinds = [r.get("response_format", {}).get("type") for r in judge_server.requests]
    assert kinds == ["json_schema", "json_object"]
    assert judge_server.requests[1]["logprobs"] is True  # the error did not name logprobs
    assert result.output_mode == "json_object"
    assert result.discrete_score == 4


def test_plain_text_server_is_parsed_strictly(judge_server: FakeJudgeServer) -> None:
    def handler(body: dict[str, Any]) -> Reply:
        if "response_format" in body:
            return Reply(400, error_body("unknown parameter response_format"))
        return Reply(body=completion(f"```json\n{VERDICT}\n```"))

    judge_server.handler = handler
    result = run(_judge(judge_server))
    assert result.output_mode == "text"
    assert result.discrete_score == 4
    assert len(judge_server.requests) == 3


@pytest.mark.parametrize(
    "content",
    [
        "I would rate this answer 4 out of 5.",
        '{"reasoning": "fine"}',
        '{"reasoning": "fine", "score": 7}',
        '{"reasoning": "fine", "score": "4"}',
        'Sure! {"reasoning": "fine", "score": 4}',
        "[1, 2]",
    ],
)
def test_invalid_output_raises_with_the_raw_text(
    judge_server: FakeJudgeServer, content: str
) -> None:
    judge_server.handler = lambda body: Reply(body=completion(content))
    with pytest.raises(JudgeParseError) as caught:
        run(_judge(judge_server))
    assert caught.value.raw_text == content
    assert isinstance(caught.value, JudgeError)


def test_truncated_output_is_a_parse_error_not_a_score(judge_server: FakeJudgeServer) -> None:
    judge_server.handler = lambda body: Reply(
        body=completion('{"reasoning": "The answer', finish_reason="length")
    )
    with pytest.raises(JudgeParseError, match="truncated"):
        run(_judge(judge_server))


def test_429_then_success_is_retried(judge_server: FakeJudgeServer) -> None:
    replies = iter(
        [
            Reply(429, error_body("rate limited"), headers={"retry-after": "0"}),
            Reply(503, error_body("overloaded")),
            Reply(body=completion(VERDICT)),
        ]
    )
    judge_server.handler = lambda body: next(replies)
    result = run(_judge(judge_server))
    assert result.attempts == 3
    assert result.discrete_score == 4
    assert len(judge_server.requests) == 3


def test_persistent_5xx_gives_up_after_the_policy_attempts(judge_server: FakeJudgeServer) -> None:
    judge_server.handler = lambda body: Reply(500, error_body("boom"))
    with pytest.raises(JudgeUnavailableError, match="HTTP 500"):
        run(_judge(judge_server))
    assert len(judge_server.requests) == FAST.max_attempts


def test_timeouts_are_retried(judge_server: FakeJudgeServer) -> None:
    replies = iter([Reply(body=completion(VERDICT), delay_s=1.0), Reply(body=completion(VERDICT))])
    judge_server.handler = lambda body: next(replies)
    policy = RetryPolicy(
        max_attempts=2, base_delay_s=0.01, max_delay_s=0.05, jitter=0.0, request_timeout_s=0.3
    )
    result = run(_judge(judge_server, retry=policy))
    assert result.attempts == 2
    assert result.discrete_score == 4


def test_auth_failure_is_not_retried(judge_server: FakeJudgeServer) -> None:
    judge_server.handler = lambda body: Reply(401, error_body("bad key"))
    with pytest.raises(JudgeRequestError, match="401"):
        run(_judge(judge_server))
    assert len(judge_server.requests) == 1


def test_logprobs_give_a_probability_weighted_score(judge_server: FakeJudgeServer) -> None:
    distribution = {"4": 0.6, " 4": 0.05, "5": 0.2, "3": 0.1, "four": 0.05}
    judge_server.handler = lambda body: Reply(
        body=completion(VERDICT, score_distribution=distribution)
    )
    result = run(_judge(judge_server))
    valid = {4: 0.65, 5: 0.2, 3: 0.1}
    mass = sum(valid.values())
    expected = sum(score * p / mass for score, p in valid.items())
    assert result.logprobs_used is True
    assert result.discrete_score == 4
    assert result.weighted_score == pytest.approx(expected)
    assert result.score == pytest.approx(expected)
    probabilities = dict(result.score_probabilities or ())
    assert probabilities[1] == 0.0
    assert probabilities[4] == pytest.approx(0.65 / mass)
    entropy = -sum(p / mass * math.log(p / mass) for p in valid.values())
    assert result.score_entropy == pytest.approx(entropy)


def test_server_rejecting_logprobs_keeps_the_format(judge_server: FakeJudgeServer) -> None:
    def handler(body: dict[str, Any]) -> Reply:
        if body.get("logprobs"):
            return Reply(400, error_body("logprobs are not supported for this model"))
        return Reply(body=completion(VERDICT))

    judge_server.handler = handler
    result = run(_judge(judge_server))
    assert result.output_mode == "json_schema"
    assert result.logprobs_used is False
    assert [bool(r.get("logprobs")) for r in judge_server.requests] == [True, False]


def test_pass_fail_rubric_weighted_score_is_p_pass(judge_server: FakeJudgeServer) -> None:
    content = json.dumps({"reasoning": "Declines the weapon request.", "score": 1})
    judge_server.handler = lambda body: Reply(
        body=completion(content, score_distribution={"1": 0.9, "0": 0.1})
    )
    result = run(_judge(judge_server, rubric=builtin_rubric("harmlessness")))
    assert result.label == "pass"
    assert result.weighted_score == pytest.approx(0.9)


def test_cannot_judge_is_unknown_never_zero(judge_server: FakeJudgeServer) -> None:
    content = json.dumps({"reasoning": "Depends on the user's private data.", "score": None})
    judge_server.handler = lambda body: Reply(body=completion(content, with_logprobs=True))
    result = run(_judge(judge_server, rubric=builtin_rubric("correctness")))
    assert result.score is None
    assert result.discrete_score is None
    assert result.label == "unknown"
    attributes = evaluation_attributes(result, evaluated_response_id="resp-1")
    assert "gen_ai.evaluation.score.value" not in attributes
    assert attributes["gen_ai.evaluation.score.label"] == "unknown"


def test_missing_usage_leaves_tokens_and_cost_unknown(judge_server: FakeJudgeServer) -> None:
    judge_server.handler = lambda body: Reply(
        body=completion(VERDICT, prompt_tokens=None, completion_tokens=None)
    )
    result = run(_judge(judge_server, price=JudgePrice(1.0, 1.0)))
    assert result.input_tokens is None
    assert result.cost_usd is None


def test_reference_answer_reaches_the_judge(judge_server: FakeJudgeServer) -> None:
    judge_server.handler = lambda body: Reply(body=completion(VERDICT))
    run(_judge(judge_server, rubric=builtin_rubric("correctness"), reference="REF-42"))
    assert "REF-42" in judge_server.requests[0]["messages"][1]["content"]


def test_semconv_attributes(judge_server: FakeJudgeServer) -> None:
    judge_server.handler = lambda body: Reply(body=completion(VERDICT))
    result = run(_judge(judge_server))
    assert evaluation_attributes(result, evaluated_response_id="chatcmpl-abc") == {
        "gen_ai.evaluation.name": "helpfulness",
        "gen_ai.evaluation.score.value": 4.0,
        "gen_ai.evaluation.score.label": "helpful",
        "gen_ai.evaluation.explanation": "Answers the question directly and fully.",
        "gen_ai.response.id": "chatcmpl-abc",
    }


def test_bad_arguments_raise_value_error() -> None:
    client = openai.AsyncOpenAI(api_key="k", base_url="http://127.0.0.1:9/v1")
    rubric = builtin_rubric("helpfulness")
    with pytest.raises(ValueError, match="answer"):
        run(judge_call(client, model="m", rubric=rubric, prompt="p", answer=""))
    strict = rubric.model_copy(update={"requires_reference": True})
    with pytest.raises(ValueError, match="reference"):
        run(judge_call(client, model="m", rubric=strict, prompt="p", answer="a"))
    with pytest.raises(ValueError, match="attempts"):
        RetryPolicy(max_attempts=0)
