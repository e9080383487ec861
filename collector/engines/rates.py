"""Windowed engine rates from two consecutive ``EngineSample`` scrapes of the same engine.

Pure functions; no I/O. Counters are cumulative since engine start, so every rate is a ratio of
deltas over the window between the two scrapes (PromQL ``rate(a[w]) / rate(b[w])`` with ``w`` the
scrape interval). A delta that goes negative means the engine restarted (a counter reset): the
rates that need it are ``None`` and ``counter_reset`` is set.
"""

from __future__ import annotations

from dataclasses import dataclass

from collector.engines.histogram import LatencyHistogram, histogram_delta, histogram_quantile
from collector.engines.scrape import EngineSample

__all__ = ["EngineRates", "engine_rates"]

_COUNTERS = (
    "prefix_cache_queries_total",
    "prefix_cache_hits_total",
    "spec_decode_draft_tokens_total",
    "spec_decode_accepted_tokens_total",
    "spec_decode_drafts_total",
    "preemptions_total",
    "prompt_tokens_total",
    "generation_tokens_total",
)


@dataclass(frozen=True, slots=True)
class EngineRates:
    """Rates over the window ``(previous.scraped_at, current.scraped_at]`` of one engine.

    Fractions are in [0, 1]; ``*_per_s`` are per second of wall clock; latencies in seconds.
    ``None`` means unknown: metric not exported, a zero denominator, or a counter reset.
    """

    interval_s: float
    counter_reset: bool
    prefix_cache_hit_rate: float | None
    spec_decode_acceptance_rate: float | None
    spec_decode_mean_acceptance_length: float | None
    prompt_tokens_per_s: float | None
    generation_tokens_per_s: float | None
    preemptions_per_s: float | None
    ttft_mean_s: float | None
    ttft_p50_s: float | None
    ttft_p95_s: float | None
    itl_mean_s: float | None
    itl_p95_s: float | None
    e2e_mean_s: float | None
    e2e_p95_s: float | None
    queue_mean_s: float | None


def _delta(before: int | None, after: int | None) -> int | None:
    """Counter increase, ``None`` when unknown or when it went down (reset)."""
    if before is None or after is None or after < before:
        return None
    return after - before


def _ratio(numerator: int | None, denominator: int | None) -> float | None:
    if numerator is None or denominator is None or denominator == 0:
        return None
    return numerator / denominator


def _window(
    before: LatencyHistogram | None, after: LatencyHistogram | None
) -> LatencyHistogram | None:
    if before is None or after is None:
        return None
    return histogram_delta(before, after)


def _quantile(q: float, window: LatencyHistogram | None) -> float | None:
    return None if window is None else histogram_quantile(q, window)


def _mean(window: LatencyHistogram | None) -> float | None:
    return None if window is None else window.mean_s


def engine_rates(previous: EngineSample, current: EngineSample) -> EngineRates:
    """Derive windowed rates from two scrapes of one engine.

    Formulas (ratios of counter deltas, as in vLLM docs/design/metrics.md and
    docs/reference/otel-genai-otlp-webhooks.md §5):

    * prefix-cache hit rate = Δhits / Δqueries (token counts);
    * spec-decode acceptance rate = Δaccepted_tokens / Δdraft_tokens;
    * mean acceptance length = 1 + Δaccepted_tokens / Δdrafts (tokens per verification step);
    * ``*_per_s`` = Δcounter / interval_s;
    * latency mean = Δsum / Δcount and quantiles by Prometheus ``histogram_quantile`` over the
      per-bucket deltas (``collector.engines.histogram``).

    Each is ``None`` when a delta is unknown, its denominator delta is 0, or a counter went down.

    Args:
        previous: the earlier sample.
        current: the later sample of the same engine (same ``key``).

    Returns:
        ``EngineRates`` for the window.

    Raises:
        ValueError: ``current`` is not the same engine as ``previous`` or not scraped later.
    """
    if current.key != previous.key:
        raise ValueError(f"current: engine {current.key} differs from previous {previous.key}")
    interval_s = current.scraped_at_unix_s - previous.scraped_at_unix_s
    if interval_s <= 0:
        raise ValueError("current: scraped_at_unix_s must be later than previous's")
    deltas = {n: _delta(getattr(previous, n), getattr(current, n)) for n in _COUNTERS}
    reset = any(
        getattr(previous, n) is not None
        and getattr(current, n) is not None
        and getattr(current, n) < getattr(previous, n)
        for n in _COUNTERS
    )
    ttft = _window(previous.ttft_s, current.ttft_s)
    itl = _window(previous.itl_s, current.itl_s)
    e2e = _window(previous.e2e_s, current.e2e_s)
    queue = _window(previous.queue_s, current.queue_s)
    for before, after, window in (
        (previous.ttft_s, current.ttft_s, ttft),
        (previous.itl_s, current.itl_s, itl),
        (previous.e2e_s, current.e2e_s, e2e),
        (previous.queue_s, current.queue_s, queue),
    ):
        reset = reset or (before is not None and after is not None and window is None)

    def per_s(name: str) -> float | None:
        value = deltas[name]
        return None if value is None else value / interval_s

    drafts_ratio = _ratio(
        deltas["spec_decode_accepted_tokens_total"], deltas["spec_decode_drafts_total"]
    )
    return EngineRates(
        interval_s=interval_s,
        counter_reset=reset,
        prefix_cache_hit_rate=_ratio(
            deltas["prefix_cache_hits_total"], deltas["prefix_cache_queries_total"]
        ),
        spec_decode_acceptance_rate=_ratio(
            deltas["spec_decode_accepted_tokens_total"], deltas["spec_decode_draft_tokens_total"]
        ),
        spec_decode_mean_acceptance_length=None if drafts_ratio is None else 1 + drafts_ratio,
        prompt_tokens_per_s=per_s("prompt_tokens_total"),
        generation_tokens_per_s=per_s("generation_tokens_total"),
        preemptions_per_s=per_s("preemptions_total"),
        ttft_mean_s=_mean(ttft),
        ttft_p50_s=_quantile(0.5, ttft),
        ttft_p95_s=_quantile(0.95, ttft),
        itl_mean_s=_mean(itl),
        itl_p95_s=_quantile(0.95, itl),
        e2e_mean_s=_mean(e2e),
        e2e_p95_s=_quantile(0.95, e2e),
        queue_mean_s=_mean(queue),
    )
