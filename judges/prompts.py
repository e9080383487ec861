"""Judge prompts, output schemas and verdict models for pointwise and pairwise judging.

Prompt layout follows G-Eval (reference §3.1): task, criteria with evaluation steps, anchored scale,
inputs, then the form to fill. The verdict asks for the reasoning *before* the score (CoT, reference
§3.3) and allows ``null`` for "cannot judge" (the UNKNOWN class, reference §3.3 / §5 (iii)).
Pairwise prompts follow MT-Bench (reference §3.2): answers A and B to the same prompt, a winner or
a tie, and an explicit instruction to ignore position and length.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict

from judges.rubrics import Rubric

Message = dict[str, str]


class PointwiseVerdict(BaseModel):
    """The judge's pointwise output: reasoning first, then the score (None = cannot judge)."""

    model_config = ConfigDict(strict=True, extra="forbid", frozen=True)

    reasoning: str
    score: int | None


class PairwiseVerdict(BaseModel):
    """The judge's pairwise output: reasoning first, then ``A``, ``B`` or ``tie``."""

    model_config = ConfigDict(strict=True, extra="forbid", frozen=True)

    reasoning: str
    winner: Literal["A", "B", "tie"]


def _scale_text(rubric: Rubric) -> str:
    lines = [
        f"- {level.score} ({level.label}): {level.description}" for level in rubric.scale.levels
    ]
    return "\n".join(lines)


def _reasoning(max_chars: int | None) -> dict[str, Any]:
    prop: dict[str, Any] = {"type": "string"}
    if max_chars is not None:
        prop["maxLength"] = max_chars
    return prop


def _reasoning_hint(max_chars: int | None) -> str:
    return "" if max_chars is None else f" Keep the reasoning under {max_chars} characters."


def pointwise_schema(rubric: Rubric, reasoning_max_chars: int | None = None) -> dict[str, Any]:
    """JSON schema of a pointwise verdict whose score is restricted to the rubric's scale.

    ``reasoning_max_chars`` adds ``maxLength`` to the reasoning (JSON Schema 2020-12 §6.3.1):
    servers with grammar-constrained decoding (vLLM) then cannot ramble into ``max_tokens``.
    """
    return {
        "type": "object",
        "properties": {
            "reasoning": _reasoning(reasoning_max_chars),
            "score": {
                "anyOf": [
                    {"type": "integer", "enum": list(rubric.scale.scores)},
                    {"type": "null"},
                ]
            },
        },
        "required": ["reasoning", "score"],
        "additionalProperties": False,
    }


def pairwise_schema(reasoning_max_chars: int | None = None) -> dict[str, Any]:
    """JSON schema of a pairwise verdict (``reasoning_max_chars`` as in pointwise_schema)."""
    return {
        "type": "object",
        "properties": {
            "reasoning": _reasoning(reasoning_max_chars),
            "winner": {"type": "string", "enum": ["A", "B", "tie"]},
        },
        "required": ["reasoning", "winner"],
        "additionalProperties": False,
    }


def _inputs(prompt: str, reference: str | None) -> list[str]:
    parts = [f"<prompt>\n{prompt}\n</prompt>"]
    if reference is not None:
        parts.append(f"<reference_answer>\n{reference}\n</reference_answer>")
    return parts


def pointwise_messages(
    rubric: Rubric,
    *,
    prompt: str,
    answer: str,
    reference: str | None,
    reasoning_max_chars: int | None = None,
) -> list[Message]:
    """Chat messages asking the judge to score ``answer`` to ``prompt`` under ``rubric``."""
    scores = ", ".join(str(s) for s in rubric.scale.scores)
    system = (
        "You are an impartial expert evaluator of AI assistant answers.\n\n"
        f"Criterion: {rubric.name} - {rubric.description}\n\n"
        f"{rubric.instructions.strip()}\n\n"
        f"Scale:\n{_scale_text(rubric)}\n\n"
        "If the inputs do not allow a judgement on this criterion, use null as the score.\n"
        "Respond with only a JSON object, no other text:\n"
        f'{{"reasoning": "<your step-by-step evaluation>", "score": <one of {scores}, or null>}}\n'
        "Write the reasoning first, then the score." + _reasoning_hint(reasoning_max_chars)
    )
    user = "\n\n".join(
        [*_inputs(prompt, reference), f"<answer>\n{answer}\n</answer>", "Evaluate the answer."]
    )
    return [{"role": "system", "content": system}, {"role": "user", "content": user}]


def pairwise_messages(
    rubric: Rubric,
    *,
    prompt: str,
    answer_a: str,
    answer_b: str,
    reference: str | None,
    reasoning_max_chars: int | None = None,
) -> list[Message]:
    """Chat messages asking the judge which of two answers to the same prompt is better."""
    system = (
        "You are an impartial expert evaluator comparing two AI assistant answers to the same "
        "prompt.\n\n"
        f"Criterion: {rubric.name} - {rubric.description}\n\n"
        f"{rubric.instructions.strip()}\n\n"
        f"Reference scale for this criterion:\n{_scale_text(rubric)}\n\n"
        "Decide which answer is better on this criterion. The order in which the answers appear "
        "and their length must not influence you. Answer tie when they are equally good.\n"
        "Respond with only a JSON object, no other text:\n"
        '{"reasoning": "<your step-by-step comparison>", "winner": "A" | "B" | "tie"}\n'
        "Write the reasoning first, then the winner." + _reasoning_hint(reasoning_max_chars)
    )
    user = "\n\n".join(
        [
            *_inputs(prompt, reference),
            f"<answer_a>\n{answer_a}\n</answer_a>",
            f"<answer_b>\n{answer_b}\n</answer_b>",
            "Compare the answers.",
        ]
    )
    return [{"role": "system", "content": system}, {"role": "user", "content": user}]
