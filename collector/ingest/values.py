"""Lenient, null-preserving coercion of attribute values (pure helpers of normalize.py)."""

from __future__ import annotations

import json
import math
from collections.abc import Iterable, Mapping
from typing import Any

#: provider spellings of finish reasons -> DESIGN.md's normalised set
#: (``stop``, ``length``, ``tool_calls``, ``content_filter``, ``error``); others kept lower-cased.
FINISH_REASON_MAP = {
    "tool_call": "tool_calls",
    "function_call": "tool_calls",
    "tool_use": "tool_calls",
    "max_tokens": "length",
    "max_output_tokens": "length",
    "model_length": "length",
    "end_turn": "stop",
    "stop_sequence": "stop",
    "eos": "stop",
    "eos_token": "stop",
    "complete": "stop",
    "safety": "content_filter",
    "recitation": "content_filter",
    "blocklist": "content_filter",
    "prohibited_content": "content_filter",
    "spii": "content_filter",
    "refusal": "content_filter",
}
_MISSING_SENTINEL = -1.0
#: token counts are stored as signed 64-bit integers (BigInteger)
MAX_TOKENS = 2**63 - 1
#: times are stored as signed 64-bit integers of ns; OTLP sends unsigned ones (fixed64)
MAX_UNIX_NANO = 2**63 - 1
#: column lengths of an evaluation's text fields in ``external_scores`` (checked against
#: :class:`collector.store.models.scores.ExternalScore` by tests/collector/test_spool_poison.py)
EVALUATION_TEXT_LIMITS = {"name": 128, "score_label": 128, "response_id": 512}


def time_error(what: str, unix_nano: int) -> str | None:
    """Why ``unix_nano`` cannot be stored (at or past 2**63 ns, the year 2262), naming
    ``what``; None when it can."""
    if unix_nano > MAX_UNIX_NANO:
        return (
            f"{what}: time_unix_nano {unix_nano} is past 2262 and does not fit a signed 64-bit "
            "integer"
        )
    return None


def evaluation_text_error(what: str, texts: Mapping[str, str | None]) -> str | None:
    """Why an evaluation's ``name`` / ``score_label`` / ``response_id`` cannot be stored: one
    longer than its column (:data:`EVALUATION_TEXT_LIMITS`; rejected, not truncated, since
    they identify); None when all fit."""
    for field, limit in EVALUATION_TEXT_LIMITS.items():
        value = texts.get(field)
        if value is not None and len(value) > limit:
            return f"{what}: {field} is longer than {limit} characters"
    return None


def first(attrs: Mapping[str, Any], keys: Iterable[str]) -> Any:
    """The value of the first key present (and not None) in ``attrs``; None otherwise."""
    for key in keys:
        value = attrs.get(key)
        if value is not None:
            return value
    return None


def to_int(value: Any) -> int | None:
    """An int from an int, an integral float or a numeric string; None otherwise."""
    if value is None or isinstance(value, bool):
        return None
    if isinstance(value, int):
        return value
    if isinstance(value, float):
        return int(value) if math.isfinite(value) and value.is_integer() else None
    if isinstance(value, str):
        s = value.strip()
        try:
            return int(s)
        except ValueError:
            try:
                f = float(s)
            except ValueError:
                return None
            return int(f) if math.isfinite(f) and f.is_integer() else None
    return None


def to_float(value: Any) -> float | None:
    """A finite float from a number or numeric string; None otherwise."""
    if value is None or isinstance(value, bool):
        return None
    try:
        f = float(value)
    except (TypeError, ValueError):
        return None
    return f if math.isfinite(f) else None


def tokens(attrs: Mapping[str, Any], keys: Iterable[str], flags: set[str]) -> int | None:
    """Token count from the first present key; a negative, unreadable or out-of-range
    (over the store's signed 64-bit integers) count is None and flags ``invalid_usage``.
    0 stays 0."""
    raw = first(attrs, keys)
    if raw is None:
        return None
    n = to_int(raw)
    if n is None or n < 0 or n > MAX_TOKENS:
        flags.add("invalid_usage")
        return None
    return n


def seconds(value: Any, flags: set[str]) -> float | None:
    """A duration in seconds; -1 (vLLM's "missing" sentinel) → None; other negative or
    non-finite values → None with the flag ``invalid_timing``."""
    if value is None:
        return None
    f = to_float(value)
    if f is None:
        flags.add("invalid_timing")
        return None
    if f < 0:
        if f != _MISSING_SENTINEL:
            flags.add("invalid_timing")
        return None
    return f


def finish_reasons(value: Any) -> list[str] | None:
    """Finish reasons from a string array, a JSON-encoded array (vLLM), a comma list or a
    single string, normalised (e.g. ``tool_call`` → ``tool_calls``, ``max_tokens`` → ``length``)."""
    if value is None:
        return None
    items: list[Any]
    if isinstance(value, list | tuple):
        items = list(value)
    elif isinstance(value, str):
        s = value.strip()
        if s.startswith("["):
            try:
                parsed = json.loads(s)
                items = parsed if isinstance(parsed, list) else [parsed]
            except ValueError:
                items = s.strip("[]").split(",")
        else:
            items = s.split(",")
    else:
        items = [value]
    out = []
    for item in items:
        if item is None:
            continue
        r = str(item).strip().strip("'\"").lower()
        if r:
            out.append(FINISH_REASON_MAP.get(r, r))
    return out or None
