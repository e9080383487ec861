"""The gateway's OpenTelemetry CLIENT span: exporter set-up and the attribute contract.

Attribute names follow the OTel GenAI semantic conventions v1.41 (inference client span,
``reference/otel-genai-otlp-webhooks.md`` §2.3; content in the §2.5 parts schema as JSON strings)
plus driftline keys the collector normalises: ``driftline.rollout``, ``driftline.variant``,
``driftline.itl.p50_s`` / ``driftline.itl.p95_s`` / ``driftline.itl.max_s`` (seconds),
``driftline.gateway.queue_s`` (seconds waiting for an engine slot), ``driftline.tenant``.
"""

from __future__ import annotations

import itertools
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import orjson
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import BatchSpanProcessor

from serving.settings import GatewaySettings

PROVIDER_NAME = "vllm"
TRACER_NAME = "driftline.serving.gateway"


def make_tracer_provider(settings: GatewaySettings) -> TracerProvider:
    """A TracerProvider exporting over OTLP (HTTP/protobuf or gRPC) with batching.

    With ``settings.gateway_otlp_endpoint`` None the provider records nothing remotely.
    The collector API key, when set, is sent as ``Authorization: Bearer <key>``.
    """
    provider = TracerProvider(resource=Resource.create({"service.name": settings.service_name}))
    endpoint = settings.gateway_otlp_endpoint
    if not endpoint:
        return provider
    headers: dict[str, str] = {}
    if settings.collector_api_key is not None:
        headers["authorization"] = f"Bearer {settings.collector_api_key.get_secret_value()}"
    if settings.gateway_otlp_protocol == "grpc":
        from opentelemetry.exporter.otlp.proto.grpc.trace_exporter import (
            OTLPSpanExporter as GrpcExporter,
        )

        target = endpoint.removeprefix("http://").removeprefix("https://")
        provider.add_span_processor(
            BatchSpanProcessor(
                GrpcExporter(
                    endpoint=target,
                    insecure=endpoint.startswith("http://"),
                    headers=headers or None,
                )
            )
        )
    else:
        from opentelemetry.exporter.otlp.proto.http.trace_exporter import (
            OTLPSpanExporter as HttpExporter,
        )

        provider.add_span_processor(
            BatchSpanProcessor(HttpExporter(endpoint=endpoint, headers=headers or None))
        )
    return provider


@dataclass(frozen=True)
class ItlSummary:
    """Inter-token latency distribution of one streamed response (seconds).

    Percentiles use linear interpolation between order statistics (Hyndman & Fan 1996, type 7,
    numpy's default). ``n`` is the number of gaps (token chunks - 1).
    """

    p50_s: float
    p95_s: float
    max_s: float
    n: int


def itl_summary(token_times: Sequence[float]) -> ItlSummary | None:
    """Summarise gaps between consecutive token arrival times (seconds, non-decreasing).

    Returns None with fewer than two tokens (no gap is known).

    Raises:
        ValueError: ``token_times`` decreases somewhere.
    """
    if len(token_times) < 2:
        return None
    gaps = [b - a for a, b in itertools.pairwise(token_times)]
    if min(gaps) < 0:
        raise ValueError("token_times: must be non-decreasing")
    gaps.sort()  # pure Python: numpy's per-call overhead is most of the cost at ~16 gaps
    return ItlSummary(
        p50_s=_type7(gaps, 0.50), p95_s=_type7(gaps, 0.95), max_s=gaps[-1], n=len(gaps)
    )


def _type7(xs: Sequence[float], q: float) -> float:
    """Quantile ``q`` of sorted ``xs`` by linear interpolation (Hyndman & Fan type 7)."""
    h = (len(xs) - 1) * q
    lo = int(h)
    hi = min(lo + 1, len(xs) - 1)
    return float(xs[lo] + (h - lo) * (xs[hi] - xs[lo]))


def _text_of(content: Any) -> list[dict[str, Any]]:
    """OpenAI message ``content`` (string or list of parts) -> semconv parts."""
    if content is None:
        return []
    if isinstance(content, str):
        return [{"type": "text", "content": content}]
    parts: list[dict[str, Any]] = []
    if isinstance(content, list):
        for p in content:
            if isinstance(p, dict) and p.get("type") == "text":
                parts.append({"type": "text", "content": p.get("text", "")})
            elif isinstance(p, dict) and p.get("type") == "image_url":
                url = (p.get("image_url") or {}).get("url", "")
                parts.append({"type": "uri", "modality": "image", "uri": url})
            elif isinstance(p, dict):
                parts.append({"type": str(p.get("type", "unknown"))})
    return parts


def input_messages_json(messages: Sequence[Mapping[str, Any]]) -> str:
    """OpenAI chat ``messages`` -> ``gen_ai.input.messages`` JSON (semconv §2.5 parts schema).

    Assistant ``tool_calls`` become ``tool_call`` parts; ``tool`` messages become
    ``tool_call_response`` parts.
    """
    out: list[dict[str, Any]] = []
    for m in messages:
        role = str(m.get("role", "user"))
        if role == "tool":
            parts: list[dict[str, Any]] = [
                {
                    "type": "tool_call_response",
                    "id": m.get("tool_call_id"),
                    "response": m.get("content"),
                }
            ]
        else:
            parts = _text_of(m.get("content"))
        for call in m.get("tool_calls") or []:
            fn = call.get("function") or {}
            args: Any = fn.get("arguments")
            if isinstance(args, str):
                try:
                    args = orjson.loads(args)
                except orjson.JSONDecodeError:
                    args = fn.get("arguments")
            parts.append(
                {
                    "type": "tool_call",
                    "id": call.get("id"),
                    "name": fn.get("name"),
                    "arguments": args,
                }
            )
        msg: dict[str, Any] = {"role": role, "parts": parts}
        if m.get("name"):
            msg["name"] = m["name"]
        out.append(msg)
    return orjson.dumps(out).decode()


def prompt_messages_json(prompt: Any) -> str:
    """A completions ``prompt`` (string or list of strings) -> ``gen_ai.input.messages`` JSON."""
    prompts = prompt if isinstance(prompt, list) else [prompt]
    return orjson.dumps(
        [{"role": "user", "parts": [{"type": "text", "content": str(p)}]} for p in prompts]
    ).decode()


def output_messages_json(texts: Mapping[int, str], finish_reasons: Mapping[int, str]) -> str:
    """Generated text per choice -> ``gen_ai.output.messages`` JSON (one message per choice).

    OpenAI's ``tool_calls`` finish reason maps to semconv's singular ``tool_call``.
    """
    out = []
    for idx in sorted(set(texts) | set(finish_reasons)):
        reason = finish_reasons.get(idx, "error")
        out.append(
            {
                "role": "assistant",
                "parts": [{"type": "text", "content": texts.get(idx, "")}],
                "finish_reason": "tool_call" if reason == "tool_calls" else reason,
            }
        )
    return orjson.dumps(out).decode()


def request_attributes(
    *,
    operation: str,
    variant: str,
    rollout: str | None,
    body: Mapping[str, Any],
    max_tokens: int,
    user_id: str | None,
    session_id: str | None,
    tenant: str | None,
    server_address: str | None,
    server_port: int | None,
    capture_content: bool,
) -> dict[str, Any]:
    """Attributes known when the request is sent (semconv §2.3 names; None values omitted)."""
    attrs: dict[str, Any] = {
        "gen_ai.operation.name": operation,
        "gen_ai.provider.name": PROVIDER_NAME,
        "gen_ai.request.model": variant,
        "gen_ai.request.stream": bool(body.get("stream", False)),
        "gen_ai.request.max_tokens": int(max_tokens),
        "gen_ai.conversation.id": session_id,
        "user.id": user_id,
        "driftline.variant": variant,
        "driftline.rollout": rollout,
        "driftline.tenant": tenant,
        "server.address": server_address,
        "server.port": server_port,
    }
    for key, attr, cast in (
        ("temperature", "gen_ai.request.temperature", float),
        ("top_p", "gen_ai.request.top_p", float),
        ("seed", "gen_ai.request.seed", int),
        ("frequency_penalty", "gen_ai.request.frequency_penalty", float),
        ("presence_penalty", "gen_ai.request.presence_penalty", float),
    ):
        if isinstance(body.get(key), int | float) and not isinstance(body.get(key), bool):
            attrs[attr] = cast(body[key])
    n = body.get("n")
    if isinstance(n, int) and n != 1:
        attrs["gen_ai.request.choice.count"] = n
    stop = body.get("stop")
    if isinstance(stop, str):
        attrs["gen_ai.request.stop_sequences"] = [stop]
    elif isinstance(stop, list) and all(isinstance(s, str) for s in stop):
        attrs["gen_ai.request.stop_sequences"] = list(stop)
    if capture_content:
        if operation == "chat" and isinstance(body.get("messages"), list):
            attrs["gen_ai.input.messages"] = input_messages_json(body["messages"])
        elif operation == "text_completion" and "prompt" in body:
            attrs["gen_ai.input.messages"] = prompt_messages_json(body["prompt"])
    return {k: v for k, v in attrs.items() if v is not None}


@dataclass(frozen=True)
class CallOutcome:
    """What the engine answered, as the gateway saw it (unknown values are None).

    Attributes:
        response_id: OpenAI ``id`` (e.g. ``chatcmpl-...``).
        response_model: OpenAI ``model`` of the response (the adapter name for LoRA variants).
        texts: choice index -> generated text.
        finish_reasons: choice index -> finish reason as the engine sent it.
        input_tokens, output_tokens, cached_input_tokens: token counts from ``usage``.
        time_to_first_chunk_s: seconds from the gateway receiving the request to the first
            chunk carrying generated text (streaming only).
        itl: inter-token latency summary (streaming only, >= 2 token chunks).
    """

    response_id: str | None = None
    response_model: str | None = None
    texts: Mapping[int, str] | None = None
    finish_reasons: Mapping[int, str] | None = None
    input_tokens: int | None = None
    output_tokens: int | None = None
    cached_input_tokens: int | None = None
    time_to_first_chunk_s: float | None = None
    itl: ItlSummary | None = None


def response_attributes(outcome: CallOutcome, *, capture_content: bool) -> dict[str, Any]:
    """Attributes known once the response is complete (None values omitted).

    ``gen_ai.response.finish_reasons`` is a string array in choice order (semconv §2.3).
    """
    reasons = outcome.finish_reasons or {}
    attrs: dict[str, Any] = {
        "gen_ai.response.id": outcome.response_id,
        "gen_ai.response.model": outcome.response_model,
        "gen_ai.usage.input_tokens": outcome.input_tokens,
        "gen_ai.usage.output_tokens": outcome.output_tokens,
        "gen_ai.usage.cache_read.input_tokens": outcome.cached_input_tokens,
        "gen_ai.response.time_to_first_chunk": outcome.time_to_first_chunk_s,
    }
    if reasons:
        attrs["gen_ai.response.finish_reasons"] = [reasons[i] for i in sorted(reasons)]
    if outcome.itl is not None:
        attrs["driftline.itl.p50_s"] = outcome.itl.p50_s
        attrs["driftline.itl.p95_s"] = outcome.itl.p95_s
        attrs["driftline.itl.max_s"] = outcome.itl.max_s
    if capture_content and (outcome.texts or reasons):
        attrs["gen_ai.output.messages"] = output_messages_json(outcome.texts or {}, reasons)
    return {k: v for k, v in attrs.items() if v is not None}
