"""Mapping of collector errors to HTTP responses (the only place that does this).

REST routes answer ``{"error": {"code": ..., "message": ...}}`` (a ``ConfigError`` met while
serving is 503 ``server_misconfigured``: an operator, not the client, must fix the variable it
names); the OTLP route answers a ``google.rpc.Status`` in the request's own content type
(OTLP/HTTP spec, "Failures").
"""

from __future__ import annotations

import logging

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse, Response
from google.protobuf import json_format
from google.rpc import code_pb2, status_pb2
from starlette.exceptions import HTTPException as StarletteHTTPException

from collector.auth import AuthError, ForbiddenError
from collector.errors import (
    BadRequestError,
    BodyTooLargeError,
    CollectorError,
    ConfigError,
    ConflictError,
    DecodeError,
    NotFoundError,
    QueueFullError,
    StoreUnavailableError,
    UnsupportedMediaError,
)
from collector.ingest.decode import PROTOBUF

log = logging.getLogger(__name__)

_STATUS: list[tuple[type[CollectorError], int, str, int]] = [
    (DecodeError, 400, "bad_request", code_pb2.INVALID_ARGUMENT),
    (BadRequestError, 400, "bad_request", code_pb2.INVALID_ARGUMENT),
    (AuthError, 401, "unauthorized", code_pb2.UNAUTHENTICATED),
    (ForbiddenError, 403, "forbidden", code_pb2.PERMISSION_DENIED),
    (NotFoundError, 404, "not_found", code_pb2.NOT_FOUND),
    (ConflictError, 409, "conflict", code_pb2.ABORTED),
    (BodyTooLargeError, 413, "body_too_large", code_pb2.RESOURCE_EXHAUSTED),
    (UnsupportedMediaError, 415, "unsupported_media_type", code_pb2.INVALID_ARGUMENT),
    (QueueFullError, 503, "overloaded", code_pb2.UNAVAILABLE),
    (StoreUnavailableError, 503, "store_unavailable", code_pb2.UNAVAILABLE),
    # not the client's fault and not a bug: an operator must fix a DRIFTLINE_* variable
    (ConfigError, 503, "server_misconfigured", code_pb2.UNAVAILABLE),
]


def classify(exc: CollectorError) -> tuple[int, str, int]:
    """(HTTP status, REST error code, google.rpc code) of ``exc``; unknown kinds are 500."""
    for cls, status, code, rpc in _STATUS:
        if isinstance(exc, cls):
            return status, code, rpc
    return 500, "internal", code_pb2.INTERNAL


def _is_otlp(request: Request) -> bool:
    return request.url.path.startswith("/v1/")


def error_response(
    request: Request,
    status: int,
    code: str,
    message: str,
    rpc_code: int,
    headers: dict[str, str] | None = None,
) -> Response:
    if _is_otlp(request):
        st = status_pb2.Status(code=rpc_code, message=message)
        if (request.headers.get("content-type") or "").startswith(PROTOBUF):
            return Response(st.SerializeToString(), status, headers, media_type=PROTOBUF)
        return JSONResponse(json_format.MessageToDict(st), status, headers)
    return JSONResponse({"error": {"code": code, "message": message}}, status, headers)


def install(app: FastAPI) -> None:
    """Register the exception handlers on ``app``."""

    @app.exception_handler(CollectorError)
    async def _collector_error(request: Request, exc: CollectorError) -> Response:
        status, code, rpc = classify(exc)
        headers = None
        retry = getattr(exc, "retry_after_s", None)
        if retry is not None:
            headers = {"Retry-After": str(retry)}
        if isinstance(exc, ConfigError):  # one line; the message names the variable
            log.error("server misconfigured on %s: %s", request.url.path, exc)
        elif status >= 500 and status != 503:
            log.error("internal error on %s: %r", request.url.path, exc)
        return error_response(request, status, code, str(exc), rpc, headers)

    @app.exception_handler(RequestValidationError)
    async def _validation(request: Request, exc: RequestValidationError) -> Response:
        parts = []
        for err in exc.errors():
            loc = ".".join(str(p) for p in err.get("loc", ()) if p not in ("query", "body", "path"))
            parts.append(f"{loc}: {err.get('msg')}" if loc else str(err.get("msg")))
        return error_response(
            request,
            400,
            "bad_request",
            "; ".join(parts) or "invalid request",
            code_pb2.INVALID_ARGUMENT,
        )

    @app.exception_handler(StarletteHTTPException)
    async def _http(request: Request, exc: StarletteHTTPException) -> Response:
        known = {404: "not_found", 405: "method_not_allowed", 413: "body_too_large"}
        code = known.get(exc.status_code, "error")
        return error_response(
            request,
            exc.status_code,
            code,
            str(exc.detail),
            code_pb2.UNKNOWN,
            dict(exc.headers) if exc.headers else None,
        )
