"""Token price table and model-name normalisation.

Prices are USD per 1,000,000 tokens (``input``, ``cache_read_input``, ``cache_write_input``,
``output``). The shipped table (``prices.json``) is overridden model by model by a user file
(``DRIFTLINE_PRICES``) in the same format, e.g. ``tests/fixtures/cases/00_price_table.json``.
"""

from __future__ import annotations

import functools
import json
import re
from dataclasses import dataclass
from importlib import resources
from pathlib import Path
from typing import Any

from collector.errors import ConfigError

PER_TOKENS = 1_000_000
_DATE_SUFFIX = re.compile(r"[-@_](\d{4}-\d{2}-\d{2}|\d{8})$")
_BEDROCK_VERSION = re.compile(r"-v\d+:\d+$")
_VENDOR_DOT_PREFIX = re.compile(r"^(anthropic|meta|amazon|cohere|mistral|ai21|us|eu|apac)\.")


@dataclass(frozen=True, slots=True)
class ModelPrice:
    """USD per 1M tokens; a cache price of None falls back to the input price, a reasoning
    price of None to the output price."""

    input: float
    output: float
    cache_read_input: float | None = None
    cache_write_input: float | None = None
    reasoning_output: float | None = None


@functools.lru_cache(maxsize=4096)  # every span's model is looked up; a handful of names recur
def normalize_model_name(name: str) -> str:
    """Canonical spelling of a model name for pricing and grouping.

    Lower-cased; provider prefixes (``openai/``, ``anthropic.``, Bedrock region prefixes) and
    version/date suffixes (``-2024-08-06``, ``-20250514``, ``@20240620``, ``-v1:0``) removed.
    Never a prefix match: ``gpt-4o-mini`` stays ``gpt-4o-mini``.
    """
    n = name.strip().lower()
    if "/" in n:
        n = n.rsplit("/", 1)[1]
    while _VENDOR_DOT_PREFIX.match(n):
        n = _VENDOR_DOT_PREFIX.sub("", n, count=1)
    n = _BEDROCK_VERSION.sub("", n)
    n = _DATE_SUFFIX.sub("", n)
    return n


def _parse_price(model: str, spec: Any, source: str) -> ModelPrice:
    if not isinstance(spec, dict):
        raise ConfigError(f"DRIFTLINE_PRICES: {source}: price of {model!r} must be an object")

    def num(*keys: str) -> float | None:
        for key in keys:
            if key in spec and spec[key] is not None:
                value = spec[key]
                if isinstance(value, bool) or not isinstance(value, int | float) or value < 0:
                    raise ConfigError(
                        f"DRIFTLINE_PRICES: {source}: {model}.{key} must be a number >= 0"
                    )
                return float(value)
        return None

    inp, out = num("input"), num("output")
    if inp is None or out is None:
        raise ConfigError(f"DRIFTLINE_PRICES: {source}: {model!r} needs `input` and `output`")
    return ModelPrice(
        input=inp,
        output=out,
        cache_read_input=num("cache_read_input", "cached_input"),
        cache_write_input=num("cache_write_input", "cache_creation_input"),
        reasoning_output=num("reasoning_output"),
    )


def _parse_table(doc: Any, source: str) -> dict[str, ModelPrice]:
    if not isinstance(doc, dict):
        raise ConfigError(f"DRIFTLINE_PRICES: {source} must be a JSON object")
    models = doc.get("models", {k: v for k, v in doc.items() if not k.startswith("_")})
    if not isinstance(models, dict):
        raise ConfigError(f"DRIFTLINE_PRICES: {source}: `models` must be an object")
    return {normalize_model_name(k): _parse_price(k, v, source) for k, v in models.items()}


class PriceTable:
    """Model -> :class:`ModelPrice`, looked up by normalised name."""

    def __init__(self, prices: dict[str, ModelPrice]) -> None:
        self._prices = dict(prices)

    @classmethod
    def load(cls, user_file: Path | None = None) -> PriceTable:
        """The shipped table, overridden by ``user_file`` when given.

        Raises:
            ConfigError: the user file is missing or malformed (names DRIFTLINE_PRICES).
        """
        shipped = json.loads(resources.files("collector.cost").joinpath("prices.json").read_text())
        table = _parse_table(shipped, "shipped prices.json")
        if user_file is not None:
            try:
                doc = json.loads(Path(user_file).read_text())
            except (OSError, ValueError) as exc:
                raise ConfigError(f"DRIFTLINE_PRICES: cannot read {user_file}: {exc}") from None
            table.update(_parse_table(doc, str(user_file)))
        return cls(table)

    def lookup(self, *names: str | None) -> tuple[str | None, ModelPrice | None]:
        """The first of ``names`` that has a price, as (normalised name, price).

        When none has a price: (normalised first non-empty name, None).
        """
        first: str | None = None
        for name in names:
            if not name:
                continue
            norm = normalize_model_name(name)
            first = first or norm
            price = self._prices.get(norm)
            if price is not None:
                return norm, price
        return first, None

    def __contains__(self, name: str) -> bool:
        return normalize_model_name(name) in self._prices


def input_is_exclusive(
    input_tokens: int, cached_input_tokens: int | None, cache_write_input_tokens: int | None
) -> bool:
    """True when cache reads plus writes exceed the input count: the provider reported input
    *exclusive* of the cache (Anthropic's ``input_tokens``), not inclusive (OTel semconv:
    ``gen_ai.usage.input_tokens`` SHOULD include cached tokens; OpenAI ``prompt_tokens``)."""
    return (cached_input_tokens or 0) + (cache_write_input_tokens or 0) > input_tokens


def token_cost(
    price: ModelPrice,
    input_tokens: int,
    output_tokens: int,
    cached_input_tokens: int | None = None,
    cache_write_input_tokens: int | None = None,
    reasoning_output_tokens: int | None = None,
) -> float:
    """Cost in USD of one call.

    Input is inclusive of cached and cache-write tokens (semconv) unless the cache counts exceed
    it (:func:`input_is_exclusive`), when all of ``input_tokens`` is uncached. Output is
    inclusive of reasoning tokens (semconv, OpenAI ``completion_tokens``) unless reasoning
    exceeds it, when reasoning is billed on top. So, per 1e6 tokens::

        cost = uncached * p_in + cached * p_cache_read + cache_write * p_cache_write
               + (output - reasoning) * p_out + reasoning * p_reasoning
        uncached = input if exclusive else max(input - cached - cache_write, 0)
        output - reasoning := output when reasoning exceeds output
    """
    cached = cached_input_tokens or 0
    written = cache_write_input_tokens or 0
    if input_is_exclusive(input_tokens, cached, written):
        uncached = input_tokens
    else:
        uncached = input_tokens - cached - written
    reasoning = reasoning_output_tokens or 0
    visible = output_tokens if reasoning > output_tokens else output_tokens - reasoning
    p_read = price.cache_read_input if price.cache_read_input is not None else price.input
    p_write = price.cache_write_input if price.cache_write_input is not None else price.input
    p_reason = price.reasoning_output if price.reasoning_output is not None else price.output
    total = uncached * price.input + cached * p_read + written * p_write
    total += visible * price.output + reasoning * p_reason
    return total / PER_TOKENS
