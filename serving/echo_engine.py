"""A deterministic OpenAI-compatible engine (chat + completions, SSE streaming, usage).

It stands in for vLLM where the model does not matter: gateway tests, the gateway benchmark,
and ``driftline serving echo`` for demos without a model. Output is a pure function of the
request (model name + prompt words), emitted one "token" (word) per SSE chunk after
``ttft_s`` and then every ``itl_s`` seconds, in the same chunk shapes vLLM sends
(first chunk with ``role``; usage-only chunk with ``choices: []`` when
``stream_options.include_usage``; ``data: [DONE]``). It records the W3C ``traceparent`` of
every request it receives.

Fleet simulation (gateway tests and benchmark): ``healthy=False`` makes ``/health`` answer 503;
``GET /metrics`` exports vLLM's names (``vllm:num_requests_running``,
``vllm:num_requests_waiting``, ``vllm:kv_cache_usage_perc``, ``vllm:prefix_cache_queries``,
``vllm:prefix_cache_hits``) with a ``model_name`` label. The prefix cache is **simulated**: the
prompt's words form blocks of ``prefix_block`` words chained by hash (as vLLM's automatic
prefix caching hashes blocks of tokens with their parent); the longest run of leading blocks
already in this engine's LRU of ``prefix_cache_blocks`` blocks counts as cached tokens
(``usage.prompt_tokens_details.cached_tokens``, and the counters above). No model, no KV.
"""

from __future__ import annotations

import asyncio
import hashlib
import time
from collections import OrderedDict, deque
from collections.abc import AsyncIterator, Sequence
from dataclasses import dataclass, field
from typing import Any

import orjson
from fastapi import FastAPI, Request
from fastapi.responses import JSONResponse, Response, StreamingResponse


@dataclass
class EchoEngineState:
    """Configuration and observations of an echo engine.

    Attributes:
        models: served model names; requests for others get 404 (vLLM behaviour).
        ttft_s: delay before the first token (seconds).
        itl_s: delay between tokens (seconds).
        default_max_tokens: tokens generated when the request sets no limit.
        seen: the last requests as ``{"path", "model", "traceparent", "body"}`` (bounded).
        fail_status: when set, every completion request answers with this HTTP status.
    """

    models: Sequence[str] = ("echo-base", "echo-lora")
    ttft_s: float = 0.0
    itl_s: float = 0.0
    default_max_tokens: int = 16
    seen: deque[dict[str, Any]] = field(default_factory=lambda: deque(maxlen=10_000))
    fail_status: int | None = None
    healthy: bool = True
    prefix_block: int = 16
    prefix_cache_blocks: int = 4096
    max_running: int = 64
    blocks: OrderedDict[bytes, None] = field(default_factory=OrderedDict)
    prefix_queries: int = 0
    prefix_hits: int = 0
    running: int = 0

    def prefix_lookup(self, words: Sequence[str]) -> int:
        """Cached prompt tokens (words) of a request; insert its blocks (simulated cache)."""
        n_full = len(words) // self.prefix_block
        parent = b""
        hit_blocks = 0
        still_hitting = True
        for i in range(n_full):
            chunk = " ".join(words[i * self.prefix_block : (i + 1) * self.prefix_block])
            parent = hashlib.blake2b(parent + chunk.encode(), digest_size=8).digest()
            if still_hitting and parent in self.blocks:
                hit_blocks += 1
                self.blocks.move_to_end(parent)
            else:
                still_hitting = False
                self.blocks[parent] = None
                if len(self.blocks) > self.prefix_cache_blocks:
                    self.blocks.popitem(last=False)
        cached = hit_blocks * self.prefix_block
        self.prefix_queries += len(words)
        self.prefix_hits += cached
        return cached


VOCAB = (
    "alpha",
    "bravo",
    "charlie",
    "delta",
    "echo",
    "foxtrot",
    "golf",
    "hotel",
    "india",
    "juliet",
)


def echo_tokens(model: str, prompt: str, n: int) -> list[str]:
    """The ``n`` tokens the echo engine answers ``prompt`` with (deterministic)."""
    words = prompt.split() or ["empty"]
    seed = int.from_bytes(hashlib.blake2b(f"{model}|{prompt}".encode(), digest_size=4).digest())
    out = []
    for i in range(n):
        w = words[i % len(words)] if i % 2 == 0 else VOCAB[(seed + i) % len(VOCAB)]
        out.append(w if i == 0 else " " + w)
    return out


def _all_words(body: dict[str, Any]) -> list[str]:
    msgs = body.get("messages")
    if isinstance(msgs, list):
        text = " ".join(
            m["content"] for m in msgs if isinstance(m, dict) and isinstance(m.get("content"), str)
        )
    else:
        text = str(body.get("prompt", ""))
    return text.split()


def _prompt_text(body: dict[str, Any], chat: bool) -> str:
    if chat:
        msgs = body.get("messages") or []
        last = msgs[-1].get("content", "") if msgs and isinstance(msgs[-1], dict) else ""
        return (
            last
            if isinstance(last, str)
            else " ".join(p.get("text", "") for p in last if isinstance(p, dict))
        )
    prompt = body.get("prompt", "")
    return prompt if isinstance(prompt, str) else " ".join(map(str, prompt))


def create_echo_engine(state: EchoEngineState) -> FastAPI:
    """Build the echo engine ASGI app around ``state`` (mutable: tests read ``state.seen``)."""
    app = FastAPI(title="driftline echo engine")
    counter = {"n": 0}

    @app.get("/v1/models")
    async def models() -> dict[str, Any]:
        return {
            "object": "list",
            "data": [
                {"id": m, "object": "model", "owned_by": "echo", "parent": None}
                for m in state.models
            ],
        }

    @app.get("/health")
    async def health() -> Response:
        return Response(status_code=200 if state.healthy else 503)

    @app.get("/metrics")
    async def metrics() -> Response:
        lab = '{model_name="%s"}' % (state.models[0] if state.models else "")
        lines = [
            f"vllm:num_requests_running{lab} {state.running}",
            f"vllm:num_requests_waiting{lab} {max(0, state.running - state.max_running)}",
            f"vllm:kv_cache_usage_perc{lab} {min(1.0, state.running / state.max_running)}",
            "# TYPE vllm:prefix_cache_queries counter",
            f"vllm:prefix_cache_queries_total{lab} {state.prefix_queries}",
            "# TYPE vllm:prefix_cache_hits counter",
            f"vllm:prefix_cache_hits_total{lab} {state.prefix_hits}",
        ]
        return Response("\n".join(lines) + "\n", media_type="text/plain; version=0.0.4")

    async def complete(request: Request, chat: bool) -> Response:
        body = orjson.loads(await request.body())
        model = body.get("model")
        state.seen.append(
            {
                "path": request.url.path,
                "model": model,
                "traceparent": request.headers.get("traceparent"),
                "body": body,
            }
        )
        if state.fail_status is not None:
            return JSONResponse(
                {"error": {"message": "injected failure", "code": state.fail_status}},
                status_code=state.fail_status,
            )
        if model not in state.models:
            return JSONResponse(
                {
                    "error": {
                        "message": f"model {model} does not exist",
                        "type": "NotFoundError",
                        "code": 404,
                    }
                },
                status_code=404,
            )
        limit = (
            body.get("max_tokens") or body.get("max_completion_tokens") or state.default_max_tokens
        )
        n_words = max(1, min(int(limit), state.default_max_tokens))
        prompt = _prompt_text(body, chat)
        tokens = echo_tokens(model, prompt, n_words)
        cached = state.prefix_lookup(_all_words(body))
        reason = "length" if n_words == int(limit) else "stop"
        counter["n"] += 1
        rid = f"{'chatcmpl' if chat else 'cmpl'}-echo{counter['n']:08d}"
        usage = {
            "prompt_tokens": len(prompt.split()) + 3,
            "completion_tokens": len(tokens),
            "total_tokens": len(prompt.split()) + 3 + len(tokens),
            "prompt_tokens_details": {"cached_tokens": cached},
        }
        created = int(time.time())
        obj = "chat.completion" if chat else "text_completion"
        if not body.get("stream"):
            state.running += 1
            try:
                await asyncio.sleep(state.ttft_s + state.itl_s * (len(tokens) - 1))
            finally:
                state.running -= 1
            text = "".join(tokens)
            choice: dict[str, Any] = {"index": 0, "finish_reason": reason}
            if chat:
                choice["message"] = {"role": "assistant", "content": text}
            else:
                choice["text"] = text
            return JSONResponse(
                {
                    "id": rid,
                    "object": obj,
                    "created": created,
                    "model": model,
                    "choices": [choice],
                    "usage": usage,
                }
            )
        include_usage = bool((body.get("stream_options") or {}).get("include_usage"))
        return StreamingResponse(
            _stream(
                state,
                rid,
                obj + ".chunk" if chat else obj,
                created,
                model,
                tokens,
                reason,
                usage if include_usage else None,
                chat,
            ),
            media_type="text/event-stream",
        )

    @app.post("/v1/chat/completions")
    async def chat(request: Request) -> Response:
        return await complete(request, chat=True)

    @app.post("/v1/completions")
    async def completions(request: Request) -> Response:
        return await complete(request, chat=False)

    return app


async def _stream(
    state: EchoEngineState,
    rid: str,
    obj: str,
    created: int,
    model: str,
    tokens: list[str],
    reason: str,
    usage: dict[str, Any] | None,
    chat: bool,
) -> AsyncIterator[bytes]:
    def ev(choices: list[dict[str, Any]], **extra: Any) -> bytes:
        payload = {"id": rid, "object": obj, "created": created, "model": model, "choices": choices}
        return b"data: " + orjson.dumps({**payload, **extra}) + b"\n\n"

    state.running += 1
    try:
        async for ev_bytes in _events(state, ev, tokens, reason, usage, chat):
            yield ev_bytes
    finally:
        state.running -= 1


async def _events(
    state: EchoEngineState,
    ev: Any,
    tokens: list[str],
    reason: str,
    usage: dict[str, Any] | None,
    chat: bool,
) -> AsyncIterator[bytes]:
    await asyncio.sleep(state.ttft_s)
    if chat:
        yield ev(
            [{"index": 0, "delta": {"role": "assistant", "content": ""}, "finish_reason": None}]
        )
    for i, tok in enumerate(tokens):
        if i:
            await asyncio.sleep(state.itl_s)
        last = i == len(tokens) - 1
        piece: dict[str, Any] = {"delta": {"content": tok}} if chat else {"text": tok}
        yield ev([{"index": 0, **piece, "finish_reason": reason if last else None}])
    if usage is not None:
        yield ev([], usage=usage)
    yield b"data: [DONE]\n\n"
