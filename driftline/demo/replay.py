"""Synthetic span replay for ``driftline demo --replay`` (no vLLM needed).

Sample spans go through the real OpenTelemetry SDK exporter: OpenAI-style semconv client spans,
and gateway spans with their vLLM ``llm_request`` children (merged into one call record by the
collector). Everything it sends is labelled ``service.name=driftline-demo-replay``.
"""

from __future__ import annotations

import random
import threading
import time

DEMO_SERVICE = "driftline-demo-replay"


def replay(endpoint: str, stop: threading.Event, rng: random.Random, rate_per_s: float) -> None:
    """Send sample spans through the real OTLP/HTTP exporter until ``stop`` is set."""
    from opentelemetry import trace
    from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
    from opentelemetry.sdk.resources import Resource
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import BatchSpanProcessor

    def provider(service: str) -> TracerProvider:
        p = TracerProvider(resource=Resource.create({"service.name": service}))
        p.add_span_processor(
            BatchSpanProcessor(OTLPSpanExporter(endpoint=endpoint), schedule_delay_millis=500)
        )
        return p

    app, gateway, engine = (
        provider(DEMO_SERVICE),
        provider(f"{DEMO_SERVICE}-gateway"),
        provider(f"{DEMO_SERVICE}-vllm"),
    )
    app_t = app.get_tracer("opentelemetry.instrumentation.openai_v2")
    gw_t = gateway.get_tracer("driftline.gateway")
    vllm_t = engine.get_tracer("vllm.tracing.otel")
    try:
        while not stop.is_set():
            now = time.time_ns()
            out_tokens = rng.randint(20, 300)
            ttft = rng.lognormvariate(-2.3, 0.4)
            tpot = rng.uniform(0.015, 0.04)
            e2e = ttft + tpot * (out_tokens - 1)
            if rng.random() < 0.5:
                model = rng.choice(["gpt-4o-mini", "gpt-4o", "claude-sonnet-4"])
                s = app_t.start_span(f"chat {model}", kind=trace.SpanKind.CLIENT, start_time=now)
                s.set_attributes(
                    {
                        "gen_ai.operation.name": "chat",
                        "gen_ai.provider.name": "openai",
                        "gen_ai.request.model": model,
                        "gen_ai.usage.input_tokens": rng.randint(50, 1500),
                        "gen_ai.usage.output_tokens": out_tokens,
                        "gen_ai.response.time_to_first_chunk": ttft,
                        "gen_ai.response.finish_reasons": [rng.choice(["stop"] * 9 + ["length"])],
                        "user.id": f"user-{rng.randint(1, 50)}",
                    }
                )
                s.end(end_time=now + int(e2e * 1e9))
            else:
                variant = "candidate" if rng.random() < 0.1 else "base"
                g = gw_t.start_span(f"chat {variant}", kind=trace.SpanKind.CLIENT, start_time=now)
                g.set_attributes(
                    {
                        "gen_ai.operation.name": "chat",
                        "gen_ai.provider.name": "vllm",
                        "gen_ai.request.model": variant,
                        "driftline.rollout": "support-assistant",
                        "driftline.variant": variant,
                        "gen_ai.usage.input_tokens": rng.randint(50, 800),
                        "gen_ai.usage.output_tokens": out_tokens,
                        "gen_ai.response.time_to_first_chunk": ttft + 0.002,
                    }
                )
                ctx = trace.set_span_in_context(g)
                queue = rng.uniform(0.0, 0.02)
                e = vllm_t.start_span(
                    "llm_request",
                    context=ctx,
                    kind=trace.SpanKind.SERVER,
                    start_time=now + 1_000_000,
                )
                e.set_attributes(
                    {
                        "gen_ai.latency.time_in_queue": queue,
                        "gen_ai.latency.time_in_model_prefill": max(ttft - queue, 0.001),
                        "gen_ai.latency.time_in_model_decode": e2e - ttft,
                        "gen_ai.latency.time_to_first_token": ttft,
                        "gen_ai.latency.e2e": e2e,
                        "gen_ai.usage.completion_tokens": out_tokens,
                    }
                )
                e.end(end_time=now + int(e2e * 1e9))
                g.end(end_time=now + int((e2e + 0.003) * 1e9))
            stop.wait(rng.expovariate(rate_per_s))
    finally:
        for p in (app, gateway, engine):
            p.shutdown()
