"""Calls in the right tenant: a real gateway serving two tenants through ONE collector key.

The gateway (serving/, in front of the echo engine) resolves each caller's tenant from its own
API keys and puts it on its CLIENT span as ``driftline.tenant``; the collector files the span
under that tenant only because the span arrives with a ``gateway``-role key created for those
tenants. Each tenant then reads its own calls, and nobody else's, with its own read key.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import httpx
import numpy as np
import pytest

from collector.auth import create_key
from collector.store import engine as store_engine
from serving.asgi_thread import ServerThread
from serving.config import GatewayConfig, Rollout
from serving.echo_engine import EchoEngineState, create_echo_engine
from serving.gateway import create_gateway_app
from serving.settings import GatewaySettings
from serving.telemetry import make_tracer_provider
from tests.collector.test_otlp_http import PB, pb_request
from tests.conftest import LiveCollector, free_port, make_settings

CHAT = {"messages": [{"role": "user", "content": "hi there"}], "max_tokens": 4}
#: the gateway's own callers -> their tenants; it serves eve too, but its collector key
#: was not created for eve
CALLERS = {"sk-acme": "acme", "sk-bob": "bob", "sk-eve": "eve"}


@pytest.fixture
def stack(sqlite_url: str) -> Iterator[dict[str, Any]]:
    store_engine.upgrade(sqlite_url)
    eng = store_engine.make_engine(sqlite_url)
    keys = {
        "gateway": create_key(eng, "platform", "gateway", "gw", tenants=["acme", "bob"]),
        "mallory_ingest": create_key(eng, "mallory", "ingest"),
        **{f"{t}_read": create_key(eng, t, "read") for t in ("acme", "bob", "eve", "platform")},
        "mallory_read": create_key(eng, "mallory", "read"),
    }
    eng.dispose()
    settings = make_settings(sqlite_url, dev=False, http_port=free_port(), grpc_enabled=False)
    collector = LiveCollector(settings).start()
    echo = ServerThread(create_echo_engine(EchoEngineState(models=("base",))))
    gs = GatewaySettings(
        engine_url=echo.start(),
        collector_url=None,
        gateway_otlp_endpoint=f"{collector.http_url}/v1/traces",
        gateway_otlp_protocol="http/protobuf",
        collector_api_key=keys["gateway"],
    )
    provider = make_tracer_provider(gs)
    config = GatewayConfig(
        rollouts={"bot": Rollout("bot", {"base": 1.0})}, default_rollout="bot", api_keys=CALLERS
    )
    gateway = ServerThread(
        create_gateway_app(gs, config, tracer_provider=provider, rng=np.random.default_rng(1))
    )
    try:
        yield {
            "collector": collector.http_url,
            "gateway": gateway.start(),
            "flush": provider.force_flush,
            "keys": keys,
        }
    finally:
        gateway.stop()
        provider.shutdown()
        echo.stop()
        collector.stop()


def _calls(stack: dict[str, Any], tenant: str) -> list[dict[str, Any]]:
    key = stack["keys"][f"{tenant}_read"]
    r = httpx.get(
        f"{stack['collector']}/api/v1/calls",
        params={"limit": 100},
        headers={"authorization": f"Bearer {key}"},
    )
    assert r.status_code == 200, r.text
    items: list[dict[str, Any]] = r.json()["items"]
    return items


def test_gateway_spans_of_two_tenants_land_in_each_tenant(stack: dict[str, Any]) -> None:
    sent = {"sk-acme": 3, "sk-bob": 2, "sk-eve": 1}
    for caller, n in sent.items():
        for _ in range(n):
            r = httpx.post(
                f"{stack['gateway']}/v1/chat/completions",
                json=CHAT,
                headers={"authorization": f"Bearer {caller}"},
                timeout=30,
            )
            assert r.status_code == 200, r.text
    assert stack["flush"](30_000)

    acme, bob = _calls(stack, "acme"), _calls(stack, "bob")
    assert len(acme) == 3 and len(bob) == 2
    assert {c["tenant"] for c in acme} == {"acme"} and {c["tenant"] for c in bob} == {"bob"}
    assert not {c["call_id"] for c in acme} & {c["call_id"] for c in bob}
    # eve is served by the gateway, but the gateway's key does not speak for eve: its span
    # stays in the key's own tenant (visible to the gateway's owner, not to eve)
    assert _calls(stack, "eve") == []
    (own,) = _calls(stack, "platform")
    assert own["tenant"] == "platform"


def test_other_keys_cannot_claim_a_tenant(stack: dict[str, Any]) -> None:
    """An ingest key's span naming ``driftline.tenant = acme`` stays in the key's tenant."""
    from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
        ExportTraceServiceRequest,
    )

    req = ExportTraceServiceRequest.FromString(pb_request(2))
    for span in req.resource_spans[0].scope_spans[0].spans:
        kv = span.attributes.add()
        kv.key, kv.value.string_value = "driftline.tenant", "acme"
    r = httpx.post(
        f"{stack['collector']}/v1/traces",
        content=req.SerializeToString(),
        headers={**PB, "authorization": f"Bearer {stack['keys']['mallory_ingest']}"},
    )
    assert r.status_code == 200, r.text
    assert _calls(stack, "acme") == []
    assert {c["tenant"] for c in _calls(stack, "mallory")} == {"mallory"}
    assert len(_calls(stack, "mallory")) == 2
