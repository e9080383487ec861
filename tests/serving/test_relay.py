"""The SSE relay over real sockets: framing edge cases, usage withholding, the outcome."""

from __future__ import annotations

import asyncio
import json
from typing import Any

import aiohttp
import pytest
from aiohttp import web

from serving.relay import StreamResult, relay


def _ev(obj: dict[str, Any]) -> bytes:
    return b"data: " + json.dumps(obj).encode() + b"\n\n"


CHUNKS = [
    {"id": "c1", "model": "m", "choices": [{"index": 0, "delta": {"role": "assistant"}}]},
    {"id": "c1", "model": "m", "choices": [{"index": 0, "delta": {"content": "Hel"}}]},
    {"id": "c1", "model": "m", "choices": [{"index": 0, "delta": {"content": "lo"}}]},
    {
        "id": "c1",
        "model": "m",
        "choices": [{"index": 0, "delta": {"content": "!"}, "finish_reason": "stop"}],
    },
]
USAGE = {
    "id": "c1",
    "model": "m",
    "choices": [],
    "usage": {"prompt_tokens": 7, "completion_tokens": 3},
}
STREAM = b"".join(_ev(c) for c in CHUNKS) + b": keep-alive\n\n" + _ev(USAGE) + b"data: [DONE]\n\n"
USAGE_EVENT = _ev(USAGE)


def _writes(raw: bytes) -> list[list[bytes]]:
    """Ways an engine may cut ``raw`` into writes: one event each, all at once, odd cuts."""
    events = [e + b"\n\n" for e in raw.split(b"\n\n")[:-1]]
    crlf = raw.replace(b"\n", b"\r\n")
    cut = crlf.index(b"\r\n\r\n") + 1  # between "\r" and "\n"
    return [
        events,
        [raw],
        [raw[:5], raw[5:40], raw[40:]],
        [b"".join(events[:3]), b"".join(events[3:])],
        [crlf[:cut], crlf[cut:]],
    ]


async def _relay(writes: list[bytes], client_usage: bool) -> tuple[bytes, StreamResult]:
    async def handler(request: web.Request) -> web.StreamResponse:
        resp = web.StreamResponse(headers={"content-type": "text/event-stream"})
        await resp.prepare(request)
        for w in writes:
            await resp.write(w)
            await asyncio.sleep(0.01)  # separate reads on the other side
        await resp.write_eof()
        return resp

    app = web.Application()
    app.router.add_get("/", handler)
    runner = web.AppRunner(app)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    port = site._server.sockets[0].getsockname()[1]  # type: ignore[union-attr]
    results: list[StreamResult] = []
    try:
        async with aiohttp.ClientSession() as session:
            resp = await session.get(f"http://127.0.0.1:{port}/")
            out = b"".join([b async for b in relay(resp, 0.0, client_usage, True, results.append)])
    finally:
        await runner.cleanup()
    assert len(results) == 1
    return out, results[0]


@pytest.mark.parametrize("case", range(5))
@pytest.mark.parametrize("client_usage", [False, True])
def test_relay_passes_events_through_and_reads_the_outcome(case: int, client_usage: bool) -> None:
    writes = _writes(STREAM)[case]
    out, res = asyncio.run(_relay(writes, client_usage))
    sent = b"".join(writes).replace(b"\r\n", b"\n")
    expected = sent if client_usage else sent.replace(USAGE_EVENT, b"")
    assert out == expected
    assert res.body == out  # what the cache would store is what the client got
    assert res.error is None
    o = res.outcome
    assert o.response_id == "c1" and o.response_model == "m"
    assert o.texts == {0: "Hello!"} and o.finish_reasons == {0: "stop"}
    assert (o.input_tokens, o.output_tokens) == (7, 3)
    assert o.time_to_first_chunk_s is not None and o.time_to_first_chunk_s > 0


def test_relay_reports_a_stream_cut_before_done() -> None:
    cut = STREAM[: STREAM.index(b"data: [DONE]")] + b'data: {"id"'
    out, res = asyncio.run(_relay([cut], True))
    assert out == cut  # the partial event is passed on as it came
    assert res.error is not None and res.error[0] == "incomplete_stream"
    assert res.outcome.texts == {0: "Hello!"}
