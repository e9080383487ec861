"""A real OpenAI-compatible HTTP server app standing in for the remote judge API.

Each test installs a handler that maps the request JSON to (status, body, headers, delay_s); the
server records every request body. Only the remote edge is faked: the judge code under test talks
to it through a real ``openai.AsyncOpenAI`` client over real HTTP.
"""

from __future__ import annotations

import asyncio
import math
import re
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from fastapi import FastAPI, Request
from fastapi.responses import JSONResponse


@dataclass
class Reply:
    """What the fake server answers to one request."""

    status: int = 200
    body: dict[str, Any] = field(default_factory=dict)
    headers: dict[str, str] = field(default_factory=dict)
    delay_s: float = 0.0


Handler = Callable[[dict[str, Any]], Reply]


class FakeJudgeServer:
    """The in-process server; ``handler`` and ``requests`` are reset for every test."""

    def __init__(self) -> None:
        self.handler: Handler = lambda body: Reply(500, {"error": {"message": "no handler"}})
        self.requests: list[dict[str, Any]] = []
        self.base_url = ""
        app = FastAPI()

        @app.post("/v1/chat/completions")
        async def chat(request: Request) -> JSONResponse:
            body = await request.json()
            self.requests.append(body)
            reply = self.handler(body)
            if reply.delay_s:
                await asyncio.sleep(reply.delay_s)
            return JSONResponse(reply.body, status_code=reply.status, headers=reply.headers)

        self.app = app


def error_body(message: str, code: str | None = None) -> dict[str, Any]:
    """An OpenAI-style error body."""
    return {"error": {"message": message, "type": "invalid_request_error", "code": code}}


def _tokens(content: str, score_distribution: dict[str, float] | None) -> list[dict[str, Any]]:
    """Split ``content`` into tokens (each digit its own token), OpenAI logprobs layout.

    The digit right after ``"score":`` gets ``score_distribution`` (token -> probability) as its
    top logprobs; every other token is certain.
    """
    match = list(re.finditer(r'"score"\s*:\s*(\d)', content))
    score_at = match[-1].start(1) if match else -1
    out: list[dict[str, Any]] = []
    position = 0
    for piece in re.findall(r"\d|[^\d]+", content):
        entry: dict[str, Any] = {
            "token": piece,
            "bytes": list(piece.encode()),
            "logprob": 0.0,
            "top_logprobs": [{"token": piece, "bytes": list(piece.encode()), "logprob": 0.0}],
        }
        if position == score_at and score_distribution is not None:
            top = [
                {"token": token, "bytes": list(token.encode()), "logprob": math.log(p)}
                for token, p in sorted(score_distribution.items(), key=lambda kv: -kv[1])
            ]
            entry["logprob"] = top[0]["logprob"]
            entry["top_logprobs"] = top
        out.append(entry)
        position += len(piece)
    return out


def completion(
    content: str,
    *,
    model: str = "judge-model-2025",
    prompt_tokens: int | None = 120,
    completion_tokens: int | None = 30,
    finish_reason: str = "stop",
    score_distribution: dict[str, float] | None = None,
    with_logprobs: bool = False,
) -> dict[str, Any]:
    """An OpenAI chat.completion body with ``content`` (and logprobs when asked)."""
    logprobs = None
    if with_logprobs or score_distribution is not None:
        logprobs = {"content": _tokens(content, score_distribution), "refusal": None}
    body: dict[str, Any] = {
        "id": "chatcmpl-test",
        "object": "chat.completion",
        "created": int(time.time()),
        "model": model,
        "choices": [
            {
                "index": 0,
                "message": {"role": "assistant", "content": content},
                "finish_reason": finish_reason,
                "logprobs": logprobs,
            }
        ],
    }
    if prompt_tokens is not None and completion_tokens is not None:
        body["usage"] = {
            "prompt_tokens": prompt_tokens,
            "completion_tokens": completion_tokens,
            "total_tokens": prompt_tokens + completion_tokens,
        }
    return body
