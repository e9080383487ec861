"""Several real echo engines behind one real gateway (uvicorn threads, real sockets)."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass
from typing import Any

import numpy as np
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from serving.asgi_thread import ServerThread
from serving.config import parse_config
from serving.echo_engine import EchoEngineState, create_echo_engine
from serving.gateway import Gateway, create_gateway_app
from serving.settings import GatewaySettings


@dataclass
class FleetRig:
    url: str
    engines: list[EchoEngineState]
    engine_urls: list[str]
    spans: InMemorySpanExporter
    gateway: Gateway


@contextmanager
def fleet_rig(
    engines: list[dict[str, Any]],
    config: dict[str, Any] | None = None,
    **settings: Any,
) -> Iterator[FleetRig]:
    """Start one echo engine per entry of ``engines`` (``models``, ``adapters`` + state fields)
    and a gateway whose ``replicas`` list them in order; ``config`` adds config sections."""
    with ExitStack() as stack:
        states, urls, replicas = [], [], []
        for e in engines:
            e = dict(e)
            models, adapters = e.pop("models", ["base"]), e.pop("adapters", [])
            st = EchoEngineState(models=(*models, *adapters), **e)
            url = stack.enter_context(ServerThread(create_echo_engine(st)))
            states.append(st)
            urls.append(url)
            replicas.append({"url": url, "models": models, "adapters": adapters})
        cfg = {"replicas": replicas, **(config or {})}
        exporter = InMemorySpanExporter()
        provider = TracerProvider()
        provider.add_span_processor(SimpleSpanProcessor(exporter))
        gs = GatewaySettings(**{"collector_url": None, "gateway_otlp_endpoint": None, **settings})
        app = create_gateway_app(
            gs, parse_config(cfg), tracer_provider=provider, rng=np.random.default_rng(3)
        )
        url = stack.enter_context(ServerThread(app))
        yield FleetRig(url, states, urls, exporter, app.state.gateway)


def chat(model: str, text: str, system: str = "you are a support agent", **extra: Any) -> dict:
    """A chat body with a system prompt (the shared prefix) and one user message."""
    return {
        "model": model,
        "messages": [
            {"role": "system", "content": system},
            {"role": "user", "content": text},
        ],
        **extra,
    }
