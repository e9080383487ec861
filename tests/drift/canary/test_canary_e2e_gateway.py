"""The real gateway follows rollout decisions: a live collector (uvicorn), the gateway app in
front of the deterministic in-process OpenAI-compatible echo engine, the gateway's spans
exported to the collector. Weight changes made in the collector (override, evaluation) reach
the gateway's routing within its weights TTL."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import httpx
import numpy as np
import pytest

from serving.asgi_thread import ServerThread
from serving.config import GatewayConfig, Rollout
from serving.echo_engine import EchoEngineState, create_echo_engine
from serving.gateway import create_gateway_app
from serving.settings import GatewaySettings
from serving.telemetry import make_tracer_provider
from tests.conftest import LiveCollector, wait_for


@pytest.fixture
def gateway(live_collector: LiveCollector) -> Iterator[tuple[str, Any]]:
    """(gateway URL, the app) with static weights the collector's must override."""
    state = EchoEngineState(models=("base", "lora-a", "lora-b"))
    with ServerThread(create_echo_engine(state)) as engine_url:
        settings = GatewaySettings(
            engine_url=engine_url,
            collector_url=live_collector.http_url,
            gateway_otlp_endpoint=f"{live_collector.http_url}/v1/traces",
            weights_ttl_s=0.2,
        )
        config = GatewayConfig(
            rollouts={
                "bot": Rollout("bot", {"base": 0.5, "lora-a": 0.5}),
                "bot2": Rollout("bot2", {"base": 1.0, "lora-b": 0.0}),
            },
            default_rollout="bot",
        )
        provider = make_tracer_provider(settings)
        app = create_gateway_app(
            settings, config, tracer_provider=provider, rng=np.random.default_rng(11)
        )
        with ServerThread(app) as url:
            yield url, app
        provider.shutdown()


def _variants(gateway_url: str, model: str, n: int) -> list[str]:
    out = []
    for i in range(n):
        r = httpx.post(
            f"{gateway_url}/v1/chat/completions",
            json={
                "model": model,
                "user": f"user-{i}",
                "messages": [{"role": "user", "content": "hi"}],
            },
            timeout=10,
        )
        assert r.status_code == 200, r.text
        assert r.headers["x-driftline-rollout"] == model
        out.append(r.headers["x-driftline-variant"])
    return out


def test_gateway_picks_up_collector_weights(
    live_collector: LiveCollector, gateway: tuple[str, Any]
) -> None:
    url, app = gateway
    api = f"{live_collector.http_url}/api/v1/rollouts"
    for body in (
        {"name": "bot", "baseline_variant": "base", "candidate_variant": "lora-a"},
        {
            "name": "bot2",
            "baseline_variant": "base",
            "candidate_variant": "lora-b",
            "steps_pct": [50, 100],
        },
    ):
        assert httpx.post(api, json={**body, "min_step_duration_s": 0}).status_code == 201

    # bot2: static config sends nobody to lora-b; the collector says 50 %.
    mixed = _variants(url, "bot2", 40)
    assert {"base", "lora-b"} <= set(mixed)
    snap = app.state.gateway.weights.snapshot("bot2")
    assert snap.source == "collector" and dict(snap.weights) == {"base": 0.5, "lora-b": 0.5}
    # Promote to 100 %: completed, every user on the candidate.
    r = httpx.post(f"{api}/bot2/override", json={"action": "promote", "reason": "looks good"})
    assert r.json()["rollout"]["status"] == "completed"
    wait_for(lambda: set(_variants(url, "bot2", 10)) == {"lora-b"}, timeout_s=10)

    # bot: abort sends every user back to the baseline (candidate weight 0).
    _variants(url, "bot", 5)
    assert app.state.gateway.weights.snapshot("bot").version == 1
    httpx.post(f"{api}/bot/override", json={"action": "abort", "reason": "regression"})
    wait_for(lambda: set(_variants(url, "bot", 20)) == {"base"}, timeout_s=10)
    snap = app.state.gateway.weights.snapshot("bot")
    assert snap.version == 2 and dict(snap.weights) == {"base": 1.0, "lora-a": 0.0}

    # The gateway's spans reached the collector as calls tagged with rollout and variant.
    calls = wait_for(lambda: live_collector.calls(rollout="bot2") or None)
    assert {c["variant"] for c in calls} <= {"base", "lora-b"}
    assert all(c["rollout"] == "bot2" for c in calls)
