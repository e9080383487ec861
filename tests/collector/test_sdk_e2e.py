"""End to end with the real OpenTelemetry SDK and its OTLP exporters (HTTP protobuf and gRPC)
into a running collector, including the gateway + vLLM ``llm_request`` merge in both orders."""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence

import pytest
from opentelemetry import trace
from opentelemetry.exporter.otlp.proto.grpc.trace_exporter import (
    OTLPSpanExporter as GrpcExporter,
)
from opentelemetry.exporter.otlp.proto.http.trace_exporter import (
    OTLPSpanExporter as HttpExporter,
)
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor, SpanExporter, SpanExportResult
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from tests.conftest import LiveCollector

Exporter = Callable[[LiveCollector], SpanExporter]
EXPORTERS: dict[str, Exporter] = {
    "http": lambda lc: HttpExporter(endpoint=f"{lc.http_url}/v1/traces", timeout=10),
    "grpc": lambda lc: GrpcExporter(endpoint=lc.grpc_endpoint, insecure=True, timeout=10),
}


def record_spans(build: Callable[[TracerProvider, TracerProvider], None]) -> list[ReadableSpan]:
    """Create spans with two real SDK providers (gateway, vLLM) and capture them in memory."""
    mem = InMemorySpanExporter()
    gw = TracerProvider(resource=Resource.create({"service.name": "gateway"}))
    engine = TracerProvider(resource=Resource.create({"service.name": "vllm"}))
    for p in (gw, engine):
        p.add_span_processor(SimpleSpanProcessor(mem))
    build(gw, engine)
    return list(mem.get_finished_spans())


def gateway_and_engine(gw: TracerProvider, engine: TracerProvider) -> None:
    tracer = gw.get_tracer("driftline.gateway")
    vllm = engine.get_tracer("vllm.tracing.otel")
    t0 = time.time_ns()
    with tracer.start_as_current_span(
        "chat candidate-bad", kind=trace.SpanKind.CLIENT, start_time=t0, end_on_exit=False
    ) as s:
        s.set_attributes(
            {
                "gen_ai.operation.name": "chat",
                "gen_ai.provider.name": "vllm",
                "gen_ai.request.model": "candidate-bad",
                "gen_ai.response.id": "chatcmpl-e2e",
                "gen_ai.usage.input_tokens": 12,
                "gen_ai.usage.output_tokens": 9,
                "gen_ai.response.time_to_first_chunk": 0.07,
                "driftline.rollout": "support-assistant",
                "driftline.variant": "candidate-bad",
                "gen_ai.input.messages": '[{"role":"user",'
                '"parts":[{"type":"text","content":"hi"}]}]',
                "gen_ai.output.messages": '[{"role":"assistant","finish_reason":"stop",'
                '"parts":[{"type":"text","content":"hello"}]}]',
            }
        )
        with vllm.start_as_current_span(
            "llm_request", kind=trace.SpanKind.SERVER, start_time=t0 + 10**7, end_on_exit=False
        ) as e:
            e.set_attributes(
                {
                    "gen_ai.latency.time_to_first_token": 0.05,
                    "gen_ai.latency.e2e": 0.9,
                    "gen_ai.latency.time_in_queue": 0.002,
                    "gen_ai.latency.time_in_model_prefill": 0.045,
                    "gen_ai.latency.time_in_model_decode": 0.85,
                    "gen_ai.usage.prompt_tokens": 12,
                    "gen_ai.usage.completion_tokens": 9,
                    "gen_ai.request.id": "chatcmpl-e2e",
                }
            )
            e.end(end_time=t0 + 91 * 10**7)
        s.end(end_time=t0 + 10**9)


def export(exporter: SpanExporter, spans: Sequence[ReadableSpan]) -> None:
    assert exporter.export(spans) == SpanExportResult.SUCCESS
    exporter.shutdown()


@pytest.mark.parametrize("transport", ["http", "grpc"])
def test_sdk_exporter_stores_llm_calls(live_collector: LiveCollector, transport: str) -> None:
    def build(gw: TracerProvider, _engine: TracerProvider) -> None:
        tracer = gw.get_tracer("app")
        for i in range(25):
            with tracer.start_as_current_span("chat gpt-4o-mini", kind=trace.SpanKind.CLIENT) as s:
                s.set_attributes(
                    {
                        "gen_ai.operation.name": "chat",
                        "gen_ai.provider.name": "openai",
                        "gen_ai.request.model": "gpt-4o-mini",
                        "gen_ai.usage.input_tokens": 1000 + i,
                        "gen_ai.usage.output_tokens": 10,
                        "gen_ai.response.finish_reasons": ["stop"],
                    }
                )
        with tracer.start_as_current_span("not an llm call"):
            pass

    spans = record_spans(build)
    export(EXPORTERS[transport](live_collector), spans)
    calls = live_collector.calls()
    assert len(calls) == 25
    assert sorted(c["input_tokens"] for c in calls) == [1000 + i for i in range(25)]
    assert all(c["service_name"] == "gateway" and c["finish_reason"] == "stop" for c in calls)
    assert all(c["cost_usd"] is not None for c in calls)


@pytest.mark.parametrize("transport", ["http", "grpc"])
@pytest.mark.parametrize("order", ["engine_first", "gateway_first", "same_request"])
def test_gateway_and_vllm_spans_merge_into_one_call(
    live_collector: LiveCollector, transport: str, order: str
) -> None:
    spans = record_spans(gateway_and_engine)
    engine_span = next(s for s in spans if s.name == "llm_request")
    gw_span = next(s for s in spans if s.name != "llm_request")
    assert engine_span.parent is not None
    assert engine_span.parent.span_id == gw_span.context.span_id
    make = EXPORTERS[transport]
    if order == "engine_first":
        export(make(live_collector), [engine_span])
        export(make(live_collector), [gw_span])
    elif order == "gateway_first":
        export(make(live_collector), [gw_span])
        export(make(live_collector), [engine_span])
    else:
        export(make(live_collector), [engine_span, gw_span])
    export(make(live_collector), [engine_span])  # a retry changes nothing

    calls = live_collector.calls()
    assert len(calls) == 1, calls
    (c,) = calls
    assert c["span_id"] == format(gw_span.context.span_id, "016x")
    assert c["engine_span_id"] == format(engine_span.context.span_id, "016x")
    assert (c["variant"], c["rollout"]) == ("candidate-bad", "support-assistant")
    assert (c["queue_s"], c["prefill_s"], c["decode_s"]) == (0.002, 0.045, 0.85)
    assert c["ttft_s"] == 0.07  # client-observed TTFT from the gateway
    assert (c["input_tokens"], c["output_tokens"]) == (12, 9)
    assert c["e2e_s"] == 1.0  # the gateway span's duration
    assert c["tpot_s"] == pytest.approx((1.0 - 0.07) / 8)
    assert (c["input_text"], c["output_text"]) == ("hi", "hello")
    assert c["call_id"] == "chatcmpl-e2e"
    detail = live_collector.calls(span_id=c["engine_span_id"])
    assert [d["call_id"] for d in detail] == ["chatcmpl-e2e"]


def test_kpi_histograms_count_each_merged_call_once(live_collector: LiveCollector) -> None:
    import httpx
    from prometheus_client.parser import text_string_to_metric_families

    spans = record_spans(gateway_and_engine)
    engine_span = next(s for s in spans if s.name == "llm_request")
    gw_span = next(s for s in spans if s.name != "llm_request")
    export(EXPORTERS["http"](live_collector), [engine_span])
    export(EXPORTERS["http"](live_collector), [gw_span])
    text = httpx.get(f"{live_collector.http_url}/metrics").text
    counts = {
        s.labels.get("variant"): s.value
        for fam in text_string_to_metric_families(text)
        if fam.name == "driftline_e2e_seconds"
        for s in fam.samples
        if s.name.endswith("_count")
    }
    assert sum(counts.values()) == 1, counts
