"""Agent-style traces made with the real OpenTelemetry SDK, sent to the collector as OTLP
protobuf: ``invoke_agent`` -> (chat, execute_tool, chat), plus an orphan whose parent is absent."""

from __future__ import annotations

import random
import time
from typing import Any

from opentelemetry import trace
from opentelemetry.exporter.otlp.proto.common.trace_encoder import encode_spans
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.sdk.trace.id_generator import IdGenerator

from tests.conftest import wait_for

PROTOBUF = {"content-type": "application/x-protobuf"}


def _chat(
    tracer: trace.Tracer,
    t: int,
    *,
    session: str,
    user: str,
    prompt: str,
    answer: str,
    tokens: tuple[int, int],
    error: bool = False,
) -> None:
    with tracer.start_as_current_span(
        "chat gpt-4o-mini", kind=trace.SpanKind.CLIENT, start_time=t, end_on_exit=False
    ) as s:
        s.set_attributes(
            {
                "gen_ai.operation.name": "chat",
                "gen_ai.provider.name": "openai",
                "gen_ai.request.model": "gpt-4o-mini",
                "gen_ai.usage.input_tokens": tokens[0],
                "gen_ai.usage.output_tokens": tokens[1],
                "gen_ai.conversation.id": session,
                "user.id": user,
                "gen_ai.input.messages": '[{"role":"user","parts":[{"type":"text","content":"'
                + prompt
                + '"}]}]',
                "gen_ai.output.messages": '[{"role":"assistant","finish_reason":"stop",'
                '"parts":[{"type":"text","content":"' + answer + '"}]}]',
            }
        )
        if error:
            s.set_status(trace.Status(trace.StatusCode.ERROR, "boom"))
        s.end(end_time=t + 400_000_000)


def agent_run(
    provider: TracerProvider,
    *,
    session: str = "conv-1",
    user: str = "alice",
    t0: int | None = None,
    question: str = "What is the capital of France?",
    answer: str = "Paris is the capital of France.",
    tool_error: bool = False,
) -> None:
    """One agent run: invoke_agent (1.5 s) with chat, execute_tool, chat children."""
    tracer = provider.get_tracer("agent-app")
    t = t0 if t0 is not None else time.time_ns()
    with tracer.start_as_current_span(
        "invoke_agent trip-planner", kind=trace.SpanKind.INTERNAL, start_time=t, end_on_exit=False
    ) as agent:
        agent.set_attributes(
            {
                "gen_ai.operation.name": "invoke_agent",
                "gen_ai.agent.name": "trip-planner",
                "gen_ai.conversation.id": session,
            }
        )
        _chat(
            tracer,
            t + 10_000_000,
            session=session,
            user=user,
            prompt=question,
            answer="calling get_weather",
            tokens=(20, 5),
        )
        with tracer.start_as_current_span(
            "execute_tool get_weather", start_time=t + 450_000_000, end_on_exit=False
        ) as tool:
            tool.set_attributes(
                {"gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": "get_weather"}
            )
            if tool_error:
                tool.set_status(trace.Status(trace.StatusCode.ERROR, "tool failed"))
            tool.end(end_time=t + 600_000_000)
        _chat(
            tracer,
            t + 700_000_000,
            session=session,
            user=user,
            prompt=question,
            answer=answer,
            tokens=(40, 12),
        )
        agent.end(end_time=t + 1_500_000_000)


def orphan(provider: TracerProvider, t0: int) -> tuple[str, str]:
    """A retrieval span whose parent (span id ``00000000000000aa``) is never sent."""
    tracer = provider.get_tracer("rag-app")
    trace_id = 0x0AF7651916CD43DD8448EB211C80319C
    parent = trace.NonRecordingSpan(
        trace.SpanContext(trace_id, 0xAA, is_remote=True, trace_flags=trace.TraceFlags(1))
    )
    ctx = trace.set_span_in_context(parent)
    with tracer.start_as_current_span(
        "retrieve docs", context=ctx, start_time=t0, end_on_exit=False
    ) as s:
        s.set_attributes({"openinference.span.kind": "RETRIEVER"})
        s.end(end_time=t0 + 200_000_000)
    return f"{trace_id:032x}", "00000000000000aa"


class SeededIds(IdGenerator):
    """Deterministic ids: the same seed re-creates the same trace (an OTLP retry / update)."""

    def __init__(self, seed: int) -> None:
        self.rng = random.Random(seed)

    def generate_span_id(self) -> int:
        return self.rng.getrandbits(64) or 1

    def generate_trace_id(self) -> int:
        return self.rng.getrandbits(128) or 1


def record(build: Any, service: str = "agent-svc", seed: int | None = None) -> list[ReadableSpan]:
    """Spans made by ``build(provider)`` (ids from ``seed`` when given)."""
    mem = InMemorySpanExporter()
    provider = TracerProvider(
        resource=Resource.create({"service.name": service}),
        id_generator=SeededIds(seed) if seed is not None else None,
    )
    provider.add_span_processor(SimpleSpanProcessor(mem))
    build(provider)
    return list(mem.get_finished_spans())


def send(client: Any, spans: list[ReadableSpan], *, expect_calls: int | None = None) -> None:
    """POST ``spans`` as OTLP protobuf; wait until ``expect_calls`` calls are stored."""
    body = encode_spans(spans).SerializeToString()
    r = client.post("/v1/traces", content=body, headers=PROTOBUF)
    assert r.status_code == 200, r.text
    if expect_calls is not None:
        wait_for(
            lambda: (
                len(client.get("/api/v1/calls", params={"limit": 1000}).json()["items"])
                >= expect_calls
            )
        )
