"""One judge completion over an OpenAI-compatible API: output-format fallback, logprobs, retries.

The caller owns the ``openai.AsyncOpenAI`` client; this module only calls it (docs/STYLE.md: the
judge never builds a client from the environment). The client's own retries are switched off with
``with_options(max_retries=0)`` so that the retry policy here is the only one.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Literal, cast

import openai
from openai.types.chat import ChatCompletion, ChatCompletionMessageParam
from tenacity import AsyncRetrying, RetryCallState, retry_if_exception, stop_after_attempt

from collector.retry import RetryPolicy, parse_retry_after
from judges.errors import JudgeParseError, JudgeRequestError, JudgeUnavailableError

OutputMode = Literal["json_schema", "json_object", "text"]
OutputModeChoice = Literal["auto", "json_schema", "json_object", "text"]
_FALLBACK: tuple[OutputMode, ...] = ("json_schema", "json_object", "text")


#: the judge client's retries: 5 tries, 0.5 s doubling to at most 30 s (no jitter, so tests and
#: replicas behave the same), 60 s per request; ``Retry-After`` raises the wait (capped)
JUDGE_RETRY = RetryPolicy(
    max_attempts=5, base_delay_s=0.5, max_delay_s=30.0, jitter=0.0, request_timeout_s=60.0
)


@dataclass(frozen=True)
class JudgePrice:
    """Judge model price in USD per million input and output tokens."""

    input_usd_per_mtok: float
    output_usd_per_mtok: float

    def __post_init__(self) -> None:
        if self.input_usd_per_mtok < 0 or self.output_usd_per_mtok < 0:
            raise ValueError("input_usd_per_mtok and output_usd_per_mtok must be >= 0")

    def cost_usd(self, input_tokens: int | None, output_tokens: int | None) -> float | None:
        """Cost in USD of one request; None when a token count is unknown."""
        if input_tokens is None or output_tokens is None:
            return None
        return (
            input_tokens * self.input_usd_per_mtok + output_tokens * self.output_usd_per_mtok
        ) / 1e6


@dataclass(frozen=True)
class Completion:
    """A successful judge completion.

    ``latency_s``: duration of the successful request; ``elapsed_s``: wall time including retries
    and format fallbacks; ``attempts``: HTTP requests made in all.
    """

    text: str
    logprobs: tuple[Any, ...] | None
    output_mode: OutputMode
    logprobs_used: bool
    response_model: str | None
    response_id: str | None
    input_tokens: int | None
    output_tokens: int | None
    latency_s: float
    elapsed_s: float
    attempts: int


def _is_transient(exc: BaseException) -> bool:
    if isinstance(exc, openai.APITimeoutError | openai.APIConnectionError):
        return True
    if isinstance(exc, openai.APIStatusError):
        return exc.status_code == 429 or exc.status_code >= 500
    return False


def _waiter(policy: RetryPolicy) -> Any:
    def wait(state: RetryCallState) -> float:
        backoff = policy.base_delay_s * policy.multiplier ** (state.attempt_number - 1)
        exc = state.outcome.exception() if state.outcome is not None else None
        if isinstance(exc, openai.APIStatusError):
            after = parse_retry_after(exc.response.headers.get("retry-after"), time.time())
            if after is not None:
                backoff = max(backoff, after)
        return min(policy.max_delay_s, backoff)

    return wait


def _response_format(mode: OutputMode, name: str, schema: dict[str, Any]) -> dict[str, Any] | None:
    if mode == "json_schema":
        return {
            "type": "json_schema",
            "json_schema": {"name": name, "strict": True, "schema": schema},
        }
    if mode == "json_object":
        return {"type": "json_object"}
    return None


def _plans(mode: OutputModeChoice, logprobs: bool) -> list[tuple[OutputMode, bool]]:
    modes = _FALLBACK if mode == "auto" else (mode,)
    return [(m, lp) for m in modes for lp in ((True, False) if logprobs else (False,))]


def _next_plan(
    plans: list[tuple[OutputMode, bool]], current: tuple[OutputMode, bool], message: str
) -> tuple[OutputMode, bool] | None:
    """After a 400/422: drop logprobs if the server named them, else move to the next format."""
    mode, lp = current
    remaining = plans[plans.index(current) + 1 :]
    if lp and "logprob" in message.lower() and (mode, False) in remaining:
        return (mode, False)
    for plan in remaining:
        if plan[0] != mode and plan[1] == lp:
            return plan
    return remaining[0] if remaining else None


async def complete(
    client: openai.AsyncOpenAI,
    *,
    model: str,
    messages: Sequence[dict[str, str]],
    schema_name: str,
    schema: dict[str, Any],
    output_mode: OutputModeChoice = "auto",
    logprobs: bool = True,
    top_logprobs: int = 5,
    max_tokens: int = 1024,
    seed: int | None = None,
    retry: RetryPolicy | None = None,
) -> Completion:
    """Run one judge completion at temperature 0 and return its text, logprobs and usage.

    ``output_mode="auto"`` tries ``json_schema``, then ``json_object``, then plain text, moving on
    when the server rejects a request with 400/422 (when the error names logprobs, the same format
    is first retried without them). A fixed mode makes no fallback across formats.

    Raises JudgeUnavailableError after ``retry.max_attempts`` transient failures (429/5xx/timeout/
    connection), JudgeRequestError for other refusals (401/403/404, or 400 on every format), and
    JudgeParseError when the answer is empty, truncated (finish_reason ``length``) or a refusal.
    """
    policy = retry or JUDGE_RETRY
    if top_logprobs < 1 or top_logprobs > 20:
        raise ValueError("top_logprobs must be in 1..20")
    quiet = client.with_options(max_retries=0, timeout=policy.request_timeout_s)
    plans = _plans(output_mode, logprobs)
    plan: tuple[OutputMode, bool] | None = plans[0]
    started = time.perf_counter()
    requests = 0
    while plan is not None:
        mode, use_lp = plan
        kwargs: dict[str, Any] = {"temperature": 0, "max_tokens": max_tokens}
        response_format = _response_format(mode, schema_name, schema)
        if response_format is not None:
            kwargs["response_format"] = response_format
        if use_lp:
            kwargs["logprobs"] = True
            kwargs["top_logprobs"] = top_logprobs
        if seed is not None:
            kwargs["seed"] = seed
        try:
            async for attempt in AsyncRetrying(
                retry=retry_if_exception(_is_transient),
                stop=stop_after_attempt(policy.max_attempts),
                wait=_waiter(policy),
                reraise=True,
            ):
                with attempt:
                    requests += 1
                    t0 = time.perf_counter()
                    response: ChatCompletion = await quiet.chat.completions.create(
                        model=model,
                        messages=cast("list[ChatCompletionMessageParam]", list(messages)),
                        **kwargs,
                    )
                    latency = time.perf_counter() - t0
        except (openai.BadRequestError, openai.UnprocessableEntityError) as exc:
            plan = _next_plan(plans, plan, str(exc))
            if plan is None:
                raise JudgeRequestError(f"judge {model!r} rejected every request: {exc}") from exc
            continue
        except openai.APIStatusError as exc:
            if _is_transient(exc):
                raise JudgeUnavailableError(
                    f"judge {model!r} failed {policy.max_attempts} times, "
                    f"last HTTP {exc.status_code}"
                ) from exc
            raise JudgeRequestError(
                f"judge {model!r} refused the request: HTTP {exc.status_code}"
            ) from exc
        except (openai.APITimeoutError, openai.APIConnectionError) as exc:
            raise JudgeUnavailableError(
                f"judge {model!r} unreachable after {policy.max_attempts} tries: {exc}"
            ) from exc
        return _completion(response, mode, use_lp, latency, time.perf_counter() - started, requests)
    raise JudgeRequestError(f"judge {model!r}: no output mode left to try")


def _completion(
    response: ChatCompletion,
    mode: OutputMode,
    use_lp: bool,
    latency_s: float,
    elapsed_s: float,
    attempts: int,
) -> Completion:
    if not response.choices:
        raise JudgeParseError("judge returned no choices", raw_text="")
    choice = response.choices[0]
    text = choice.message.content or ""
    refusal = getattr(choice.message, "refusal", None)
    if refusal:
        raise JudgeParseError(f"judge refused to answer: {refusal}", raw_text=refusal)
    if choice.finish_reason == "length":
        raise JudgeParseError("judge output truncated (finish_reason=length)", raw_text=text)
    if not text.strip():
        raise JudgeParseError("judge returned empty content", raw_text=text)
    token_logprobs = None
    if choice.logprobs is not None and choice.logprobs.content:
        token_logprobs = tuple(choice.logprobs.content)
    usage = response.usage
    return Completion(
        text=text,
        logprobs=token_logprobs,
        output_mode=mode,
        logprobs_used=use_lp,
        response_model=response.model or None,
        response_id=response.id or None,
        input_tokens=usage.prompt_tokens if usage is not None else None,
        output_tokens=usage.completion_tokens if usage is not None else None,
        latency_s=latency_s,
        elapsed_s=elapsed_s,
        attempts=attempts,
    )
