"""The gateway's limits before parsing and its rollout header (issue 35, items 3 and 5), against a
real gateway, a real echo engine and a real HTTP server standing in for the collector.

On main: the gateway read a whole body before it looked at the key (a 100 MB announced body
with a bad key got no answer until it was all sent), had no body limit, put the
``X-Driftline-Rollout`` header unescaped into the collector URL (``../`` reached other paths)
and kept one lock per rollout name any client made up, forever.
"""

from __future__ import annotations

import asyncio
import gc
import socket
from collections.abc import Callable, Iterator
from typing import Any

import httpx
import pytest
from starlette.types import Receive, Scope, Send

from serving.asgi_thread import ServerThread
from serving.config import GatewayConfig, Rollout
from serving.fleet_config import FleetConfig, ReplicaSpec
from serving.gateway import MAX_LABELS, UNSERVED_LABEL
from serving.weights import WeightsCache
from tests.serving.conftest import RunningGateway, ab_config

LIMIT = 64 * 1024
ANSWER_S = 5.0
CHAT = {"messages": [{"role": "user", "content": "hi"}]}


class Recorder:
    """A stand-in collector that records the raw path of every request and answers 404."""

    def __init__(self) -> None:
        self.paths: list[bytes] = []

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            return
        self.paths.append(scope.get("raw_path") or scope["path"].encode())
        await send({"type": "http.response.start", "status": 404, "headers": []})
        await send({"type": "http.response.body", "body": b"{}"})


@pytest.fixture
def collector() -> Iterator[tuple[Recorder, str]]:
    rec = Recorder()
    with ServerThread(rec) as url:
        yield rec, url


def _exchange(url: str, head: str, body: bytes) -> bytes:
    host, port = url.removeprefix("http://").rsplit(":", 1)
    with socket.create_connection((host, int(port)), timeout=ANSWER_S) as s:
        s.sendall(head.encode() + body)
        try:
            return s.recv(65536)
        except TimeoutError:
            return b""


def _head(declared: int, key: str | None = None, chunked: bool = False) -> str:
    lines = ["POST /v1/chat/completions HTTP/1.1", "Host: gw", "Content-Type: application/json"]
    lines.append("Transfer-Encoding: chunked" if chunked else f"Content-Length: {declared}")
    if key is not None:
        lines.append(f"Authorization: Bearer {key}")
    return "\r\n".join(lines) + "\r\n\r\n"


def _status(raw: bytes) -> int | None:
    return int(raw.split(b" ", 2)[1]) if raw.startswith(b"HTTP/1.1 ") else None


def test_an_unknown_key_gets_401_before_the_body_is_read(
    make_gateway: Callable[..., RunningGateway],
) -> None:
    gw = make_gateway(ab_config(api_keys={"sk-acme": "acme"}))
    for key in (None, "sk-wrong"):
        raw = _exchange(gw.url, _head(100 << 20, key), b"{" * 16384)
        assert _status(raw) == 401, raw[:300]


def test_a_body_over_the_limit_gets_413_without_reading_past_it(
    make_gateway: Callable[..., RunningGateway],
) -> None:
    gw = make_gateway(gateway_max_body_bytes=LIMIT)
    raw = _exchange(gw.url, _head(100 << 20), b"{")
    assert _status(raw) == 413 and b"body_too_large" in raw, raw[:300]
    chunk = b"x" * 8192
    chunks = b"".join(b"%x\r\n%s\r\n" % (len(chunk), chunk) for _ in range(LIMIT // 8192 + 2))
    raw = _exchange(gw.url, _head(0, chunked=True), chunks)  # no last chunk: never ends
    assert _status(raw) == 413, raw[:300]
    r = httpx.post(f"{gw.url}/v1/chat/completions", json=CHAT)  # within the limit: served
    assert r.status_code == 200, r.text


@pytest.mark.parametrize(
    "name", ["../../admin", "bot/../../v1/x", "..", "a b", "bot?x=1", "bot#x", "x" * 257, "-bot"]
)
def test_a_rollout_header_that_is_no_name_is_refused(
    make_gateway: Callable[..., RunningGateway], collector: tuple[Recorder, str], name: str
) -> None:
    rec, url = collector
    gw = make_gateway(collector_url=url)
    r = httpx.post(
        f"{gw.url}/v1/chat/completions", json=CHAT, headers={"x-driftline-rollout": name}
    )
    assert r.status_code == 400 and r.json()["error"]["code"] == "invalid_rollout", r.text
    assert rec.paths == []  # the collector was not asked anything


def test_the_rollout_name_is_quoted_into_the_collector_path(
    collector: tuple[Recorder, str],
) -> None:
    """Defence in depth below the gateway's check: WeightsCache itself never lets a name leave
    its path segment."""
    rec, url = collector
    cfg = GatewayConfig(rollouts={"bot": Rollout("bot", {"base": 1.0})})

    async def scenario() -> None:
        async with httpx.AsyncClient() as client:
            cache = WeightsCache(cfg, client=client, collector_url=url, ttl_s=5)
            assert await cache.get("../../admin?x=1#y") is None
            assert await cache.get("bot.v2") is None

    asyncio.run(scenario())
    assert rec.paths == [
        b"/api/v1/rollouts/..%2F..%2Fadmin%3Fx%3D1%23y/weights",
        b"/api/v1/rollouts/bot.v2/weights",
    ]


def test_made_up_rollout_names_leave_no_lock_behind(collector: tuple[Recorder, str]) -> None:
    _rec, url = collector
    cfg = GatewayConfig(rollouts={"bot": Rollout("bot", {"base": 1.0})})

    async def scenario() -> Any:
        async with httpx.AsyncClient() as client:
            cache = WeightsCache(cfg, client=client, collector_url=url, ttl_s=5)
            for i in range(300):
                assert await cache.get(f"made-up-{i}") is None
            gc.collect()
            return cache

    cache = asyncio.run(scenario())
    assert len(cache._locks) == 0
    assert cache.fetch_failed == 300


def test_pinned_model_names_do_not_grow_the_gateways_maps(
    make_gateway: Callable[..., RunningGateway], engine: Any
) -> None:
    """Each made-up ``model`` a client pins used to add a label, and a scaler time window per
    unserved name, for the process's life."""
    fleet = FleetConfig(replicas=(ReplicaSpec(url=engine.url, models=frozenset({"base"})),))
    gw = make_gateway(GatewayConfig(fleet=fleet))
    g = gw.app.gateway
    for i in range(30):
        r = httpx.post(f"{gw.url}/v1/chat/completions", json={**CHAT, "model": f"made-up-{i}"})
        assert r.status_code == 404
    assert set(g.scaler.queued) <= {UNSERVED_LABEL, "base"}
    assert set(g.scaler.queue_s) <= {UNSERVED_LABEL, "base"}
    for i in range(MAX_LABELS + 100):
        g.model_label(f"name-{i}")
    assert len(g._labels) <= MAX_LABELS
