"""Server-sent events from an OpenAI-compatible engine: split, inspect, accumulate.

The gateway passes the engine's SSE bytes through event by event (unchanged, except that the
usage-only chunk the gateway asked for is withheld from clients that did not ask for it) and
feeds each event's JSON to :class:`StreamAccumulator` to learn the response id, model, text,
finish reasons, token usage and per-token arrival times. Event framing per the WHATWG HTML
standard, "Server-sent events" §9.2.6 (events end at a blank line; ``data:`` lines).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import orjson

DONE = b"[DONE]"


class SseSplitter:
    """Incrementally split a byte stream into complete SSE events (each with its blank line).

    Line endings are normalised to ``\n`` (vLLM and OpenAI send ``\n`` already).
    """

    def __init__(self) -> None:
        self._buf = b""

    def feed(self, chunk: bytes) -> list[bytes]:
        """Add ``chunk``; return the complete events now available, terminator included."""
        # normalise CRLF on the whole buffer: a "\r\n" may straddle two chunks
        self._buf = (self._buf + chunk).replace(b"\r\n", b"\n")
        events: list[bytes] = []
        while True:
            idx = self._buf.find(b"\n\n")
            if idx < 0:
                return events
            events.append(self._buf[: idx + 2])
            self._buf = self._buf[idx + 2 :]

    def rest(self) -> bytes:
        """Bytes after the last complete event (a truncated stream)."""
        return self._buf


def event_data(event: bytes) -> bytes | None:
    """The joined ``data:`` payload of one SSE event, None when it has no data lines."""
    lines = [ln[5:].lstrip(b" ") for ln in event.split(b"\n") if ln.startswith(b"data:")]
    return b"\n".join(lines) if lines else None


@dataclass
class StreamAccumulator:
    """What a streamed completion said, gathered chunk by chunk.

    Times are ``clock()`` readings in seconds. ``token_times`` holds the arrival time of every
    chunk that carried generated text (vLLM sends one chunk per decoded token).
    """

    clock: Callable[[], float] = time.perf_counter
    response_id: str | None = None
    response_model: str | None = None
    texts: dict[int, list[str]] = field(default_factory=dict)
    finish_reasons: dict[int, str] = field(default_factory=dict)
    input_tokens: int | None = None
    output_tokens: int | None = None
    cached_input_tokens: int | None = None
    first_chunk_at: float | None = None
    token_times: list[float] = field(default_factory=list)
    done: bool = False
    error: str | None = None

    def add(self, data: bytes) -> bool:
        """Consume one event payload; return True when it is a usage-only chunk (no choices).

        Runs once per streamed token at every stream, so it reads only what the outcome needs
        (id, model, usage, text, finish reasons) with as few calls as it can.
        """
        if data[:1] != b"{" and data.strip() == DONE:
            self.done = True
            return False
        now = self.clock()
        try:
            obj = orjson.loads(data)
        except orjson.JSONDecodeError:
            return False
        if type(obj) is not dict:  # orjson decodes objects to exact dicts
            return False
        if self.first_chunk_at is None:
            self.first_chunk_at = now
        if "error" in obj and "choices" not in obj:
            err = obj["error"]
            self.error = (
                str(err.get("type") or err.get("code") or "error")
                if isinstance(err, dict)
                else "error"
            )
            return False
        if not self.response_id:
            self.response_id = obj.get("id")
        if not self.response_model:
            self.response_model = obj.get("model")
        usage = obj.get("usage")
        if usage is not None:
            self._usage(usage)
        choices = obj.get("choices")
        if not choices:
            return usage is not None
        carried_text = False
        for ch in choices:
            delta = ch.get("delta")
            piece = delta.get("content") if isinstance(delta, dict) else ch.get("text")
            reason = ch.get("finish_reason")
            if piece or reason:
                idx = int(ch.get("index", 0))
                if piece:
                    texts = self.texts.get(idx)
                    if texts is None:
                        self.texts[idx] = [piece]
                    else:
                        texts.append(piece)
                    carried_text = True
                if reason:
                    self.finish_reasons[idx] = str(reason)
        if carried_text:
            self.token_times.append(now)
        return False

    def _usage(self, usage: Any) -> None:
        if not isinstance(usage, dict):
            return
        if isinstance(usage.get("prompt_tokens"), int):
            self.input_tokens = usage["prompt_tokens"]
        if isinstance(usage.get("completion_tokens"), int):
            self.output_tokens = usage["completion_tokens"]
        details = usage.get("prompt_tokens_details")
        if isinstance(details, dict) and isinstance(details.get("cached_tokens"), int):
            self.cached_input_tokens = details["cached_tokens"]

    def text(self, index: int = 0) -> str:
        """Concatenated generated text of choice ``index`` ('' if none)."""
        return "".join(self.texts.get(index, []))

    def choice_indices(self) -> list[int]:
        """Indices of every choice seen (text or finish reason)."""
        return sorted(set(self.texts) | set(self.finish_reasons))


def with_include_usage(body: dict[str, Any]) -> tuple[dict[str, Any], bool]:
    """Copy of a streaming request ``body`` that asks the engine for the usage chunk.

    Returns ``(new_body, client_asked)``; ``client_asked`` tells whether the client itself set
    ``stream_options.include_usage`` (then the usage chunk is passed through to it).
    """
    opts = body.get("stream_options")
    client_asked = isinstance(opts, dict) and bool(opts.get("include_usage"))
    new_opts = dict(opts) if isinstance(opts, dict) else {}
    new_opts["include_usage"] = True
    return {**body, "stream_options": new_opts}, client_asked
