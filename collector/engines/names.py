"""Metric names of each serving engine, mapped onto the fields of ``EngineSample``.

Data only; ``collector.engines.scrape`` does the parsing. Each entry lists, per canonical field,
the exposition sample names in priority order (current name first, then deprecated ones), with
the public source the names were taken from.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from enum import StrEnum

__all__ = ["ENGINES", "EngineKind", "EngineNames"]


class EngineKind(StrEnum):
    """Which serving engine produced a sample (detected from the metric-name prefix)."""

    VLLM = "vllm"
    TGI = "tgi"
    SGLANG = "sglang"
    LLAMACPP = "llamacpp"


@dataclass(frozen=True, slots=True)
class EngineNames:
    """Sample names per canonical field, in priority order (current name first, then deprecated)."""

    kind: EngineKind
    prefix: str
    ratios: Mapping[str, tuple[str, ...]]
    counts: Mapping[str, tuple[str, ...]]
    histograms: Mapping[str, tuple[str, ...]]
    floats: Mapping[str, tuple[str, ...]] = field(default_factory=dict)


# Ratio gauges (0..1) and floats (other gauges) are averaged across duplicate series of one label
# set; counts and counters are summed.
ENGINES: tuple[EngineNames, ...] = (
    # vLLM: docs/reference/otel-genai-otlp-webhooks.md §5 (vllm docs/design/metrics.md,
    # vllm/v1/metrics/loggers.py); current names checked against the vLLM 0.32 source
    # (v1/metrics/loggers.py, v1/spec_decode/metrics.py: labels model_name, engine).
    # Counters are scraped with their exposition suffix ``_total``.
    EngineNames(
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
    EngineNames(
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
    EngineNames(
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
    EngineNames(
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
