"""OpenAI-compatible gateway in front of the engine: route variants, shed load, trace calls.

``POST /v1/chat/completions`` and ``POST /v1/completions``:

1. tenant from the API key; rollout or pinned model from the request (:mod:`serving.resolve`);
2. variant by rollout weights, sticky per user/session (:mod:`serving.routing`);
3. ``max_tokens`` capped by the server-side budget; streaming requests ask the engine for
   ``stream_options.include_usage``;
4. a slot from the bounded admission gate, else 429 + ``Retry-After``;
5. one CLIENT span per request; W3C ``traceparent`` injected *inside* it, so vLLM's
   ``llm_request`` SERVER span becomes its child (``reference/vllm-cpu.md``, "Tracing");
6. SSE passed through event by event; the usage-only chunk is withheld from clients that did
   not ask for it, so the client sees what it would have seen from the engine.

``GET /v1/models`` lists the engine's models plus the rollouts. ``GET /healthz`` is liveness.
"""

from __future__ import annotations

import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any
from urllib.parse import urlsplit

import httpx
import numpy as np
import orjson
from fastapi import FastAPI, Request
from fastapi.responses import JSONResponse, Response, StreamingResponse
from opentelemetry import trace
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.trace import SpanKind, Status, StatusCode
from opentelemetry.trace.propagation.tracecontext import TraceContextTextMapPropagator

from serving.admission import Admission, OverloadedError
from serving.config import GatewayConfig
from serving.replies import error_response, outcome_from_json
from serving.resolve import (
    ROLLOUT_HEADER,
    GatewayRequestError,
    apply_token_budget,
    resolve_target,
    session_of,
    tenant_for,
    user_of,
)
from serving.routing import choose_variant
from serving.settings import GatewaySettings
from serving.stream import SseSplitter, StreamAccumulator, event_data, with_include_usage
from serving.telemetry import (
    TRACER_NAME,
    CallOutcome,
    itl_summary,
    request_attributes,
    response_attributes,
)
from serving.weights import WeightsCache

_PROPAGATOR = TraceContextTextMapPropagator()


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
        self.admission = Admission(
            settings.max_concurrency, settings.max_queue, settings.retry_after_s
        )
        parts = urlsplit(settings.engine_url)
        self.engine_host = parts.hostname
        self.engine_port = parts.port or (443 if parts.scheme == "https" else 80)
        self.engine: httpx.AsyncClient | None = None
        self.collector: httpx.AsyncClient | None = None
        self.weights = WeightsCache(
            config, client=None, collector_url=None, ttl_s=settings.weights_ttl_s
        )

    async def start(self) -> None:
        """Open the engine and collector HTTP clients."""
        limits = httpx.Limits(
            max_connections=self.settings.max_concurrency + 8,
            max_keepalive_connections=self.settings.max_concurrency,
        )
        timeout = httpx.Timeout(self.settings.engine_timeout_s, connect=5.0)
        self.engine = httpx.AsyncClient(
            base_url=self.settings.engine_url, limits=limits, timeout=timeout
        )
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
        """Close clients and flush spans."""
        for client in (self.engine, self.collector):
            if client is not None:
                await client.aclose()
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


def _fail(span: trace.Span, error_type: str, message: str) -> None:
    span.set_attribute("error.type", error_type)
    span.set_status(Status(StatusCode.ERROR, message[:200]))


async def _proxy(gw: Gateway, request: Request, operation: str, path: str) -> Response:
    start_ns = time.time_ns()
    t0 = time.perf_counter()
    try:
        body = orjson.loads(await request.body())
    except orjson.JSONDecodeError:
        return error_response(400, "invalid_json", "the request body is not valid JSON")
    if not isinstance(body, dict):
        return error_response(400, "invalid_json", "the request body must be a JSON object")
    try:
        tenant = tenant_for(gw.config, request.headers.get("authorization"))
        rollout, variant = await gw.pick(request, body)
        fwd, max_tokens = apply_token_budget(body, gw.settings.max_output_tokens)
    except GatewayRequestError as exc:
        return error_response(exc.status, exc.code, str(exc))
    fwd["model"] = variant
    stream = bool(body.get("stream"))
    client_usage = True
    if stream:
        fwd, client_usage = with_include_usage(fwd)
    try:
        queued_s = await gw.admission.acquire()
    except OverloadedError as exc:
        retry = str(exc.retry_after_s)
        return error_response(429, "overloaded", str(exc), headers={"Retry-After": retry})
    attrs = request_attributes(
        operation=operation,
        variant=variant,
        rollout=rollout,
        body=body,
        max_tokens=max_tokens,
        user_id=user_of(request.headers, body),
        session_id=session_of(request.headers, body),
        tenant=tenant,
        server_address=gw.engine_host,
        server_port=gw.engine_port,
        capture_content=gw.settings.gateway_capture_content,
    )
    attrs["driftline.gateway.queue_s"] = queued_s
    span = gw.tracer.start_span(
        f"{operation} {variant}",
        context=_PROPAGATOR.extract(request.headers),
        kind=SpanKind.CLIENT,
        attributes=attrs,
        start_time=start_ns,
    )
    headers = {"content-type": "application/json", "accept-encoding": "identity"}
    _PROPAGATOR.inject(headers, context=trace.set_span_in_context(span))
    out_headers = {
        "x-driftline-trace-id": format(span.get_span_context().trace_id, "032x"),
        "x-driftline-variant": variant,
    }
    if rollout:
        out_headers["x-driftline-rollout"] = rollout
    assert gw.engine is not None
    handed_off = False
    try:
        req = gw.engine.build_request("POST", path, content=orjson.dumps(fwd), headers=headers)
        resp = await gw.engine.send(req, stream=stream)
        if resp.status_code >= 400 or not stream:
            content = await resp.aread()
            await resp.aclose()
            if resp.status_code >= 400:
                _fail(span, str(resp.status_code), content.decode(errors="replace"))
            else:
                try:
                    outcome = outcome_from_json(orjson.loads(content))
                except orjson.JSONDecodeError:
                    outcome = CallOutcome()
                    _fail(span, "invalid_response", "engine returned invalid JSON")
                span.set_attributes(
                    response_attributes(
                        outcome, capture_content=gw.settings.gateway_capture_content
                    )
                )
            media = resp.headers.get("content-type", "application/json")
            return Response(
                content, status_code=resp.status_code, media_type=media, headers=out_headers
            )
        handed_off = True
        return StreamingResponse(
            _relay(gw, resp, span, t0, client_usage),
            status_code=resp.status_code,
            media_type="text/event-stream",
            headers={**out_headers, "cache-control": "no-cache"},
        )
    except httpx.HTTPError as exc:
        _fail(span, type(exc).__name__, str(exc) or type(exc).__name__)
        return error_response(502, "engine_unavailable", f"engine error: {type(exc).__name__}")
    finally:
        if not handed_off:
            span.end()
            gw.admission.release()


async def _relay(
    gw: Gateway, resp: httpx.Response, span: trace.Span, t0: float, client_usage: bool
) -> AsyncIterator[bytes]:
    """Pass SSE events through, accumulate the outcome, end the span and free the slot."""
    acc = StreamAccumulator()
    splitter = SseSplitter()
    error: tuple[str, str] | None = None
    try:
        async for chunk in resp.aiter_raw():
            for ev in splitter.feed(chunk):
                data = event_data(ev)
                usage_only = acc.add(data) if data is not None else False
                if usage_only and not client_usage:
                    continue
                yield ev
        if splitter.rest().strip():
            yield splitter.rest()
        if acc.error is not None:
            error = (acc.error, "engine reported an error in the stream")
        elif not acc.done:
            error = ("incomplete_stream", "the engine closed the stream before [DONE]")
    except httpx.HTTPError as exc:
        error = (type(exc).__name__, str(exc) or type(exc).__name__)
        payload = {
            "error": {"code": "engine_unavailable", "message": error[1], "type": "server_error"}
        }
        yield b"data: " + orjson.dumps(payload) + b"\n\n"
    except BaseException:
        error = ("cancelled", "the client went away")
        raise
    finally:
        await resp.aclose()
        try:
            ttfc = None
            first = acc.token_times[0] if acc.token_times else acc.first_chunk_at
            if first is not None:
                ttfc = first - t0
            outcome = CallOutcome(
                response_id=acc.response_id,
                response_model=acc.response_model,
                texts={i: acc.text(i) for i in acc.choice_indices()},
                finish_reasons=acc.finish_reasons,
                input_tokens=acc.input_tokens,
                output_tokens=acc.output_tokens,
                cached_input_tokens=acc.cached_input_tokens,
                time_to_first_chunk_s=ttfc,
                itl=itl_summary(acc.token_times),
            )
            span.set_attributes(
                response_attributes(outcome, capture_content=gw.settings.gateway_capture_content)
            )
            if error is not None:
                _fail(span, *error)
        finally:
            span.end()
            gw.admission.release()


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

    app = FastAPI(title="driftline gateway", lifespan=lifespan)
    app.state.gateway = gw

    @app.post("/v1/chat/completions")
    async def chat(request: Request) -> Response:
        return await _proxy(gw, request, "chat", "/v1/chat/completions")

    @app.post("/v1/completions")
    async def completions(request: Request) -> Response:
        return await _proxy(gw, request, "text_completion", "/v1/completions")

    @app.get("/v1/models")
    async def models() -> Response:
        assert gw.engine is not None
        try:
            resp = await gw.engine.get("/v1/models")
            data = resp.json() if resp.status_code == 200 else None
        except (httpx.HTTPError, ValueError):
            data = None
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
        a = gw.admission
        return {
            "status": "ok",
            "in_flight": a.in_flight,
            "waiting": a.waiting,
            "rejected": a.rejected,
        }

    return app
