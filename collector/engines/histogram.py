"""Cumulative Prometheus histograms from engine ``/metrics``: snapshot, window delta, quantile.

Used by ``collector.engines.scrape`` (parsing) and ``collector.engines.rates`` (windowed rates).
Pure functions; no I/O.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass

__all__ = ["LatencyHistogram", "histogram_delta", "histogram_from_series", "histogram_quantile"]


@dataclass(frozen=True, slots=True)
class LatencyHistogram:
    """A cumulative latency histogram (or summary) in seconds.

    ``buckets`` holds ``(upper_bound_s, cumulative_count)`` pairs sorted by bound, the last bound
    being ``math.inf``; it is empty when the engine exports a summary instead. ``count`` is the
    number of observations and ``sum_s`` their total in seconds; each ``None`` when not exported.
    """

    buckets: tuple[tuple[float, float], ...]
    count: float | None
    sum_s: float | None

    @property
    def mean_s(self) -> float | None:
        """Mean observation in seconds since the engine started, ``None`` without observations."""
        if self.count is None or self.sum_s is None or self.count <= 0:
            return None
        return self.sum_s / self.count


_Series = list[tuple[dict[str, str], float]]


def _total(series: _Series | None) -> float | None:
    if not series or any(not math.isfinite(v) for _, v in series):
        return None
    return sum(v for _, v in series)


def histogram_from_series(name: str, series: Mapping[str, _Series]) -> LatencyHistogram | None:
    """Assemble histogram ``name`` from its ``_bucket`` / ``_sum`` / ``_count`` samples.

    Args:
        name: the family name, e.g. ``vllm:time_to_first_token_seconds``.
        series: sample name -> list of ``(labels, value)`` of one engine label set. Buckets with
            the same ``le`` from several series (other labels) are added up.

    Returns:
        The histogram, or ``None`` when none of its samples is present or a bucket bound is not a
        number.
    """
    per_bound: dict[float, float] = {}
    for labels, value in series.get(f"{name}_bucket", ()):
        try:
            bound = float(labels["le"])
        except (KeyError, ValueError):
            return None
        per_bound[bound] = per_bound.get(bound, 0.0) + value
    count = _total(series.get(f"{name}_count"))
    sum_s = _total(series.get(f"{name}_sum"))
    if not per_bound and count is None and sum_s is None:
        return None
    buckets = tuple(sorted(per_bound.items()))
    if buckets and count is None and buckets[-1][0] == math.inf:
        count = buckets[-1][1]
    return LatencyHistogram(buckets=buckets, count=count, sum_s=sum_s)


def histogram_delta(
    previous: LatencyHistogram, current: LatencyHistogram
) -> LatencyHistogram | None:
    """Observations made between two snapshots of one cumulative histogram.

    Returns:
        ``current - previous`` bucket by bucket (and for count and sum), or ``None`` when the bucket
        bounds differ or any cumulative value went down (engine restart: a counter reset).
    """
    if [b for b, _ in previous.buckets] != [b for b, _ in current.buckets]:
        return None
    buckets = []
    for (bound, before), (_, after) in zip(previous.buckets, current.buckets, strict=True):
        if after < before:
            return None
        buckets.append((bound, after - before))

    def diff(before: float | None, after: float | None) -> float | None:
        if before is None or after is None:
            return None
        return after - before

    count = diff(previous.count, current.count)
    sum_s = diff(previous.sum_s, current.sum_s)
    if (count is not None and count < 0) or (sum_s is not None and sum_s < 0):
        return None
    return LatencyHistogram(buckets=tuple(buckets), count=count, sum_s=sum_s)


def histogram_quantile(q: float, histogram: LatencyHistogram) -> float | None:
    """Estimate the ``q``-quantile (seconds) of a bucketed histogram.

    The algorithm is Prometheus' ``histogram_quantile`` (prometheus/promql/quantile.go,
    ``bucketQuantile``): find the bucket whose cumulative count reaches ``q * total`` and
    interpolate linearly inside it, taking 0 as the lower bound of the first bucket when its upper
    bound is positive; a rank in the ``+Inf`` bucket returns the largest finite bound.

    Args:
        q: quantile in [0, 1].
        histogram: cumulative buckets (usually a ``histogram_delta`` over a window).

    Returns:
        The estimate in seconds, or ``None`` without buckets, without a ``+Inf`` bucket, or with
        no observations.

    Raises:
        ValueError: ``q`` is outside [0, 1].
    """
    if not (0.0 <= q <= 1.0):
        raise ValueError("q must be in [0, 1]")
    buckets = histogram.buckets
    if not buckets or buckets[-1][0] != math.inf:
        return None
    total = buckets[-1][1]
    if total <= 0:
        return None
    rank = q * total
    previous_bound, previous_count = 0.0, 0.0
    for index, (bound, cumulative) in enumerate(buckets):
        if cumulative >= rank:
            if bound == math.inf:
                return buckets[-2][0] if len(buckets) > 1 else None
            lower = previous_bound if index > 0 or bound > 0 else bound
            in_bucket = cumulative - previous_count
            if in_bucket <= 0:
                return bound
            return lower + (bound - lower) * (rank - previous_count) / in_bucket
        previous_bound, previous_count = bound, cumulative
    return None
