"""Replies of the gateway that do not depend on its state: error bodies, non-streamed outcomes."""

from __future__ import annotations

from typing import Any

from fastapi.responses import JSONResponse

from serving.telemetry import CallOutcome


def error_response(
    status: int, code: str, message: str, headers: dict[str, str] | None = None
) -> JSONResponse:
    """OpenAI-style (and DESIGN.md REST) error body ``{"error": {"code", "message", "type"}}``."""
    kind = "rate_limit_error" if status == 429 else "invalid_request_error"
    if status >= 500:
        kind = "server_error"
    body = {"error": {"code": code, "message": message, "type": kind}}
    return JSONResponse(body, status_code=status, headers=headers)


def outcome_from_json(data: Any) -> CallOutcome:
    """Read a non-streamed chat/text completion body into a :class:`CallOutcome`."""
    if not isinstance(data, dict):
        return CallOutcome()
    texts: dict[int, str] = {}
    reasons: dict[int, str] = {}
    for ch in data.get("choices") or []:
        idx = int(ch.get("index", 0))
        msg = ch.get("message")
        text = msg.get("content") if isinstance(msg, dict) else ch.get("text")
        texts[idx] = text or ""
        if ch.get("finish_reason"):
            reasons[idx] = str(ch["finish_reason"])
    raw_usage = data.get("usage")
    usage: dict[str, Any] = raw_usage if isinstance(raw_usage, dict) else {}
    details = usage.get("prompt_tokens_details")
    cached = details.get("cached_tokens") if isinstance(details, dict) else None
    return CallOutcome(
        response_id=data.get("id"),
        response_model=data.get("model"),
        texts=texts,
        finish_reasons=reasons,
        input_tokens=usage.get("prompt_tokens"),
        output_tokens=usage.get("completion_tokens"),
        cached_input_tokens=cached if isinstance(cached, int) else None,
    )
