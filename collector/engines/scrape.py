"""Serving-engine metrics: parse a Prometheus text exposition into one ``EngineSample`` per engine.

Four engines are understood, each by its documented metric names (sources in ``ENGINES``):

* vLLM (``vllm:*``; current and deprecated names, e.g. ``vllm:kv_cache_usage_perc`` replacing
  ``vllm:gpu_cache_usage_perc`` and ``vllm:prefix_cache_*`` replacing ``vllm:gpu_prefix_cache_*``);
* Hugging Face TGI (``tgi_*``);
* SGLang (``sglang:*``);
* llama.cpp server (``llamacpp:*``).

Parsing uses prometheus-client's own text parser; nothing here is hand-rolled line splitting.
``parse_exposition`` is pure; ``collector.engines.rates.engine_rates`` derives windowed rates from
two samples of one engine; ``scrape`` is the only function doing I/O. A metric the engine does not
export is ``None``, never 0.
"""

from __future__ import annotations

import asyncio
import math
import time
from collections import defaultdict
from collections.abc import Iterable, Mapping
from dataclasses import dataclass

import httpx
from prometheus_client.parser import text_string_to_metric_families

from collector.engines.histogram import LatencyHistogram, histogram_from_series
from collector.engines.names import ENGINES, EngineKind, EngineNames
from collector.errors import CollectorError

__all__ = [
    "EngineKind",
    "EngineSample",
    "LatencyHistogram",
    "ScrapeError",
    "parse_exposition",
    "scrape",
]


class ScrapeError(CollectorError):
    """An engine ``/metrics`` endpoint could not be scraped or did not hold engine metrics."""

    def __init__(self, url: str, reason: str) -> None:
        super().__init__(f"scrape of {url} failed: {reason}")
        self.url = url
        self.reason = reason


@dataclass(frozen=True, slots=True)
class EngineSample:
    """One scrape of one engine (one ``model_name`` / ``engine`` label set), normalised.

    Gauges: ``kv_cache_usage`` is a fraction in [0, 1]; ``requests_running`` / ``requests_waiting``
    are request counts. ``*_total`` fields are monotonically increasing counters since the engine
    started (tokens, or events for ``preemptions_total`` / ``spec_decode_drafts_total``); feed two
    samples to ``collector.engines.rates.engine_rates`` for windowed rates. ``reported_*`` fields
    are
    ratios the engine computes itself (SGLang, vLLM V0), kept as reported. LoRA fields come from
    vLLM's ``vllm:lora_requests_info`` (the newest series). Histograms are cumulative, in seconds.
    Every field is ``None`` when the engine does not export it.
    """

    engine_kind: EngineKind
    model_name: str | None
    engine_index: str | None
    scraped_at_unix_s: float
    kv_cache_usage: float | None = None
    requests_running: int | None = None
    requests_waiting: int | None = None
    prefix_cache_queries_total: int | None = None
    prefix_cache_hits_total: int | None = None
    spec_decode_draft_tokens_total: int | None = None
    spec_decode_accepted_tokens_total: int | None = None
    spec_decode_drafts_total: int | None = None
    preemptions_total: int | None = None
    prompt_tokens_total: int | None = None
    generation_tokens_total: int | None = None
    reported_prefix_cache_hit_rate: float | None = None
    reported_spec_accept_rate: float | None = None
    reported_spec_accept_length: float | None = None
    lora_running_adapters: tuple[str, ...] | None = None
    lora_waiting_adapters: tuple[str, ...] | None = None
    lora_max: int | None = None
    ttft_s: LatencyHistogram | None = None
    itl_s: LatencyHistogram | None = None
    e2e_s: LatencyHistogram | None = None
    queue_s: LatencyHistogram | None = None

    @property
    def key(self) -> tuple[str, str | None, str | None]:
        """Identity pairing consecutive samples: ``(engine_kind, model_name, engine_index)``."""
        return (self.engine_kind.value, self.model_name, self.engine_index)


# prometheus-client's parser appends ``_total`` to the samples of a ``# TYPE x counter`` family
# that lack it (TGI's metrics-exporter output), so counter names above always end in ``_total``.
_GROUP_LABELS = ("model_name", "engine")
_LORA_INFO = "vllm:lora_requests_info"
_RATIO_TOLERANCE = 1e-6
_SeriesKey = tuple[str | None, str | None]  # (model_name, engine label)
_Series = list[tuple[dict[str, str], float]]  # one sample name's (labels, value) pairs


def _kind_of(name: str) -> EngineKind | None:
    for spec in ENGINES:
        if name.startswith(spec.prefix):
            return spec.kind
    return None


def _finite(value: float) -> float | None:
    return value if math.isfinite(value) else None


def _mean(values: list[float]) -> float | None:
    """Mean of the series, ``None`` when any value is not finite."""
    if not values or any(not math.isfinite(v) for v in values):
        return None
    return sum(values) / len(values)


def _ratio(values: list[float]) -> float | None:
    """Mean of the series; out of [0, 1] (beyond rounding) or non-finite is unknown, not clamped."""
    mean = _mean(values)
    if mean is None:
        return None
    if mean < -_RATIO_TOLERANCE or mean > 1 + _RATIO_TOLERANCE:
        return None
    return min(max(mean, 0.0), 1.0)


def _count(values: list[float]) -> int | None:
    """Sum of the series as an integer count; negative or non-finite is unknown."""
    if not values or any(not math.isfinite(v) or v < 0 for v in values):
        return None
    return round(sum(values))


def _first(names: tuple[str, ...], series: Mapping[str, _Series]) -> tuple[str, _Series] | None:
    for name in names:
        if series.get(name):
            return name, series[name]
    return None


def _lora_fields(samples: _Series, engine_index: str | None) -> dict[str, object]:
    """Newest ``vllm:lora_requests_info`` series (its value is a wall-clock timestamp).

    vLLM sets a new label combination each time the adapter set changes and never removes the old
    ones, so only the series with the largest value describes the present.
    """
    mine = [(lab, v) for lab, v in samples if lab.get("engine") in (None, engine_index)]
    if not mine:
        return {}
    labels, _ = max(mine, key=lambda pair: pair[1])

    def adapters(label: str) -> tuple[str, ...] | None:
        raw = labels.get(label)
        if raw is None:
            return None
        return tuple(a for a in (part.strip() for part in raw.split(",")) if a)

    max_lora = labels.get("max_lora")
    return {
        "lora_running_adapters": adapters("running_lora_adapters"),
        "lora_waiting_adapters": adapters("waiting_lora_adapters"),
        "lora_max": int(max_lora) if max_lora is not None and max_lora.isdigit() else None,
    }


def _llamacpp_prompt(fields: dict[str, object]) -> None:
    """llama.cpp counts processed and cached prompt tokens apart; queries = processed + cached."""
    processed, cached = fields.get("prompt_tokens_total"), fields.get("prefix_cache_hits_total")
    if isinstance(processed, int) and isinstance(cached, int):
        fields["prompt_tokens_total"] = processed + cached
        fields["prefix_cache_queries_total"] = processed + cached


def _build(
    spec: EngineNames,
    key: _SeriesKey,
    series: Mapping[str, _Series],
    lora: _Series,
    scraped_at_unix_s: float,
) -> EngineSample | None:
    fields: dict[str, object] = {}
    for target, names in spec.ratios.items():
        found = _first(names, series)
        if found is not None:
            fields[target] = _ratio([v for _, v in found[1]])
    for target, names in spec.floats.items():
        found = _first(names, series)
        if found is not None:
            fields[target] = _mean([v for _, v in found[1]])
    for target, names in spec.counts.items():
        found = _first(names, series)
        if found is not None:
            fields[target] = _count([v for _, v in found[1]])
    for target, names in spec.histograms.items():
        for name in names:
            hist = histogram_from_series(name, series)
            if hist is not None:
                fields[target] = hist
                break
    if not fields:
        return None
    if spec.kind is EngineKind.LLAMACPP:
        _llamacpp_prompt(fields)
    if fields.get("prefix_cache_hits_total") is None:
        fields["prefix_cache_queries_total"] = None  # queries alone give no hit rate
    if spec.kind is EngineKind.VLLM and lora:
        fields.update(_lora_fields(lora, key[1]))
    return EngineSample(
        engine_kind=spec.kind,
        model_name=key[0],
        engine_index=key[1],
        scraped_at_unix_s=scraped_at_unix_s,
        **fields,  # type: ignore[arg-type]
    )


def _group(
    samples: Iterable[tuple[str, dict[str, str], float]],
) -> tuple[dict[tuple[EngineKind, _SeriesKey], dict[str, _Series]], _Series]:
    groups: dict[tuple[EngineKind, _SeriesKey], dict[str, _Series]] = defaultdict(
        lambda: defaultdict(list)
    )
    lora: _Series = []
    for name, labels, value in samples:
        kind = _kind_of(name)
        if kind is None:
            continue
        if name == _LORA_INFO:
            lora.append((labels, value))
            continue
        key = (labels.get(_GROUP_LABELS[0]), labels.get(_GROUP_LABELS[1]))
        groups[(kind, key)][name].append((labels, value))
    return groups, lora


def parse_exposition(text: str, *, scraped_at_unix_s: float) -> list[EngineSample]:
    """Parse a Prometheus text exposition (format 0.0.4) into engine samples.

    Args:
        text: the ``/metrics`` body.
        scraped_at_unix_s: wall-clock time of the scrape, seconds since the Unix epoch.

    Returns:
        One ``EngineSample`` per engine kind and ``(model_name, engine)`` label set that has at
        least one known metric, sorted by ``key``; ``[]`` when the text holds no engine metrics.
        Series of one label set that differ only in other labels (e.g. SGLang ``dp_rank``) are
        summed, ratio gauges averaged.

    Raises:
        ValueError: ``text`` is not a Prometheus exposition (message from the parser), or
            ``scraped_at_unix_s`` is not a finite number.
    """
    if not math.isfinite(scraped_at_unix_s):
        raise ValueError("scraped_at_unix_s must be a finite number of seconds")
    try:
        flat = [
            (s.name, dict(s.labels), float(s.value))
            for family in text_string_to_metric_families(text)
            for s in family.samples
        ]
    except (ValueError, IndexError, KeyError, TypeError) as exc:
        raise ValueError(f"text is not a Prometheus exposition: {exc}") from exc
    groups, lora = _group(flat)
    specs = {spec.kind: spec for spec in ENGINES}
    out = []
    for (kind, key), series in groups.items():
        sample = _build(specs[kind], key, series, lora, scraped_at_unix_s)
        if sample is not None:
            out.append(sample)
    return sorted(out, key=lambda s: tuple("" if part is None else part for part in s.key))


async def scrape(
    client: httpx.AsyncClient,
    url: str,
    timeout_s: float,
    *,
    max_bytes: int = 32 * 1024 * 1024,
) -> list[EngineSample]:
    """GET an engine's ``/metrics`` and parse it.

    Args:
        client: the caller's HTTP client (connection pooling, TLS and auth headers are its job).
        url: full metrics URL, e.g. ``http://127.0.0.1:8100/metrics``.
        timeout_s: overall deadline in seconds for connect + response + body.
        max_bytes: largest body accepted, in bytes.

    Returns:
        The samples of ``parse_exposition`` (at least one), stamped with the time the body
        was received.

    Raises:
        ValueError: ``timeout_s`` or ``max_bytes`` is not positive.
        ScrapeError: timeout, connection error, non-200 status, an oversize body, a body that is
            not a Prometheus exposition, or one without any vLLM/TGI/SGLang/llama.cpp metric.
    """
    if not (math.isfinite(timeout_s) and timeout_s > 0):
        raise ValueError("timeout_s must be a positive number of seconds")
    if max_bytes <= 0:
        raise ValueError("max_bytes must be positive")
    try:
        async with asyncio.timeout(timeout_s):
            body = await _fetch(client, url, timeout_s, max_bytes)
    except TimeoutError as exc:
        raise ScrapeError(url, f"timed out after {timeout_s:g} s") from exc
    except httpx.TimeoutException as exc:
        raise ScrapeError(url, f"timed out after {timeout_s:g} s ({type(exc).__name__})") from exc
    except httpx.HTTPError as exc:
        raise ScrapeError(url, f"{type(exc).__name__}: {exc}") from exc
    received_at = time.time()
    try:
        text = body.decode("utf-8")
        samples = parse_exposition(text, scraped_at_unix_s=received_at)
    except (UnicodeDecodeError, ValueError) as exc:
        raise ScrapeError(url, f"body is not a Prometheus text exposition: {exc}") from exc
    if not samples:
        raise ScrapeError(url, "no vLLM, TGI, SGLang or llama.cpp metrics in the exposition")
    return samples


async def _fetch(client: httpx.AsyncClient, url: str, timeout_s: float, max_bytes: int) -> bytes:
    headers = {"Accept": "text/plain;version=0.0.4;q=1.0, */*;q=0.1"}
    async with client.stream("GET", url, headers=headers, timeout=timeout_s) as response:
        if response.status_code != 200:
            raise ScrapeError(url, f"HTTP {response.status_code}")
        chunks: list[bytes] = []
        size = 0
        async for chunk in response.aiter_bytes():
            size += len(chunk)
            if size > max_bytes:
                raise ScrapeError(url, f"body larger than {max_bytes} bytes")
            chunks.append(chunk)
    return b"".join(chunks)
