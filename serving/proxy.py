"""One proxied completion: limits, cache, class admission, replica choice, span, relay.

Order per request (each step may answer on its own):

1. tenant (API key), rollout/variant, token budget (:mod:`serving.resolve`);
2. traffic class: header ``X-Driftline-Class``, else the API key's or the rollout's default
   (config ``traffic``), else ``interactive``;
3. tenant rate limit (:mod:`serving.ratelimit`): 429 + ``Retry-After`` + ``x-ratelimit-*``,
   recorded as a span with ``error.type=rate_limited``;
4. response cache (:mod:`serving.cache`): a hit is a span with ``driftline.cache.hit=true``
   and no engine call;
5. a slot of the class's queue (:mod:`serving.classes`), else 429 ``overloaded``;
6. a replica (:mod:`serving.fleet`, :mod:`serving.balance`): attributes
   ``driftline.replica`` and ``driftline.route.reason``; a connection failure or 5xx ejects it
   and the request goes once more to another eligible replica before any byte reaches the
   client;
7. the CLIENT span with ``traceparent`` injected inside it; SSE relayed (:mod:`serving.relay`).
"""

from __future__ import annotations

import time
from typing import TYPE_CHECKING, Any

import aiohttp
import orjson
from fastapi import Request
from fastapi.responses import Response
from opentelemetry import trace
from opentelemetry.trace import SpanKind, Status, StatusCode
from opentelemetry.trace.propagation.tracecontext import TraceContextTextMapPropagator

from serving.admission import OverloadedError
from serving.balance import choose_replica, prefix_key
from serving.cache import cache_key, storable
from serving.fleet import NoReplicaError, ReplicaState
from serving.fleet_config import CLASSES, TrafficClass
from serving.ratelimit import RateLimitedError, Reservation, estimate_input_tokens
from serving.relay import LeanStreamingResponse, StreamResult, error_type, relay
from serving.replies import error_response, outcome_from_json
from serving.resolve import GatewayRequestError, apply_token_budget, session_of, user_of
from serving.resolve import tenant_for as _tenant_for
from serving.stream import with_include_usage
from serving.telemetry import CallOutcome, request_attributes, response_attributes

if TYPE_CHECKING:
    from serving.gateway import Gateway

_PROPAGATOR = TraceContextTextMapPropagator()
CLASS_HEADER = "x-driftline-class"
_RETRYABLE = frozenset({500, 502, 503, 504})


def traffic_class(gw: Gateway, request: Request, rollout: str | None) -> TrafficClass:
    """The request's class (module doc, step 2).

    Raises:
        GatewayRequestError: 400 when the header names no class.
    """
    header = request.headers.get(CLASS_HEADER)
    if header is not None:
        if header not in CLASSES:
            raise GatewayRequestError(400, "invalid_class", f"{CLASS_HEADER}: {list(CLASSES)}")
        return header  # type: ignore[return-value]
    t = gw.config.fleet.traffic
    auth = request.headers.get("authorization") or ""
    key = auth[7:].strip() if auth.lower().startswith("bearer ") else ""
    if key in t.api_keys:
        return t.api_keys[key]
    if rollout is not None and rollout in t.rollouts:
        return t.rollouts[rollout]
    return "interactive"


async def read_body(request: Request, limit: int) -> bytes:
    """The request body, at most ``limit`` bytes (``Content-Length`` checked first, a chunked
    body counted while it streams; nothing past the limit is read). Starlette's body-limit
    middleware would wrap every relayed chunk's ``send`` too, which the hot path avoids.

    Raises:
        GatewayRequestError: 413 ``body_too_large`` over the limit.
    """
    declared = request.headers.get("content-length")
    too_large = GatewayRequestError(
        413, "body_too_large", f"the request body exceeds the limit of {limit} bytes"
    )
    if declared is not None and declared.isdigit() and int(declared) > limit:
        raise too_large
    out = bytearray()
    async for chunk in request.stream():
        out += chunk
        if len(out) > limit:
            raise too_large
    return bytes(out)


class Call:
    """Per-request state shared by the synchronous and streamed endings."""

    def __init__(self, gw: Gateway, span: trace.Span, t0: float, cls: TrafficClass) -> None:
        """Created once the request holds a class slot."""
        self.gw, self.span, self.t0, self.cls = gw, span, t0, cls
        self.model = ""
        self.replica: ReplicaState | None = None
        self.reservation: Reservation | None = None
        self.key: str | None = None
        self.body: dict[str, Any] = {}
        self.finished = False

    def finish(
        self,
        outcome: CallOutcome,
        error: tuple[str, str] | None,
        body: bytes | None,
        media: str = "text/event-stream",
        status: int = 200,
    ) -> None:
        """End the span, free the slot and the replica, settle the limit, feed cache/scaler."""
        if self.finished:
            return
        self.finished = True
        gw = self.gw
        try:
            attrs = response_attributes(
                outcome, capture_content=gw.settings.gateway_capture_content
            )
            if error is not None:
                attrs["error.type"] = error[0]
                self.span.set_status(Status(StatusCode.ERROR, error[1][:200]))
            self.span.set_attributes(attrs)  # one call: the SDK's per-call overhead once
            if self.reservation is not None:
                used = None
                if outcome.input_tokens is not None and outcome.output_tokens is not None:
                    used = outcome.input_tokens + outcome.output_tokens
                gw.limiter.settle(self.reservation, used)
            if outcome.time_to_first_chunk_s is not None:
                gw.scaler.ttft_s[self.model].add(outcome.time_to_first_chunk_s)
            ok = storable(status, outcome, error=error is not None)
            if body is not None and self.replica is not None and ok:
                gw.cache.put(self.key, body, media, outcome, self.replica.url)
        finally:
            self.span.end()
            gw.gate.release(self.cls)
            gw.scaler.in_flight[self.model] -= 1
            if self.replica is not None:
                self.replica.outstanding -= 1


def _route(
    gw: Gateway, variant: str, body: dict[str, Any], tried: list[str], retry: bool
) -> tuple[ReplicaState, dict[str, Any]]:
    """A replica for ``variant`` by the model's policy (counted as outstanding) and its span
    attributes.

    Raises:
        NoReplicaError: no eligible replica (left).
    """
    routing = gw.config.fleet.routing
    cands = gw.fleet.eligible(variant, exclude=tried)
    policy = routing.policy_for(variant)
    key = prefix_key(body, routing.prefix_chars) if policy == "prefix" else None
    replica, reason = choose_replica(cands, policy, key, routing.load_factor)
    replica.outstanding += 1
    replica.served += 1
    return replica, {
        "driftline.replica": replica.url,
        "driftline.route.reason": "retry" if retry else reason,
        "server.address": replica.host,
        "server.port": replica.port,
    }


async def _send(
    gw: Gateway, call: Call, variant: str, path: str, payload: bytes, headers: dict[str, str]
) -> aiohttp.ClientResponse:
    """POST to ``call.replica`` (routed before the span started); one retry elsewhere on
    connection error or 5xx.

    Raises:
        NoReplicaError: no eligible replica left for the retry.
        aiohttp.ClientError, TimeoutError: the last attempt failed in transport.
    """
    tried: list[str] = []
    for attempt in range(2):
        if attempt == 1:
            if call.replica is not None:
                call.replica.outstanding -= 1
                call.replica = None
            call.replica, attrs = _route(gw, variant, call.body, tried, retry=True)
            call.span.set_attributes(attrs)
        replica = call.replica
        assert replica is not None
        try:
            resp = await gw.session.post(replica.url + path, data=payload, headers=headers)
        except aiohttp.ServerDisconnectedError:
            if attempt == 1:  # a stale keep-alive connection gets one retry, no ejection
                gw.fleet.failed(replica)
                raise
            continue
        except (aiohttp.ClientConnectionError, TimeoutError):
            gw.fleet.failed(replica)
            tried.append(replica.url)
            if attempt == 1 or not _others(gw, variant, tried):
                raise
            continue
        if resp.status not in _RETRYABLE:
            gw.fleet.succeeded(replica)
            return resp
        gw.fleet.failed(replica)
        tried.append(replica.url)
        if attempt == 1 or not _others(gw, variant, tried):
            return resp
        resp.release()
    raise AssertionError("unreachable")


def _others(gw: Gateway, variant: str, tried: list[str]) -> bool:
    try:
        return bool(gw.fleet.eligible(variant, exclude=tried))
    except NoReplicaError:
        return False


def _span(gw: Gateway, request: Request, attrs: dict[str, Any], start_ns: int) -> trace.Span:
    return gw.tracer.start_span(
        f"{attrs['gen_ai.operation.name']} {attrs['gen_ai.request.model']}",
        context=_PROPAGATOR.extract(request.headers),
        kind=SpanKind.CLIENT,
        attributes=attrs,
        start_time=start_ns,
    )


async def proxy(gw: Gateway, request: Request, operation: str, path: str) -> Response:
    """Answer one ``/v1/chat/completions`` or ``/v1/completions`` request (module doc)."""
    start_ns = time.time_ns()
    t0 = time.perf_counter()
    try:  # the key first, from the head: nobody unknown makes the gateway read a body
        tenant = _tenant_for(gw.config, request.headers.get("authorization"))
        raw = await read_body(request, gw.settings.gateway_max_body_bytes)
    except GatewayRequestError as exc:
        return error_response(exc.status, exc.code, str(exc))
    try:
        body = orjson.loads(raw)
    except orjson.JSONDecodeError:
        return error_response(400, "invalid_json", "the request body is not valid JSON")
    if not isinstance(body, dict):
        return error_response(400, "invalid_json", "the request body must be a JSON object")
    try:
        rollout, variant = await gw.pick(request, body)
        fwd, max_tokens = apply_token_budget(body, gw.settings.max_output_tokens)
        cls = traffic_class(gw, request, rollout)
    except GatewayRequestError as exc:
        return error_response(exc.status, exc.code, str(exc))
    fwd["model"] = variant
    stream = bool(body.get("stream"))
    attrs = request_attributes(
        operation=operation,
        variant=variant,
        rollout=rollout,
        body=body,
        max_tokens=max_tokens,
        user_id=user_of(request.headers, body),
        session_id=session_of(request.headers, body),
        tenant=tenant,
        server_address=None,
        server_port=None,
        capture_content=gw.settings.gateway_capture_content,
    )
    attrs["driftline.traffic_class"] = cls
    try:
        reservation = gw.limiter.reserve(tenant, estimate_input_tokens(len(raw)) + max_tokens)
    except RateLimitedError as exc:
        span = _span(gw, request, {**attrs, "error.type": "rate_limited"}, start_ns)
        span.set_status(Status(StatusCode.ERROR, str(exc)[:200]))
        span.end()
        return error_response(429, "rate_limited", str(exc), headers=exc.headers)
    key = cache_key(tenant, path, fwd) if gw.cache.config.enabled else None
    hit = gw.cache.get(key)
    if hit is not None:
        outcome = hit.outcome
        ttfc = time.perf_counter() - t0 if outcome.time_to_first_chunk_s is not None else None
        outcome = CallOutcome(**{**outcome.__dict__, "time_to_first_chunk_s": ttfc, "itl": None})
        hit_attrs = {
            **attrs,
            "driftline.cache.hit": True,
            "driftline.gateway.queue_s": 0.0,
            **response_attributes(outcome, capture_content=False),
        }
        span = _span(gw, request, hit_attrs, start_ns)
        span.end()
        gw.limiter.settle(reservation, 0)  # no engine tokens spent
        headers = {**reservation.headers, "x-driftline-cache": "hit"}
        return Response(hit.body, media_type=hit.media_type, headers=headers)
    client_usage = True
    if stream:
        fwd, client_usage = with_include_usage(fwd)
    model = gw.model_label(variant)
    gw.scaler.queued[model] += 1
    try:
        queued_s = await gw.gate.acquire(cls)
    except OverloadedError as exc:
        gw.limiter.settle(reservation, 0)
        retry = {"Retry-After": str(exc.retry_after_s)}
        return error_response(429, "overloaded", str(exc), headers=retry)
    finally:
        gw.scaler.queued[model] -= 1
    gw.scaler.in_flight[model] += 1
    gw.scaler.queue_s[model].add(queued_s)
    attrs["driftline.gateway.queue_s"] = queued_s
    # the first replica is chosen before the span starts, so all request attributes go to
    # the SDK in one call (each set_attributes call costs a lock and a validation pass)
    replica: ReplicaState | None = None
    unrouted: NoReplicaError | None = None
    try:
        replica, route_attrs = _route(gw, variant, body, [], retry=False)
        attrs.update(route_attrs)
    except NoReplicaError as exc:
        unrouted = exc
    span = _span(gw, request, attrs, start_ns)
    call = Call(gw, span, t0, cls)
    call.model, call.reservation, call.key = model, reservation, key
    call.body, call.replica = body, replica
    headers = {"content-type": "application/json", "accept-encoding": "identity"}
    _PROPAGATOR.inject(headers, context=trace.set_span_in_context(span))
    out_headers = {
        **reservation.headers,
        "x-driftline-trace-id": format(span.get_span_context().trace_id, "032x"),
        "x-driftline-variant": variant,
        "x-driftline-queue-s": f"{queued_s:.6f}",
    }
    if rollout:
        out_headers["x-driftline-rollout"] = rollout
    handed_off = False
    try:
        if unrouted is not None:
            raise unrouted
        resp = await _send(gw, call, variant, path, orjson.dumps(fwd), headers)
        if call.replica is not None:
            out_headers["x-driftline-replica"] = call.replica.url
        if resp.status >= 400 or not stream:
            content = await resp.read()
            resp.release()
            media = resp.headers.get("content-type", "application/json")
            if resp.status >= 400:
                text = content.decode(errors="replace")
                call.finish(CallOutcome(), (str(resp.status), text), None)
            else:
                try:
                    outcome, err = outcome_from_json(orjson.loads(content)), None
                except orjson.JSONDecodeError:
                    outcome = CallOutcome()
                    err = ("invalid_response", "engine returned invalid JSON")
                call.finish(outcome, err, content, media, resp.status)
            return Response(content, status_code=resp.status, media_type=media, headers=out_headers)
        handed_off = True

        def done(r: StreamResult) -> None:
            call.finish(r.outcome, r.error, r.body)

        return LeanStreamingResponse(
            relay(resp, t0, client_usage, key is not None, done),
            status_code=resp.status,
            headers={**out_headers, "cache-control": "no-cache"},
        )
    except NoReplicaError as exc:
        unserved = exc.reason == "unserved"
        status, code = (404, "model_not_served") if unserved else (503, "no_replica")
        call.finish(CallOutcome(), (code, str(exc)), None)
        return error_response(status, code, str(exc))
    except (aiohttp.ClientError, TimeoutError) as exc:
        kind = error_type(exc)
        call.finish(CallOutcome(), (kind, str(exc) or kind), None)
        return error_response(502, "engine_unavailable", f"engine error: {kind}")
    finally:
        if not handed_off:
            call.finish(CallOutcome(), ("cancelled", "the client went away"), None)
