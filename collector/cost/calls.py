"""The cost of one LLM call and the data-quality flags that say how it was known.

Pure function over token counts, a price (or None) and the cost the instrumentation reported.
"""

from __future__ import annotations

from collector.cost.prices import ModelPrice, input_is_exclusive, token_cost


def call_cost(
    price: ModelPrice | None,
    *,
    operation: str | None,
    input_tokens: int | None,
    output_tokens: int | None,
    cached_input_tokens: int | None = None,
    cache_write_input_tokens: int | None = None,
    reasoning_output_tokens: int | None = None,
    reported_cost_usd: float | None = None,
) -> tuple[float | None, set[str]]:
    """(cost in USD or None, flags).

    * Priced model with known usage: :func:`~collector.cost.prices.token_cost`; flag
      ``input_exclusive_of_cache`` when cache counts exceed the input count.
    * Unknown token count (input, or output except for embeddings): flag ``usage_missing``;
      the cost is None unless reported.
    * Model without a price: the reported cost (flag ``cost_reported``), except a reported 0
      with non-zero tokens, which is an instrumentation that could not price the model (OpenLIT
      reports ``gen_ai.usage.cost = 0`` then): None with ``unpriced`` and
      ``reported_cost_ignored``. No reported cost: None with ``unpriced``.
    """
    flags: set[str] = set()
    embeddings_ok = operation == "embeddings" and input_tokens is not None
    if (input_tokens is None or output_tokens is None) and not embeddings_ok:
        flags.add("usage_missing")
    if price is None:
        if reported_cost_usd is None:
            flags.add("unpriced")
            return None, flags
        if reported_cost_usd == 0 and ((input_tokens or 0) > 0 or (output_tokens or 0) > 0):
            flags |= {"unpriced", "reported_cost_ignored"}
            return None, flags
        flags.add("cost_reported")
        return reported_cost_usd, flags
    if input_tokens is None or (output_tokens is None and operation != "embeddings"):
        return None, flags
    if input_is_exclusive(input_tokens, cached_input_tokens, cache_write_input_tokens):
        flags.add("input_exclusive_of_cache")
    cost = token_cost(
        price,
        input_tokens,
        output_tokens or 0,
        cached_input_tokens,
        cache_write_input_tokens,
        reasoning_output_tokens,
    )
    return cost, flags
