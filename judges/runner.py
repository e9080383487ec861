"""Pointwise LLM-as-judge scoring of one call under one rubric.

``judge_call`` receives its ``openai.AsyncOpenAI`` client (never built from the environment), asks
for a JSON verdict (json_schema → json_object → strict plain-text parse), uses token logprobs for a
probability-weighted score when the server returns them (G-Eval, reference §3.1), retries transient
failures, and records judge model, rubric name + version, latency, tokens and cost.
"""

from __future__ import annotations

from dataclasses import dataclass

import openai

from judges.errors import JudgeParseError
from judges.prompts import PointwiseVerdict, pointwise_messages, pointwise_schema
from judges.rubrics import Rubric
from judges.scoring import parse_verdict, score_distribution
from judges.transport import (
    JudgePrice,
    OutputMode,
    OutputModeChoice,
    RetryPolicy,
    complete,
)

UNKNOWN_LABEL = "unknown"


@dataclass(frozen=True)
class JudgeResult:
    """One pointwise judgement.

    Scores: ``discrete_score`` is the score the judge wrote (None = it could not judge, label
    ``unknown``); ``weighted_score`` is Σ_s P(s)·s from logprobs (None without logprobs);
    ``score`` is ``weighted_score`` when known, else ``discrete_score`` — never 0 for "unknown".
    For pass/fail rubrics scores are 0 (fail) / 1 (pass), so ``weighted_score`` is P(pass).
    ``score_probabilities``: ((score, P), ...) ascending; ``score_entropy`` in nats.
    Units: ``latency_s`` (successful request) and ``elapsed_s`` (including retries) in seconds;
    tokens as reported by the server (None when not reported); ``cost_usd`` in USD (None when no
    price was given or usage is unknown).
    """

    rubric_name: str
    rubric_version: str
    rubric_fingerprint: str
    judge_model: str
    response_model: str | None
    response_id: str | None
    score: float | None
    discrete_score: int | None
    weighted_score: float | None
    score_probabilities: tuple[tuple[int, float], ...] | None
    score_entropy: float | None
    label: str
    explanation: str
    output_mode: OutputMode
    logprobs_used: bool
    latency_s: float
    elapsed_s: float
    attempts: int
    input_tokens: int | None
    output_tokens: int | None
    cost_usd: float | None
    raw_text: str


async def judge_call(
    client: openai.AsyncOpenAI,
    *,
    model: str,
    rubric: Rubric,
    prompt: str,
    answer: str,
    reference: str | None = None,
    price: JudgePrice | None = None,
    output_mode: OutputModeChoice = "auto",
    logprobs: bool = True,
    top_logprobs: int = 5,
    max_tokens: int = 1024,
    seed: int | None = None,
    retry: RetryPolicy | None = None,
    reasoning_max_chars: int | None = None,
) -> JudgeResult:
    """Score ``answer`` to ``prompt`` with judge ``model`` under ``rubric``.

    ``reference`` overrides ``rubric.reference_answer``. ``output_mode``: ``auto`` negotiates the
    best structured output the server accepts; pin it to ``result.output_mode`` (and ``logprobs``
    to ``result.logprobs_used``) on later calls to skip the negotiation. ``reasoning_max_chars``
    caps the verdict's reasoning (schema ``maxLength`` plus an instruction in the prompt).

    Raises ValueError naming the parameter (empty ``model`` / ``answer``, or a rubric that
    ``requires_reference`` without one); JudgeParseError (with ``raw_text``) when the output is
    not a valid verdict or the score is off the rubric's scale; JudgeUnavailableError /
    JudgeRequestError from the transport (``judges.transport.complete``).
    """
    if not model:
        raise ValueError("model must be a non-empty model name")
    if not answer:
        raise ValueError("answer must be non-empty")
    reference = reference if reference is not None else rubric.reference_answer
    if rubric.requires_reference and reference is None:
        raise ValueError(f"reference is required by rubric {rubric.name!r}")
    completion = await complete(
        client,
        model=model,
        messages=pointwise_messages(
            rubric,
            prompt=prompt,
            answer=answer,
            reference=reference,
            reasoning_max_chars=reasoning_max_chars,
        ),
        schema_name=f"{rubric.name}_verdict",
        schema=pointwise_schema(rubric, reasoning_max_chars),
        output_mode=output_mode,
        logprobs=logprobs,
        top_logprobs=top_logprobs,
        max_tokens=max_tokens,
        seed=seed,
        retry=retry,
    )
    verdict = parse_verdict(completion.text, PointwiseVerdict)
    if verdict.score is not None and verdict.score not in rubric.scale.scores:
        raise JudgeParseError(
            f"score {verdict.score} is not on the {rubric.name} scale {list(rubric.scale.scores)}",
            raw_text=completion.text,
        )
    distribution = None
    if verdict.score is not None:
        distribution = score_distribution(completion.text, completion.logprobs, rubric.scale.scores)
    weighted = distribution.mean if distribution is not None else None
    score = weighted if weighted is not None else verdict.score
    return JudgeResult(
        rubric_name=rubric.name,
        rubric_version=rubric.version,
        rubric_fingerprint=rubric.fingerprint,
        judge_model=model,
        response_model=completion.response_model,
        response_id=completion.response_id,
        score=float(score) if score is not None else None,
        discrete_score=verdict.score,
        weighted_score=weighted,
        score_probabilities=distribution.probabilities if distribution is not None else None,
        score_entropy=distribution.entropy if distribution is not None else None,
        label=(
            rubric.scale.label_for(verdict.score) if verdict.score is not None else UNKNOWN_LABEL
        ),
        explanation=verdict.reasoning,
        output_mode=completion.output_mode,
        logprobs_used=completion.logprobs is not None,
        latency_s=completion.latency_s,
        elapsed_s=completion.elapsed_s,
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
