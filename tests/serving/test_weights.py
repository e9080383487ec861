"""Rollout weights from the collector's rollout API (a real local HTTP server stands in)."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from typing import Any

import httpx
import pytest
from fastapi import FastAPI
from fastapi.responses import JSONResponse

from serving.asgi_thread import ServerThread
from serving.config import GatewayConfig, Rollout
from serving.weights import WeightsCache, parse_weights_body

CFG = GatewayConfig(rollouts={"bot": Rollout("bot", {"base": 1.0, "cand": 0.0})})


class RolloutApi:
    def __init__(self) -> None:
        self.body: Any = None
        self.status = 404
        self.hits = 0
        app = FastAPI()

        @app.get("/api/v1/rollouts/{name}/weights")
        async def weights(name: str) -> JSONResponse:
            self.hits += 1
            return JSONResponse(self.body, status_code=self.status)

        self.app = app


@pytest.fixture
def rollout_api() -> Iterator[tuple[RolloutApi, str]]:
    api = RolloutApi()
    with ServerThread(api.app) as url:
        yield api, url


class Clock:
    def __init__(self) -> None:
        self.t = 0.0

    def __call__(self) -> float:
        return self.t


def test_static_then_collector_then_kept_on_failure(rollout_api: tuple[RolloutApi, str]) -> None:
    api, url = rollout_api
    clock = Clock()

    async def scenario() -> list[Any]:
        async with httpx.AsyncClient() as client:
            cache = WeightsCache(CFG, client=client, collector_url=url, ttl_s=5, clock=clock)
            out: list[Any] = [await cache.get("bot")]  # 404 -> static
            api.status, api.body = (
                200,
                {"rollout": "bot", "weights": {"base": 0.7, "cand": 0.3}, "version": 4},
            )
            out.append(await cache.get("bot"))  # within TTL -> no fetch
            clock.t = 6
            out.append(await cache.get("bot"))  # refreshed
            api.status = 500
            clock.t = 12
            out.append(await cache.get("bot"))  # failure -> last good kept
            out.append((cache.fetch_ok, cache.fetch_failed))
            return out

    static, cached, fresh, kept, counters = asyncio.run(scenario())
    assert static.source == "static" and dict(static.weights) == {"base": 1.0, "cand": 0.0}
    assert cached.source == "static" and api.hits == 3
    assert fresh.source == "collector" and fresh.version == 4
    assert dict(fresh.weights) == {"base": 0.7, "cand": 0.3}
    assert kept.source == "collector" and kept.version == 4
    assert counters == (1, 2)


def test_collector_down_keeps_static_and_unknown_rollout_is_none() -> None:
    async def scenario() -> tuple[Any, Any]:
        async with httpx.AsyncClient() as client:
            cache = WeightsCache(CFG, client=client, collector_url="http://127.0.0.1:9", ttl_s=1)
            return await cache.get("bot"), await cache.get("nope")

    snap, missing = asyncio.run(scenario())
    assert snap is not None and snap.source == "static"
    assert missing is None


def test_gateway_follows_collector_weights(
    rollout_api: tuple[RolloutApi, str], make_gateway: Any
) -> None:
    api, url = rollout_api
    api.status, api.body = (
        200,
        {"rollout": "bot", "weights": {"base": 0.0, "lora-a": 1.0}, "version": 1},
    )
    gw = make_gateway(collector_url=url)
    r = httpx.post(
        f"{gw.url}/v1/chat/completions",
        json={"model": "bot", "messages": [{"role": "user", "content": "x"}]},
    )
    assert r.headers["x-driftline-variant"] == "lora-a"


@pytest.mark.parametrize(
    ("body", "needle"),
    [
        ([], "body"),
        ({"rollout": "other", "weights": {"a": 1}}, "body.rollout"),
        ({"weights": {}}, "body.weights"),
        ({"weights": {"a": 1.5}}, "body.weights.a"),
        ({"weights": {"a": 0}}, "body.weights"),
        ({"weights": {"a": 1}, "version": "x"}, "body.version"),
    ],
)
def test_malformed_bodies_are_rejected(body: Any, needle: str) -> None:
    with pytest.raises(ValueError, match=needle):
        parse_weights_body(body, "bot")
