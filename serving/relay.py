"""The streamed half of a proxied call: relay the engine's SSE bytes, learn the outcome.

Lean by design (it runs once per engine chunk at every stream): the engine's chunk is split
into complete events only to read them (one ``orjson.loads`` each, no re-encoding); the
events of one chunk go to the client as one write; the single-line ``data: ...`` fast path
avoids the general parser. The usage-only chunk the gateway asked for is withheld from clients
that did not ask for it.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass

import aiohttp
import orjson
from starlette.responses import Response
from starlette.types import Receive, Scope, Send

from serving.stream import StreamAccumulator, event_data
from serving.telemetry import CallOutcome, itl_summary


@dataclass
class StreamResult:
    """How the relay ended: the outcome, an error ``(type, message)`` or None, and the bytes
    the client received (kept only when ``keep`` was set, for the response cache)."""

    outcome: CallOutcome
    error: tuple[str, str] | None
    body: bytes | None


def error_type(exc: BaseException) -> str:
    """Stable ``error.type`` for a transport failure (names as the httpx-based gateway used)."""
    if isinstance(exc, aiohttp.ClientConnectorError):
        return "ConnectError"
    if isinstance(exc, aiohttp.ServerDisconnectedError | aiohttp.ClientPayloadError):
        return "ReadError"
    if isinstance(exc, TimeoutError):
        return "ReadTimeout"
    return type(exc).__name__


def outcome_of(acc: StreamAccumulator, t0: float) -> CallOutcome:
    """The :class:`CallOutcome` of an accumulated stream; TTFC from ``t0`` (perf_counter s)."""
    first = acc.token_times[0] if acc.token_times else acc.first_chunk_at
    return CallOutcome(
        response_id=acc.response_id,
        response_model=acc.response_model,
        texts={i: acc.text(i) for i in acc.choice_indices()},
        finish_reasons=acc.finish_reasons,
        input_tokens=acc.input_tokens,
        output_tokens=acc.output_tokens,
        cached_input_tokens=acc.cached_input_tokens,
        time_to_first_chunk_s=None if first is None else first - t0,
        itl=itl_summary(acc.token_times),
    )


async def relay(
    resp: aiohttp.ClientResponse,
    t0: float,
    client_usage: bool,
    keep: bool,
    done: Callable[[StreamResult], None],
) -> AsyncIterator[bytes]:
    """Yield the client's bytes; call ``done`` exactly once at the end (also on cancel)."""
    acc = StreamAccumulator(clock=time.perf_counter)
    kept: list[bytes] | None = [] if keep else None
    buf = b""
    error: tuple[str, str] | None = None
    try:
        async for chunk in resp.content.iter_any():
            if buf:
                chunk = buf + chunk
            if b"\r" in chunk:  # on the joined bytes: a "\r\n" may straddle two reads
                chunk = chunk.replace(b"\r\n", b"\n")
            end = chunk.rfind(b"\n\n") + 2
            if end < 2:
                buf = chunk
                continue
            complete, buf = (chunk, b"") if end == len(chunk) else (chunk[:end], chunk[end:])
            if complete.startswith(b"data: ") and complete.find(b"\n") == end - 2:
                # one single-line event, the common case (vLLM writes one event at a time)
                if acc.add(complete[6 : end - 2]) and not client_usage:
                    continue
                payload = complete
            else:
                dropped = False
                out: list[bytes] = []
                for ev in complete.split(b"\n\n")[:-1]:
                    if ev.startswith(b"data: ") and b"\n" not in ev:
                        data: bytes | None = ev[6:]
                    else:
                        data = event_data(ev + b"\n\n")
                    if data is not None and acc.add(data) and not client_usage:
                        dropped = True
                        continue
                    out.append(ev)
                payload = complete if not dropped else b"".join(e + b"\n\n" for e in out)
            if kept is not None:
                kept.append(payload)
            if payload:
                yield payload
        if buf.strip():
            yield buf
        if acc.error is not None:
            error = (acc.error, "engine reported an error in the stream")
        elif not acc.done:
            error = ("incomplete_stream", "the engine closed the stream before [DONE]")
    except (aiohttp.ClientError, TimeoutError) as exc:
        error = (error_type(exc), str(exc) or type(exc).__name__)
        err = {"code": "engine_unavailable", "message": error[1], "type": "server_error"}
        yield b"data: " + orjson.dumps({"error": err}) + b"\n\n"
    except BaseException:
        error = ("cancelled", "the client went away")
        raise
    finally:
        resp.release()
        outcome = outcome_of(acc, t0)
        done(StreamResult(outcome, error, b"".join(kept) if kept is not None else None))


class LeanStreamingResponse(Response):
    """Stream ``body`` with one ASGI ``send`` per chunk and a plain asyncio disconnect watcher.

    Starlette's ``StreamingResponse`` wraps each stream in an anyio task group on ASGI
    servers that report spec < 2.4 (uvicorn does), which cost more CPU per stream than the
    relay itself. Here a single task waits on ``receive()``; on ``http.disconnect`` it cancels
    the streaming task, so the relay's ``finally`` closes the engine response (the engine
    stops generating) and ends the span as ``cancelled``.
    """

    def __init__(
        self,
        body: AsyncIterator[bytes],
        *,
        status_code: int,
        headers: dict[str, str],
        media_type: str = "text/event-stream",
    ) -> None:
        """Same meaning as Starlette's ``StreamingResponse`` arguments."""
        super().__init__(None, status_code=status_code, headers=headers, media_type=media_type)
        self.raw_headers = [(k, v) for k, v in self.raw_headers if k != b"content-length"]
        self.body_iter = body
        #: True once ``http.response.start`` was handed to the server (an error after it can
        #: no longer become a 500 response)
        self.started = False

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        """ASGI entry point."""
        streamer = asyncio.current_task()

        async def watch() -> None:
            while (await receive())["type"] != "http.disconnect":
                pass
            if streamer is not None:
                streamer.cancel()

        watcher = asyncio.create_task(watch())
        try:
            self.started = True
            await send(
                {
                    "type": "http.response.start",
                    "status": self.status_code,
                    "headers": self.raw_headers,
                }
            )
            async for chunk in self.body_iter:
                await send({"type": "http.response.body", "body": chunk, "more_body": True})
            await send({"type": "http.response.body", "body": b"", "more_body": False})
        except asyncio.CancelledError:
            if watcher.done():  # the client left: not an error of the server
                return
            raise
        except OSError:
            return
        finally:
            watcher.cancel()
