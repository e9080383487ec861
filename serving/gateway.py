"""OpenAI-compatible gateway in front of a fleet of engines: route, limit, shed load, trace.

``POST /v1/chat/completions`` and ``POST /v1/completions`` (:mod:`serving.proxy`):

1. tenant from the API key; rollout or pinned model from the request (:mod:`serving.resolve`);
2. variant by rollout weights, sticky per user/session (:mod:`serving.routing`);
3. ``max_tokens`` capped by the server-side budget; streaming requests ask the engine for
   ``stream_options.include_usage``;
4. traffic class, tenant rate limit, response cache, a slot of the class's bounded queue;
5. a replica that serves the variant, by the model's routing policy (:mod:`serving.balance`);
6. one CLIENT span per request; W3C ``traceparent`` injected *inside* it, so vLLM's
   ``llm_request`` SERVER span becomes its child (``reference/vllm-cpu.md``, "Tracing");
7. SSE passed through (:mod:`serving.relay`); the usage-only chunk is withheld from clients
   that did not ask for it, so the client sees what it would have seen from the engine.

``GET /v1/models`` lists the first healthy replica's models plus the rollouts. ``GET /healthz``
is liveness. ``GET /metrics`` is Prometheus text with ``driftline_desired_replicas{model}``
(:mod:`serving.autoscale`). Without a ``replicas`` section the fleet is one replica at
``engine_url`` that serves every model (the single-engine set-up).
"""

from __future__ import annotations

import asyncio
import contextlib
import gc
import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import aiohttp
import httpx
import numpy as np
from fastapi import FastAPI, Request
from fastapi.responses import JSONResponse, Response
from opentelemetry.sdk.trace import TracerProvider
from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.exposition import CONTENT_TYPE_LATEST
from starlette.types import Message, Receive, Scope, Send

from serving.autoscale import Autoscaler, GatewayMetrics
from serving.cache import ResponseCache
from serving.classes import TrafficGate
from serving.config import GatewayConfig
from serving.fleet import Fleet
from serving.fleet_config import ReplicaSpec
from serving.proxy import proxy
from serving.ratelimit import TenantLimiter
from serving.relay import LeanStreamingResponse
from serving.replies import error_response
from serving.resolve import (
    ROLLOUT_HEADER,
    GatewayRequestError,
    resolve_target,
    session_of,
    user_of,
)
from serving.routing import choose_variant
from serving.settings import GatewaySettings
from serving.telemetry import TRACER_NAME
from serving.weights import WeightsCache

#: scaling-metrics label of requests for a model no replica serves (they end in a 404)
UNSERVED_LABEL = "(unserved)"
#: variant -> label entries remembered by :meth:`Gateway.model_label`
MAX_LABELS = 4096


class Gateway:
    """State shared by the routes: clients, admission gate, weights cache, tracer."""

    def __init__(
        self,
        settings: GatewaySettings,
        config: GatewayConfig,
        *,
        tracer_provider: TracerProvider,
        rng: np.random.Generator,
    ) -> None:
        """Clients are opened by :meth:`start` (the app lifespan)."""
        self.settings = settings
        self.config = config
        self.rng = rng
        self.tracer_provider = tracer_provider
        self.tracer = tracer_provider.get_tracer(TRACER_NAME)
        fleet = config.fleet
        self.fleet = Fleet(fleet.replicas or (ReplicaSpec(url=settings.engine_url),))
        t = fleet.traffic
        self.gate = TrafficGate(
            settings.max_concurrency,
            batch_share=t.batch_share,
            interactive_queue=settings.max_queue
            if t.interactive_queue is None
            else t.interactive_queue,
            batch_queue=t.batch_queue,
            batch_max_wait_s=t.batch_max_wait_s,
            retry_after_s=settings.retry_after_s,
        )
        self.limiter = TenantLimiter(fleet.limits)
        self.cache = ResponseCache(fleet.cache)
        self.scaler = Autoscaler(fleet.autoscale)
        self.registry = CollectorRegistry(auto_describe=False)
        self.registry.register(GatewayMetrics(self.scaler, self.fleet, self.gate))
        self._labels: dict[str, str] = {}
        self._session: aiohttp.ClientSession | None = None
        self._health: asyncio.Task[None] | None = None
        self.collector: httpx.AsyncClient | None = None
        self.weights = WeightsCache(
            config, client=None, collector_url=None, ttl_s=settings.weights_ttl_s
        )

    @property
    def session(self) -> aiohttp.ClientSession:
        """The pooled client towards the replicas (opened by :meth:`start`)."""
        assert self._session is not None, "Gateway.start() was not awaited"
        return self._session

    def model_label(self, variant: str) -> str:
        """Base model whose replicas serve ``variant`` (label of the scaling metrics), or
        :data:`UNSERVED_LABEL` when no replica serves it.

        ``variant`` may be any name a client pins: an unserved one never becomes a label of its
        own (the scaler keeps a time window per label), and at most :data:`MAX_LABELS` names
        are remembered (the others are looked up each time: one pass over the replicas).
        """
        label = self._labels.get(variant)
        if label is None:
            serving = [r.spec.base_model() for r in self.fleet.replicas if r.spec.serves(variant)]
            label = min(serving) if serving else UNSERVED_LABEL
            if len(self._labels) < MAX_LABELS:
                self._labels[variant] = label
        return label

    async def _health_loop(self) -> None:
        while True:
            await asyncio.sleep(self.settings.health_interval_s)
            with contextlib.suppress(Exception):
                await self.fleet.check_all(self.session)

    async def start(self) -> None:
        """Open the replica and collector HTTP clients; start health checks of a fleet; freeze
        the start-up heap (:func:`freeze_startup_heap`)."""
        freeze_startup_heap()
        # keep-alive shorter than the engines' (uvicorn/vLLM: 5 s) so the gateway never
        # reuses a connection the engine is closing (the ReadError under load); a stale one
        # still gets one retry (proxy._send)
        connector = aiohttp.TCPConnector(
            limit=self.settings.max_concurrency + 8,
            keepalive_timeout=self.settings.engine_keepalive_s,
        )
        timeout = aiohttp.ClientTimeout(
            total=None, sock_connect=5.0, sock_read=self.settings.engine_timeout_s
        )
        self._session = aiohttp.ClientSession(
            connector=connector, timeout=timeout, auto_decompress=False
        )
        if self.config.fleet.replicas:
            self._health = asyncio.create_task(self._health_loop())
        if self.settings.collector_url:
            key = self.settings.collector_api_key
            headers = {"Authorization": f"Bearer {key.get_secret_value()}"} if key else {}
            self.collector = httpx.AsyncClient(timeout=2.0, headers=headers)
        self.weights = WeightsCache(
            self.config,
            client=self.collector,
            collector_url=self.settings.collector_url,
            ttl_s=self.settings.weights_ttl_s,
        )

    async def stop(self) -> None:
        """Stop health checks, close clients and flush spans."""
        if self._health is not None:
            self._health.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._health
        if self._session is not None:
            await self._session.close()
        if self.collector is not None:
            await self.collector.aclose()
        self.tracer_provider.force_flush()

    async def pick(self, request: Request, body: dict[str, Any]) -> tuple[str | None, str]:
        """``(rollout, variant)`` for a request.

        Raises:
            GatewayRequestError: 400 bad model, 404 unknown rollout.
        """
        target = resolve_target(self.config, body.get("model"), request.headers.get(ROLLOUT_HEADER))
        if target.rollout is None:
            assert target.pinned is not None
            return None, target.pinned
        snap = await self.weights.get(target.rollout)
        if snap is None:
            raise GatewayRequestError(
                404, "rollout_not_found", f"unknown rollout {target.rollout!r}"
            )
        decision = choose_variant(
            snap.weights,
            user_id=user_of(request.headers, body),
            session_id=session_of(request.headers, body),
            rng=self.rng,
            salt=target.rollout,
        )
        return target.rollout, decision.variant


_frozen = False


def freeze_startup_heap() -> None:
    """Collect once, then move every object alive now out of the cyclic collector's view
    (:func:`gc.freeze`); once per process.

    Modules, the app and its configuration live as long as the process, yet every full
    (generation 2) collection traverses them: measured on the gateway after start-up, ~77k
    tracked objects and 30-100 ms per full collection on 2 busy cores, a pause of the event
    loop and so of every stream. Frozen, a full collection traverses only what was allocated
    since. Collection thresholds stay at CPython's defaults: in ``benchmarks/gateway.py`` at
    concurrency 50 the young collections take ~1 % of the gateway's CPU, too little to tune.
    """
    global _frozen
    if _frozen:
        return
    _frozen = True
    gc.collect()
    gc.freeze()


#: ``path -> gen_ai.operation.name`` of the proxied POST routes (:class:`GatewayApp`).
PROXIED: dict[str, str] = {
    "/v1/chat/completions": "chat",
    "/v1/completions": "text_completion",
}


class GatewayApp(FastAPI):
    """FastAPI app that hands the proxied ``POST`` routes straight to :func:`proxy`.

    Every chunk of a stream otherwise crosses Starlette's error middleware, FastAPI's body-limit
    and telemetry middlewares, routing and dependency solving, which together cost a sizeable
    share of the relay's CPU. Here those requests skip the whole stack; an unhandled error in
    them is still a 500 (JSON, when no byte was sent yet) and is re-raised so the server logs
    it, as Starlette's ``ServerErrorMiddleware`` does. Every other request goes through FastAPI
    unchanged, and the FastAPI routes of these paths stay declared (OpenAPI, other methods).
    """

    gateway: Gateway  # set by create_gateway_app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        """ASGI entry point."""
        if scope["type"] == "http" and scope["method"] == "POST":
            path = scope["path"]
            root = scope.get("root_path")
            if root and path.startswith(root):  # as Starlette's router matches
                path = path[len(root) :]
            operation = PROXIED.get(path)
            if operation is not None:
                await _hot(self.gateway, scope, receive, send, operation, path)
                return
        await super().__call__(scope, receive, send)


async def _hot(
    gw: Gateway, scope: Scope, receive: Receive, send: Send, operation: str, path: str
) -> None:
    started = False

    async def tracked(message: Message) -> None:
        nonlocal started
        started = True
        await send(message)

    try:
        response = await proxy(gw, Request(scope, receive), operation, path)
    except Exception:
        await error_response(500, "internal_error", "internal server error")(scope, receive, send)
        raise
    # a streamed response reports its own start: no wrapper coroutine per relayed chunk
    lean = response if isinstance(response, LeanStreamingResponse) else None
    try:
        await response(scope, receive, tracked if lean is None else send)
    except Exception:
        if not (started if lean is None else lean.started):
            await error_response(500, "internal_error", "internal server error")(
                scope, receive, send
            )
        raise


def create_gateway_app(
    settings: GatewaySettings,
    config: GatewayConfig,
    *,
    tracer_provider: TracerProvider,
    rng: np.random.Generator,
) -> FastAPI:
    """Build the gateway ASGI app. ``rng`` draws variants for requests with no user/session."""
    gw = Gateway(settings, config, tracer_provider=tracer_provider, rng=rng)

    @asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        await gw.start()
        try:
            yield
        finally:
            await gw.stop()

    app = GatewayApp(title="driftline gateway", lifespan=lifespan)
    app.state.gateway = app.gateway = gw

    @app.post("/v1/chat/completions")
    async def chat(request: Request) -> Response:
        return await proxy(gw, request, "chat", "/v1/chat/completions")

    @app.post("/v1/completions")
    async def completions(request: Request) -> Response:
        return await proxy(gw, request, "text_completion", "/v1/completions")

    @app.get("/v1/models")
    async def models() -> Response:
        data: Any = None
        now_m = gw.fleet.clock()
        for rep in sorted(gw.fleet.replicas, key=lambda x: x.ejected_until > now_m):
            try:
                async with gw.session.get(f"{rep.url}/v1/models") as resp:
                    data = await resp.json() if resp.status == 200 else None
            except (aiohttp.ClientError, TimeoutError, ValueError):
                data = None
            if data is not None:
                break
        if not isinstance(data, dict) or not isinstance(data.get("data"), list):
            return error_response(502, "engine_unavailable", "could not list the engine's models")
        now = int(time.time())
        for name, r in sorted(gw.config.rollouts.items()):
            data["data"].append(
                {
                    "id": name,
                    "object": "model",
                    "created": now,
                    "owned_by": "driftline",
                    "parent": None,
                    "driftline_variants": sorted(r.weights),
                }
            )
        return JSONResponse(data)

    @app.get("/healthz")
    async def healthz() -> dict[str, Any]:
        a = gw.gate
        return {
            "status": "ok",
            "in_flight": a.in_flight,
            "waiting": a.waiting,
            "rejected": a.rejected,
        }

    @app.get("/metrics")
    async def metrics() -> Response:
        return Response(generate_latest(gw.registry), media_type=CONTENT_TYPE_LATEST)

    return app
