"""Fixtures: a real in-process OpenAI-compatible engine (echo) and a gateway in front of it.

Both run under uvicorn on background threads with real sockets; spans go to the OTel SDK's
InMemorySpanExporter through a SimpleSpanProcessor (exported on span end).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

import numpy as np
import pytest
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from serving.asgi_thread import ServerThread
from serving.config import GatewayConfig, Rollout
from serving.echo_engine import EchoEngineState, create_echo_engine
from serving.gateway import create_gateway_app
from serving.settings import GatewaySettings


@dataclass
class Engine:
    url: str
    state: EchoEngineState


@dataclass
class RunningGateway:
    url: str
    spans: InMemorySpanExporter
    engine: Engine
    app: Any


@pytest.fixture
def engine() -> Iterator[Engine]:
    state = EchoEngineState(models=("base", "lora-a", "lora-b"))
    with ServerThread(create_echo_engine(state)) as url:
        yield Engine(url=url, state=state)


def ab_config(**extra: Any) -> GatewayConfig:
    return GatewayConfig(
        rollouts={"bot": Rollout("bot", {"base": 0.8, "lora-a": 0.2})},
        default_rollout="bot",
        **extra,
    )


@pytest.fixture
def make_gateway(engine: Engine) -> Iterator[Callable[..., RunningGateway]]:
    servers: list[ServerThread] = []

    def make(config: GatewayConfig | None = None, **settings: Any) -> RunningGateway:
        exporter = InMemorySpanExporter()
        provider = TracerProvider()
        provider.add_span_processor(SimpleSpanProcessor(exporter))
        gs = GatewaySettings(
            **{
                "engine_url": engine.url,
                "collector_url": None,
                "gateway_otlp_endpoint": None,
                **settings,
            }
        )
        app = create_gateway_app(
            gs, config or ab_config(), tracer_provider=provider, rng=np.random.default_rng(7)
        )
        srv = ServerThread(app)
        servers.append(srv)
        return RunningGateway(url=srv.start(), spans=exporter, engine=engine, app=app)

    yield make
    for srv in servers:
        srv.stop()


def attrs(span: ReadableSpan) -> dict[str, Any]:
    """A finished span's attributes as a plain dict (typed loosely for assertions)."""
    return dict(span.attributes or {})


def ids(span: ReadableSpan) -> tuple[str, str]:
    """``(trace_id, span_id)`` of a finished span as lowercase hex."""
    ctx = span.get_span_context()
    assert ctx is not None
    return format(ctx.trace_id, "032x"), format(ctx.span_id, "016x")
