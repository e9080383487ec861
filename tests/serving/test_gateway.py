"""The gateway against a real in-process OpenAI-compatible engine: routing, spans, traceparent,
SSE passthrough, overload, token budget, tenants and failures."""

from __future__ import annotations

import asyncio
import json
import socket
import threading
from collections import Counter
from collections.abc import Callable

import httpx
import pytest
from opentelemetry.trace import SpanKind, StatusCode

from serving.config import GatewayConfig, Rollout
from tests.serving.conftest import RunningGateway, ab_config, attrs, ids

CHAT = {
    "messages": [{"role": "system", "content": "be brief"}, {"role": "user", "content": "hi there"}]
}


def _sse_data(text: str) -> list[str]:
    return [ln[6:] for ln in text.splitlines() if ln.startswith("data: ")]


def test_stream_span_has_the_semconv_contract(make_gateway: Callable[..., RunningGateway]) -> None:
    gw = make_gateway()
    body = {
        **CHAT,
        "model": "bot",
        "user": "alice",
        "stream": True,
        "max_tokens": 6,
        "temperature": 0.5,
    }
    r = httpx.post(
        f"{gw.url}/v1/chat/completions", json=body, headers={"x-driftline-session": "sess-9"}
    )
    assert r.status_code == 200 and r.headers["content-type"].startswith("text/event-stream")
    (span,) = gw.spans.get_finished_spans()
    a = attrs(span)
    variant = r.headers["x-driftline-variant"]
    assert span.kind == SpanKind.CLIENT and span.name == f"chat {variant}"
    assert a["gen_ai.operation.name"] == "chat"
    assert a["gen_ai.provider.name"] == "vllm"
    assert a["gen_ai.request.model"] == variant == a["driftline.variant"]
    assert a["gen_ai.response.model"] == variant
    assert a["driftline.rollout"] == "bot"
    assert a["gen_ai.request.stream"] is True
    assert a["gen_ai.request.max_tokens"] == 6
    assert a["gen_ai.request.temperature"] == 0.5
    assert a["gen_ai.conversation.id"] == "sess-9" and a["user.id"] == "alice"
    assert a["gen_ai.response.id"].startswith("chatcmpl-echo")
    assert a["gen_ai.usage.output_tokens"] == 6 and a["gen_ai.usage.input_tokens"] == 5
    assert tuple(a["gen_ai.response.finish_reasons"]) == ("length",)
    assert a["gen_ai.response.time_to_first_chunk"] > 0
    assert 0 <= a["driftline.itl.p50_s"] <= a["driftline.itl.p95_s"] <= a["driftline.itl.max_s"]
    msgs_in = json.loads(a["gen_ai.input.messages"])
    assert msgs_in == [
        {"role": "system", "parts": [{"type": "text", "content": "be brief"}]},
        {"role": "user", "parts": [{"type": "text", "content": "hi there"}]},
    ]
    (out,) = json.loads(a["gen_ai.output.messages"])
    streamed = "".join(
        json.loads(d)["choices"][0]["delta"].get("content", "")
        for d in _sse_data(r.text)
        if d != "[DONE]"
    )
    assert out == {
        "role": "assistant",
        "parts": [{"type": "text", "content": streamed}],
        "finish_reason": "length",
    }
    assert "error.type" not in a and span.status.status_code == StatusCode.UNSET


def test_traceparent_sent_from_inside_the_client_span(
    make_gateway: Callable[..., RunningGateway],
) -> None:
    gw = make_gateway()
    incoming = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"
    r = httpx.post(
        f"{gw.url}/v1/chat/completions",
        json={**CHAT, "user": "u"},
        headers={"traceparent": incoming},
    )
    assert r.status_code == 200
    (span,) = gw.spans.get_finished_spans()
    trace_hex, span_hex = ids(span)
    sent = gw.engine.state.seen[-1]["traceparent"]
    version, trace_id, parent_id, _flags = sent.split("-")
    assert version == "00"
    assert trace_id == trace_hex == "0af7651916cd43dd8448eb211c80319c"
    assert parent_id == span_hex  # engine span becomes the CLIENT span's child
    assert span.parent is not None and format(span.parent.span_id, "016x") == "b7ad6b7169203331"
    assert r.headers["x-driftline-trace-id"] == trace_id


def test_stream_passthrough_is_what_the_engine_sends(
    make_gateway: Callable[..., RunningGateway],
) -> None:
    gw = make_gateway()
    body = {**CHAT, "model": "lora-a", "stream": True, "max_tokens": 4}
    direct = httpx.post(f"{gw.engine.url}/v1/chat/completions", json=body).text
    via = httpx.post(f"{gw.url}/v1/chat/completions", json=body).text

    def strip_ids(text: str) -> list[object]:
        out: list[object] = []
        for d in _sse_data(text):
            if d == "[DONE]":
                out.append(d)
                continue
            obj = json.loads(d)
            obj.pop("id"), obj.pop("created")
            out.append(obj)
        return out

    assert strip_ids(via) == strip_ids(direct)
    assert all(json.loads(d).get("choices") for d in _sse_data(via) if d != "[DONE]")
    # the gateway asked the engine for usage, the client did not get the extra chunk
    assert gw.engine.state.seen[-1]["body"]["stream_options"] == {"include_usage": True}
    (span,) = gw.spans.get_finished_spans()
    assert attrs(span)["gen_ai.usage.output_tokens"] == 4
    # a client that asks for usage gets the chunk
    asked = {**body, "stream_options": {"include_usage": True}}
    usage_chunks = [
        json.loads(d)
        for d in _sse_data(httpx.post(f"{gw.url}/v1/chat/completions", json=asked).text)
        if d != "[DONE]"
    ]
    assert usage_chunks[-1]["choices"] == [] and usage_chunks[-1]["usage"]["completion_tokens"] == 4


def test_non_stream_chat_and_text_completion(make_gateway: Callable[..., RunningGateway]) -> None:
    gw = make_gateway()
    r = httpx.post(
        f"{gw.url}/v1/completions", json={"model": "base", "prompt": "tell me", "max_tokens": 3}
    )
    assert r.status_code == 200 and r.json()["choices"][0]["text"]
    (span,) = gw.spans.get_finished_spans()
    a = attrs(span)
    assert a["gen_ai.operation.name"] == "text_completion" and span.name == "text_completion base"
    assert "driftline.rollout" not in a  # pinned model, no rollout
    assert a["gen_ai.request.stream"] is False
    assert "gen_ai.response.time_to_first_chunk" not in a and "driftline.itl.p50_s" not in a
    assert json.loads(a["gen_ai.input.messages"]) == [
        {"role": "user", "parts": [{"type": "text", "content": "tell me"}]}
    ]
    assert a["gen_ai.usage.output_tokens"] == 3


def test_routing_follows_weights_and_is_sticky(make_gateway: Callable[..., RunningGateway]) -> None:
    gw = make_gateway()
    seen: dict[str, set[str]] = {}
    counts: Counter[str] = Counter()
    with httpx.Client() as c:
        for i in range(300):
            user = f"user-{i % 100}"
            r = c.post(
                f"{gw.url}/v1/chat/completions", json={**CHAT, "user": user, "max_tokens": 1}
            )
            seen.setdefault(user, set()).add(r.headers["x-driftline-variant"])
            counts[r.headers["x-driftline-variant"]] += 1
    assert all(len(v) == 1 for v in seen.values())
    assert set(counts) == {"base", "lora-a"}
    models_at_engine = Counter(s["model"] for s in gw.engine.state.seen)
    assert models_at_engine == counts  # the engine received the chosen variant as `model`


def test_token_budget_caps_what_the_engine_receives(
    make_gateway: Callable[..., RunningGateway],
) -> None:
    gw = make_gateway(max_output_tokens=3)
    r = httpx.post(f"{gw.url}/v1/chat/completions", json={**CHAT, "max_tokens": 500})
    assert r.status_code == 200
    assert gw.engine.state.seen[-1]["body"]["max_tokens"] == 3
    assert r.json()["usage"]["completion_tokens"] == 3
    (span,) = gw.spans.get_finished_spans()
    assert attrs(span)["gen_ai.request.max_tokens"] == 3


def test_overload_answers_429_with_retry_after(
    make_gateway: Callable[..., RunningGateway],
) -> None:
    gw = make_gateway(max_concurrency=1, max_queue=1, retry_after_s=3)
    gw.engine.state.ttft_s = 0.6

    async def scenario() -> list[httpx.Response]:
        async with httpx.AsyncClient(timeout=30) as c:

            async def post() -> httpx.Response:
                return await c.post(f"{gw.url}/v1/chat/completions", json={**CHAT, "max_tokens": 1})

            first = asyncio.create_task(post())
            second = asyncio.create_task(post())
            for _ in range(200):  # wait until one runs and one waits
                h = (await c.get(f"{gw.url}/healthz")).json()
                if h["in_flight"] == 1 and h["waiting"] == 1:
                    break
                await asyncio.sleep(0.01)
            third = await post()
            return [await first, await second, third]

    first, second, third = asyncio.run(scenario())
    assert first.status_code == 200 and second.status_code == 200
    assert third.status_code == 429
    assert third.headers["retry-after"] == "3"
    assert third.json()["error"]["code"] == "overloaded"
    assert len(gw.spans.get_finished_spans()) == 2  # rejected requests never reach the engine
    assert httpx.get(f"{gw.url}/healthz").json() == {
        "status": "ok",
        "in_flight": 0,
        "waiting": 0,
        "rejected": 1,
    }


def test_api_keys_map_to_tenants(make_gateway: Callable[..., RunningGateway]) -> None:
    gw = make_gateway(ab_config(api_keys={"sk-acme": "acme"}))
    assert httpx.post(f"{gw.url}/v1/chat/completions", json=CHAT).status_code == 401
    r = httpx.post(
        f"{gw.url}/v1/chat/completions", json=CHAT, headers={"authorization": "Bearer sk-acme"}
    )
    assert r.status_code == 200
    (span,) = gw.spans.get_finished_spans()
    assert attrs(span)["driftline.tenant"] == "acme"


@pytest.mark.parametrize("stream", [False, True])
def test_engine_errors_mark_the_span(
    make_gateway: Callable[..., RunningGateway], stream: bool
) -> None:
    gw = make_gateway()
    r = httpx.post(
        f"{gw.url}/v1/chat/completions", json={**CHAT, "model": "no-such-model", "stream": stream}
    )
    assert r.status_code == 404  # the engine's status and body pass through
    (span,) = gw.spans.get_finished_spans()
    assert span.status.status_code == StatusCode.ERROR
    assert attrs(span)["error.type"] == "404"


def test_engine_down_gives_502_and_an_error_span(
    make_gateway: Callable[..., RunningGateway],
) -> None:
    gw = make_gateway(engine_url="http://127.0.0.1:9")
    r = httpx.post(f"{gw.url}/v1/chat/completions", json=CHAT)
    assert r.status_code == 502 and r.json()["error"]["code"] == "engine_unavailable"
    (span,) = gw.spans.get_finished_spans()
    assert span.status.status_code == StatusCode.ERROR
    assert attrs(span)["error.type"] == "ConnectError"


def test_bad_requests_and_models_listing(make_gateway: Callable[..., RunningGateway]) -> None:
    cfg = GatewayConfig(rollouts={"bot": Rollout("bot", {"base": 1.0})})
    gw = make_gateway(cfg)
    assert httpx.post(f"{gw.url}/v1/chat/completions", content=b"{not json").status_code == 400
    assert httpx.post(f"{gw.url}/v1/chat/completions", json=CHAT).status_code == 400  # no model
    r = httpx.post(
        f"{gw.url}/v1/chat/completions", json=CHAT, headers={"x-driftline-rollout": "unknown"}
    )
    assert r.status_code == 404 and r.json()["error"]["code"] == "rollout_not_found"
    models = {m["id"]: m for m in httpx.get(f"{gw.url}/v1/models").json()["data"]}
    assert {"base", "lora-a", "lora-b", "bot"} <= set(models)
    assert models["bot"]["driftline_variants"] == ["base"]
    assert gw.spans.get_finished_spans() == ()


def _scripted_engine(script: list[str]) -> tuple[str, threading.Thread, list[bytes]]:
    """A raw-socket engine: for each accepted connection, ``script`` says per request
    ``"ok"`` (a JSON chat completion, connection kept) or ``"drop"`` (close unanswered)."""
    answer = json.dumps(
        {
            "id": "chatcmpl-raw",
            "object": "chat.completion",
            "model": "base",
            "choices": [
                {
                    "index": 0,
                    "message": {"role": "assistant", "content": "hi"},
                    "finish_reason": "stop",
                }
            ],
            "usage": {"prompt_tokens": 3, "completion_tokens": 1},
        }
    ).encode()
    reply = b"HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: %d\r\n\r\n%s" % (
        len(answer),
        answer,
    )
    lsock = socket.create_server(("127.0.0.1", 0))
    seen: list[bytes] = []

    def serve() -> None:
        steps = iter(script)
        with lsock:
            for first in steps:
                step: str | None = first
                conn, _ = lsock.accept()
                with conn:
                    while step is not None:
                        data = b""
                        while b"\r\n\r\n" not in data or not data.endswith(b"}"):
                            data += conn.recv(65536)
                        seen.append(data)
                        if step == "drop":
                            break
                        conn.sendall(reply)
                        step = next(steps, None)

    t = threading.Thread(target=serve, daemon=True)
    t.start()
    return f"http://127.0.0.1:{lsock.getsockname()[1]}", t, seen


def test_stale_keepalive_connection_is_retried_without_ejection(
    make_gateway: Callable[..., RunningGateway],
) -> None:
    # connection 1 answers one request, then closes on the next unanswered (the engine's
    # keep-alive timer firing as the gateway reuses it); connection 2 answers
    url, thread, seen = _scripted_engine(["ok", "drop", "ok"])
    gw = make_gateway(ab_config(), engine_url=url)
    for _ in range(2):
        r = httpx.post(f"{gw.url}/v1/chat/completions", json={**CHAT, "model": "bot"})
        assert r.status_code == 200 and r.json()["choices"][0]["message"]["content"] == "hi"
    thread.join(5)
    assert len(seen) == 3  # the second request was sent twice
    (replica,) = gw.app.gateway.fleet.replicas
    assert replica.failures == 0 and replica.ejected_until == 0.0
    spans = gw.spans.get_finished_spans()
    assert len(spans) == 2 and all("error.type" not in attrs(s) for s in spans)
