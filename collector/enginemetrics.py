"""Serving-engine metrics: parse a Prometheus text exposition into one ``EngineSample`` per engine.

Four engines are understood, each by its documented metric names (sources in ``_ENGINES``):

* vLLM (``vllm:*``; current and deprecated names, e.g. ``vllm:kv_cache_usage_perc`` replacing
  ``vllm:gpu_cache_usage_perc`` and ``vllm:prefix_cache_*`` replacing ``vllm:gpu_prefix_cache_*``);
* Hugging Face TGI (``tgi_*``);
* SGLang (``sglang:*``);
* llama.cpp server (``llamacpp:*``).

Parsing uses prometheus-client's own text parser; nothing here is hand-rolled line splitting.
``parse_exposition`` is pure; ``engine_rates`` derives windowed rates from two samples of the same
engine; ``scrape`` is the only function doing I/O. A metric the engine does not export is ``None``,
never 0.
"""

from __future__ import annotations

import asyncio
import math
import time
from collections import defaultdict
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from enum import StrEnum

import httpx
from prometheus_client.parser import text_string_to_metric_families

from collector.enginehistogram import LatencyHistogram, histogram_from_series
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


class EngineKind(StrEnum):
    """Which serving engine produced a sample (detected from the metric-name prefix)."""

    VLLM = "vllm"
    TGI = "tgi"
    SGLANG = "sglang"
    LLAMACPP = "llamacpp"


@dataclass(frozen=True, slots=True)
class EngineSample:
    """One scrape of one engine (one ``model_name`` / ``engine`` label set), normalised.

    Gauges: ``kv_cache_usage`` is a fraction in [0, 1]; ``requests_running`` / ``requests_waiting``
    are request counts. ``*_total`` fields are monotonically increasing counters since the engine
    started (tokens, or events for ``preemptions_total`` / ``spec_decode_drafts_total``); feed two
    samples to ``collector.enginerates.engine_rates`` for windowed rates. ``reported_*`` fields are
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


@dataclass(frozen=True, slots=True)
class _EngineNames:
    """Sample names per canonical field, in priority order (current name first, then deprecated)."""

    kind: EngineKind
    prefix: str
    ratios: Mapping[str, tuple[str, ...]]
    counts: Mapping[str, tuple[str, ...]]
    histograms: Mapping[str, tuple[str, ...]]
    floats: Mapping[str, tuple[str, ...]] = field(default_factory=dict)


# Ratio gauges are averaged across duplicate series of one label set; counts and counters summed.
_ENGINES: tuple[_EngineNames, ...] = (
    # vLLM: shared/reference/otel-genai-otlp-webhooks.md §5 (vllm docs/design/metrics.md,
    # vllm/v1/metrics/loggers.py). Counters are scraped with their exposition suffix ``_total``.
    _EngineNames(
        kind=EngineKind.VLLM,
        prefix="vllm:",
        ratios={
            "kv_cache_usage": ("vllm:kv_cache_usage_perc", "vllm:gpu_cache_usage_perc"),
            "reported_prefix_cache_hit_rate": ("vllm:gpu_prefix_cache_hit_rate",),
        },
        counts={
            "requests_running": ("vllm:num_requests_running",),
            "requests_waiting": ("vllm:num_requests_waiting",),
            "prefix_cache_queries_total": (
                "vllm:prefix_cache_queries_total",
                "vllm:gpu_prefix_cache_queries_total",
            ),
            "prefix_cache_hits_total": (
                "vllm:prefix_cache_hits_total",
                "vllm:gpu_prefix_cache_hits_total",
            ),
            "spec_decode_draft_tokens_total": ("vllm:spec_decode_num_draft_tokens_total",),
            "spec_decode_accepted_tokens_total": ("vllm:spec_decode_num_accepted_tokens_total",),
            "spec_decode_drafts_total": ("vllm:spec_decode_num_drafts_total",),
            "preemptions_total": ("vllm:num_preemptions_total",),
            "prompt_tokens_total": ("vllm:prompt_tokens_total",),
            "generation_tokens_total": ("vllm:generation_tokens_total",),
        },
        histograms={
            "ttft_s": ("vllm:time_to_first_token_seconds",),
            # renamed from vllm:time_per_output_token_seconds (deprecated 0.11)
            "itl_s": ("vllm:inter_token_latency_seconds", "vllm:time_per_output_token_seconds"),
            "e2e_s": ("vllm:e2e_request_latency_seconds",),
            "queue_s": ("vllm:request_queue_time_seconds",),
        },
    ),
    # TGI: huggingface/text-generation-inference docs/source/reference/metrics.md. TGI has no
    # token counters; the ``_sum`` of the per-request token histograms is the running total.
    _EngineNames(
        kind=EngineKind.TGI,
        prefix="tgi_",
        ratios={},
        counts={
            "requests_running": ("tgi_batch_current_size",),
            "requests_waiting": ("tgi_queue_size",),
            "prompt_tokens_total": ("tgi_request_input_length_sum",),
            "generation_tokens_total": ("tgi_request_generated_tokens_sum",),
        },
        histograms={
            "itl_s": ("tgi_request_mean_time_per_token_duration",),
            "e2e_s": ("tgi_request_duration",),
            "queue_s": ("tgi_request_queue_duration",),
        },
    ),
    # SGLang: sgl-project/sglang python/sglang/srt/metrics/collector.py and
    # docs/references/production_metrics.md. ``cached_tokens_total`` counts prompt tokens served
    # from the radix cache, so against ``prompt_tokens_total`` it is vLLM's hits/queries pair.
    # A retraction is SGLang's preemption.
    _EngineNames(
        kind=EngineKind.SGLANG,
        prefix="sglang:",
        ratios={
            "kv_cache_usage": ("sglang:token_usage",),
            "reported_prefix_cache_hit_rate": ("sglang:cache_hit_rate",),
            "reported_spec_accept_rate": ("sglang:spec_accept_rate",),
        },
        floats={"reported_spec_accept_length": ("sglang:spec_accept_length",)},
        counts={
            "requests_running": ("sglang:num_running_reqs",),
            "requests_waiting": ("sglang:num_queue_reqs",),
            "prefix_cache_queries_total": ("sglang:prompt_tokens_total",),
            "prefix_cache_hits_total": ("sglang:cached_tokens_total",),
            "preemptions_total": ("sglang:num_retracted_requests_total",),
            "prompt_tokens_total": ("sglang:prompt_tokens_total",),
            "generation_tokens_total": ("sglang:generation_tokens_total",),
        },
        histograms={
            "ttft_s": ("sglang:time_to_first_token_seconds",),
            "itl_s": ("sglang:inter_token_latency_seconds", "sglang:time_per_output_token_seconds"),
            "e2e_s": ("sglang:e2e_request_latency_seconds",),
            "queue_s": ("sglang:queue_time_seconds",),
        },
    ),
    # llama.cpp: ggml-org/llama.cpp tools/server/README.md and server-task.cpp ``to_metrics``.
    # Its ``prompt_tokens_total`` excludes cached tokens ("processed, excluding cached"); see
    # ``_llamacpp_prompt``. ``tokens_drafted*`` are the speculative-decoding names of the
    # llama.cpp-based LLaMA Box server (gpustack/llama-box README), which keeps the prefix.
    _EngineNames(
        kind=EngineKind.LLAMACPP,
        prefix="llamacpp:",
        ratios={"kv_cache_usage": ("llamacpp:kv_cache_usage_ratio",)},
        counts={
            "requests_running": ("llamacpp:requests_processing",),
            "requests_waiting": ("llamacpp:requests_deferred",),
            "prefix_cache_hits_total": ("llamacpp:prompt_tokens_cached_total",),
            "spec_decode_draft_tokens_total": (
                "llamacpp:spec_decode_num_draft_tokens_total",
                "llamacpp:tokens_drafted_total",
            ),
            "spec_decode_accepted_tokens_total": (
                "llamacpp:spec_decode_num_accepted_tokens_total",
                "llamacpp:tokens_drafted_accepted_total",
            ),
            "spec_decode_drafts_total": ("llamacpp:spec_decode_num_drafts_total",),
            "prompt_tokens_total": ("llamacpp:prompt_tokens_total",),
            "generation_tokens_total": ("llamacpp:tokens_predicted_total",),
        },
        histograms={},
    ),
)

# prometheus-client's parser appends ``_total`` to the samples of a ``# TYPE x counter`` family
# that lack it (TGI's metrics-exporter output), so counter names above always end in ``_total``.
_GROUP_LABELS = ("model_name", "engine")
_LORA_INFO = "vllm:lora_requests_info"
_RATIO_TOLERANCE = 1e-6
_SeriesKey = tuple[str | None, str | None]  # (model_name, engine label)
_Series = list[tuple[dict[str, str], float]]  # one sample name's (labels, value) pairs


def _kind_of(name: str) -> EngineKind | None:
    for spec in _ENGINES:
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
    spec: _EngineNames,
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
    specs = {spec.kind: spec for spec in _ENGINES}
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
