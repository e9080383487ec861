"""Pairwise judging for rollouts: baseline vs candidate answers to the same prompt.

Every pair is judged twice with the positions swapped; an inconsistent pair counts as a tie
(MT-Bench ``play_a_match_pair``, Zheng et al. 2023; reference §3.2). The outcome is stated from the
candidate's side; ``score`` (win 1, tie ½, loss 0) averages to the win rate (wins + ½ ties) / n
of reference §3.3.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass
from typing import Literal, cast

import openai

from collector.retry import RetryPolicy
from judges.prompts import PairwiseVerdict, pairwise_messages, pairwise_schema
from judges.rubrics import Rubric
from judges.scoring import parse_verdict
from judges.transport import JudgePrice, OutputMode, OutputModeChoice, complete

Preferred = Literal["baseline", "candidate", "tie"]
Outcome = Literal["win", "tie", "loss"]
Order = Literal["baseline_first", "candidate_first"]


@dataclass(frozen=True)
class PairwiseJudgement:
    """One of the two orders: which answer the judge preferred, mapped back to the arms."""

    order: Order
    preferred: Preferred
    explanation: str
    output_mode: OutputMode
    latency_s: float
    attempts: int
    input_tokens: int | None
    output_tokens: int | None
    cost_usd: float | None
    raw_text: str


@dataclass(frozen=True)
class PairwiseResult:
    """A baseline-vs-candidate comparison judged in both orders.

    ``outcome`` is from the candidate's side; ``consistent`` is False when the two orders
    disagreed (then ``outcome`` is ``tie``). ``score``: win 1.0, tie 0.5, loss 0.0.
    Tokens and ``cost_usd`` sum both orders (None if either is unknown); ``elapsed_s`` is the
    wall time of the two concurrent requests (seconds).
    """

    rubric_name: str
    rubric_version: str
    rubric_fingerprint: str
    judge_model: str
    outcome: Outcome
    score: float
    consistent: bool
    judgements: tuple[PairwiseJudgement, PairwiseJudgement]
    elapsed_s: float
    input_tokens: int | None
    output_tokens: int | None
    cost_usd: float | None


_OUTCOME: dict[Preferred, Outcome] = {"candidate": "win", "tie": "tie", "baseline": "loss"}
_SCORE: dict[Outcome, float] = {"win": 1.0, "tie": 0.5, "loss": 0.0}


def _sum(values: list[int | None]) -> int | None:
    return None if any(v is None for v in values) else sum(v for v in values if v is not None)


def _sum_usd(values: list[float | None]) -> float | None:
    return None if any(v is None for v in values) else sum(v for v in values if v is not None)


def resolve_pair(first: Preferred, second: Preferred) -> tuple[Outcome, bool]:
    """Combine the two orders' preferences: (candidate outcome, consistent).

    Agreeing preferences give that outcome; disagreeing ones give a tie (MT-Bench convention).
    """
    if first == second:
        return _OUTCOME[first], True
    return "tie", False


async def _judge_order(
    client: openai.AsyncOpenAI,
    order: Order,
    *,
    model: str,
    rubric: Rubric,
    prompt: str,
    baseline: str,
    candidate: str,
    reference: str | None,
    price: JudgePrice | None,
    output_mode: OutputModeChoice,
    max_tokens: int,
    seed: int | None,
    retry: RetryPolicy | None,
    reasoning_max_chars: int | None = None,
) -> PairwiseJudgement:
    first, second = (baseline, candidate) if order == "baseline_first" else (candidate, baseline)
    completion = await complete(
        client,
        model=model,
        messages=pairwise_messages(
            rubric,
            prompt=prompt,
            answer_a=first,
            answer_b=second,
            reference=reference,
            reasoning_max_chars=reasoning_max_chars,
        ),
        schema_name=f"{rubric.name}_pairwise_verdict",
        schema=pairwise_schema(reasoning_max_chars),
        output_mode=output_mode,
        logprobs=False,
        max_tokens=max_tokens,
        seed=seed,
        retry=retry,
    )
    verdict = parse_verdict(completion.text, PairwiseVerdict)
    arm_a: Preferred = "baseline" if order == "baseline_first" else "candidate"
    arm_b: Preferred = "candidate" if order == "baseline_first" else "baseline"
    preferred: Preferred = {"A": arm_a, "B": arm_b, "tie": "tie"}[verdict.winner]
    return PairwiseJudgement(
        order=order,
        preferred=preferred,
        explanation=verdict.reasoning,
        output_mode=completion.output_mode,
        latency_s=completion.latency_s,
        attempts=completion.attempts,
        input_tokens=completion.input_tokens,
        output_tokens=completion.output_tokens,
        cost_usd=(
            price.cost_usd(completion.input_tokens, completion.output_tokens)
            if price is not None
            else None
        ),
        raw_text=completion.text,
    )


async def judge_pair(
    client: openai.AsyncOpenAI,
    *,
    model: str,
    rubric: Rubric,
    prompt: str,
    baseline: str,
    candidate: str,
    reference: str | None = None,
    price: JudgePrice | None = None,
    output_mode: OutputModeChoice = "auto",
    max_tokens: int = 1024,
    seed: int | None = None,
    retry: RetryPolicy | None = None,
    reasoning_max_chars: int | None = None,
) -> PairwiseResult:
    """Judge ``baseline`` vs ``candidate`` (answers to the same ``prompt``) in both orders.

    ``reasoning_max_chars`` caps each verdict's reasoning (see ``judges.prompts``).
    The two requests run concurrently. Raises ValueError naming the parameter for an empty
    ``model``, ``baseline`` or ``candidate``; JudgeParseError / JudgeUnavailableError /
    JudgeRequestError when either order fails (no partial verdict is returned).
    """
    for name, value in (("model", model), ("baseline", baseline), ("candidate", candidate)):
        if not value:
            raise ValueError(f"{name} must be non-empty")
    reference = reference if reference is not None else rubric.reference_answer
    loop = asyncio.get_running_loop()
    started = loop.time()
    orders: tuple[Order, Order] = ("baseline_first", "candidate_first")
    outcomes = await asyncio.gather(
        *(
            _judge_order(
                client,
                order,
                model=model,
                rubric=rubric,
                prompt=prompt,
                baseline=baseline,
                candidate=candidate,
                reference=reference,
                price=price,
                output_mode=output_mode,
                max_tokens=max_tokens,
                seed=seed,
                retry=retry,
                reasoning_max_chars=reasoning_max_chars,
            )
            for order in orders
        ),
        return_exceptions=True,  # wait for both orders so no failure is left unobserved
    )
    for failure in outcomes:
        if isinstance(failure, BaseException):
            raise failure
    first, second = cast("tuple[PairwiseJudgement, PairwiseJudgement]", tuple(outcomes))
    outcome, consistent = resolve_pair(first.preferred, second.preferred)
    return PairwiseResult(
        rubric_name=rubric.name,
        rubric_version=rubric.version,
        rubric_fingerprint=rubric.fingerprint,
        judge_model=model,
        outcome=outcome,
        score=_SCORE[outcome],
        consistent=consistent,
        judgements=(first, second),
        elapsed_s=loop.time() - started,
        input_tokens=_sum([first.input_tokens, second.input_tokens]),
        output_tokens=_sum([first.output_tokens, second.output_tokens]),
        cost_usd=_sum_usd([first.cost_usd, second.cost_usd]),
    )
