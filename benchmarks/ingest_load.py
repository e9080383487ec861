"""The shared LLM-span load of the ingest benchmarks: OTLP request bodies built by the real
OpenTelemetry SDK and encoded with the OTLP exporter's own encoder, each span a chat call with
both the gen_ai semantic conventions and the OpenInference keys (~3 KB a span)."""

from __future__ import annotations

import json

import numpy as np
from opentelemetry import trace
from opentelemetry.exporter.otlp.proto.common.trace_encoder import encode_spans
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from benchmarks.ingest import WORDS

SPANS_PER_REQUEST = 100
MODELS = ("gpt-4o-mini", "gpt-4o", "claude-sonnet-4")


def _text(rng: np.random.Generator, chars: int) -> str:
    words = rng.choice(WORDS, size=chars // 4)
    return " ".join(str(w) for w in words)[:chars]


def _parts(role: str, content: str) -> str:
    return json.dumps([{"role": role, "parts": [{"type": "text", "content": content}]}])


def llm_span_attributes(rng: np.random.Generator) -> dict[str, str | int | float | list[str]]:
    """Attributes of one chat call: OTel gen_ai semconv plus the OpenInference LLM keys.

    ~700-char prompt and ~300-char answer, each present in both vocabularies (JSON strings);
    token counts in tokens, time to first chunk in seconds.
    """
    model = str(rng.choice(MODELS))
    prompt, answer = _text(rng, 700), _text(rng, 300)
    tin, tout = int(rng.integers(50, 2000)), int(rng.integers(1, 500))
    session = f"sess-{int(rng.integers(1, 500))}"
    return {
        "gen_ai.operation.name": "chat",
        "gen_ai.provider.name": "openai",
        "gen_ai.request.model": model,
        "gen_ai.response.model": model + "-2024-08-06",
        "gen_ai.response.id": f"chatcmpl-{int(rng.integers(2**62)):016x}",
        "gen_ai.usage.input_tokens": tin,
        "gen_ai.usage.output_tokens": tout,
        "gen_ai.response.finish_reasons": ["stop"],
        "gen_ai.response.time_to_first_chunk": float(rng.uniform(0.05, 0.8)),
        "gen_ai.request.temperature": 0.2,
        "gen_ai.conversation.id": session,
        "session.id": session,
        "user.id": f"user-{int(rng.integers(1, 200))}",
        "gen_ai.input.messages": _parts("user", prompt),
        "gen_ai.output.messages": _parts("assistant", answer),
        "openinference.span.kind": "LLM",
        "llm.system": "openai",
        "llm.provider": "openai",
        "llm.model_name": model,
        "llm.invocation_parameters": json.dumps({"temperature": 0.2}),
        "llm.token_count.prompt": tin,
        "llm.token_count.completion": tout,
        "llm.token_count.total": tin + tout,
        "input.value": json.dumps(
            {"model": model, "messages": [{"role": "user", "content": prompt}]}
        ),
        "input.mime_type": "application/json",
        "output.value": answer,
        "output.mime_type": "text/plain",
    }


def build_bodies(requests: int, rng: np.random.Generator) -> list[bytes]:
    """``requests`` encoded ExportTraceServiceRequest bodies of 100 LLM spans each (bytes).

    Every span is its own trace (fresh ids) and carries gen_ai and OpenInference attributes.
    Raises ValueError if ``requests`` < 1.
    """
    if requests < 1:
        raise ValueError(f"requests must be >= 1, got {requests}")
    mem = InMemorySpanExporter()
    resource = Resource.create(
        {"service.name": "support-bot", "openinference.project.name": "support-bot"}
    )
    provider = TracerProvider(resource=resource)
    provider.add_span_processor(SimpleSpanProcessor(mem))
    tracer = provider.get_tracer("openinference.instrumentation.openai")
    bodies = []
    for _ in range(requests):
        mem.clear()
        for _ in range(SPANS_PER_REQUEST):
            attrs = llm_span_attributes(rng)
            name = f"chat {attrs['gen_ai.request.model']}"
            with tracer.start_as_current_span(name, kind=trace.SpanKind.CLIENT) as span:
                span.set_attributes(attrs)
        bodies.append(encode_spans(mem.get_finished_spans()).SerializeToString())
    return bodies
