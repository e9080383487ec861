"""Strict parsing of judge output and the probability-weighted (G-Eval) score from token logprobs.

Parsing is strict: the whole output must be one JSON object (optionally inside a single fenced
code block) that validates against the verdict model. Nothing is guessed from free text, and a
failure raises JudgeParseError carrying the raw text (reference §3.3: count parse failures as a
judge-health metric).

G-Eval weighting (reference §3.1; Liu et al. 2023): score = Σ_s P(s)·s over the allowed scores,
with P(s) from the top-k logprobs of the score token renormalised over the valid labels.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, TypeVar

from pydantic import BaseModel, ValidationError

from judges.errors import JudgeParseError

V = TypeVar("V", bound=BaseModel)

_FENCE = re.compile(r"\A```(?:json)?[ \t]*\n(?P<body>.*)\n```\Z", re.DOTALL)
_SCORE_VALUE = re.compile(r'(?<!\\)"score"\s*:\s*(?P<value>-?\d+)')


def parse_verdict(text: str, model: type[V]) -> V:
    """Parse judge output ``text`` into ``model`` (a pydantic verdict model).

    Accepts exactly one JSON object, bare or as the only content of a ```json fenced block.
    Raises JudgeParseError (with ``raw_text``) for anything else or for a schema mismatch.
    """
    body = text.strip()
    fenced = _FENCE.match(body)
    if fenced is not None:
        body = fenced.group("body").strip()
    try:
        data = json.loads(body)
    except json.JSONDecodeError as exc:
        raise JudgeParseError(f"judge output is not JSON: {exc}", raw_text=text) from exc
    if not isinstance(data, dict):
        raise JudgeParseError("judge output is not a JSON object", raw_text=text)
    try:
        return model.model_validate(data)
    except ValidationError as exc:
        problems = "; ".join(
            f"{'.'.join(str(p) for p in e['loc']) or 'verdict'}: {e['msg']}" for e in exc.errors()
        )
        raise JudgeParseError(
            f"judge output does not match the verdict: {problems}", raw_text=text
        ) from exc


@dataclass(frozen=True)
class ScoreDistribution:
    """P(score) over the allowed scores (renormalised), its mean and entropy (nats).

    ``probabilities``: ((score, probability), ...) ascending by score, summing to 1.
    ``mass``: the probability the judge put on valid labels before renormalisation.
    """

    probabilities: tuple[tuple[int, float], ...]
    mean: float
    entropy: float
    mass: float


def _token_bytes(entry: Any) -> int:
    raw = getattr(entry, "bytes", None)
    if raw:
        return len(raw)
    return len(str(entry.token).encode("utf-8"))


def _score_token(text: str, tokens: Sequence[Any]) -> Any | None:
    """The logprob entry of the token holding the JSON ``"score"`` value, or None."""
    matches = list(_SCORE_VALUE.finditer(text))
    if not matches:
        return None
    match = matches[-1]
    target = len(text[: match.start("value")].encode("utf-8"))
    offset = 0
    for entry in tokens:
        size = _token_bytes(entry)
        if offset <= target < offset + size:
            return entry if str(entry.token).strip() == match.group("value") else None
        offset += size
    return None


def score_distribution(
    text: str, tokens: Sequence[Any] | None, allowed: Sequence[int]
) -> ScoreDistribution | None:
    """The judge's distribution over ``allowed`` scores from the score token's top-k logprobs.

    ``tokens``: the ``choices[0].logprobs.content`` entries (``token``, ``bytes``, ``logprob``,
    ``top_logprobs``). Returns None when logprobs are absent, the score token cannot be located
    as a token of its own, or no top-k candidate is a valid score.
    """
    if not tokens:
        return None
    entry = _score_token(text, tokens)
    if entry is None:
        return None
    candidates = list(getattr(entry, "top_logprobs", None) or [])
    if not candidates:
        candidates = [entry]
    valid = {str(s): s for s in allowed}
    weights: dict[int, float] = {}
    for candidate in candidates:
        score = valid.get(str(candidate.token).strip())
        if score is not None and candidate.logprob is not None:
            weights[score] = weights.get(score, 0.0) + math.exp(candidate.logprob)
    mass = sum(weights.values())
    if mass <= 0.0:
        return None
    probabilities = tuple((s, weights.get(s, 0.0) / mass) for s in sorted(allowed))
    mean = sum(s * p for s, p in probabilities)
    entropy = -sum(p * math.log(p) for _, p in probabilities if p > 0)
    return ScoreDistribution(
        probabilities=probabilities, mean=mean, entropy=entropy, mass=min(mass, 1.0)
    )
