"""Limits before parsing: authenticate from the headers and bound the body before a route reads it.

FastAPI reads (and parses) a route's JSON body before it resolves the route's dependencies, so
a route whose key is checked by a dependency would read a body of any size from anyone first.
:class:`LimitsMiddleware` (pure ASGI, installed by :func:`driftline.app.create_app`) runs before
the routes:

1. the route is matched (Starlette's own matching); when its dependencies ask for a key
   (:func:`driftline.api.deps.get_principal` or one of the ``*Tenant`` dependencies), the
   ``Authorization`` header is verified through the key store (the cache on the event loop, a
   store lookup in a worker thread): 401 for a missing, malformed, unknown or revoked key and
   403 for a key without the route's permission, answered without reading a byte of the body
   (``--dev``: nobody is asked for a key, as before);
2. the body is bounded by ``DRIFTLINE_MAX_REQUEST_BYTES`` with Starlette's
   :class:`~starlette.middleware.body_limit.RequestBodyLimitMiddleware`: 413 at once when
   ``Content-Length`` says more, and a chunked body is counted while it streams (413 as soon as
   it passes the limit, nothing past it is read).

The OTLP receivers (``/v1/traces``, ``/v1/logs``) pass straight through: they resolve the key
before they stream the body, and :func:`collector.ingest.body.read_body` bounds it by
``DRIFTLINE_MAX_BODY_BYTES`` before and after decompression (no extra hop on the hot path).
"""

from __future__ import annotations

import asyncio
import re
from collections.abc import Iterable, Iterator
from dataclasses import dataclass

from fastapi.dependencies.models import Dependant
from fastapi.routing import APIRoute
from google.rpc import code_pb2
from starlette.middleware.body_limit import RequestBodyLimitMiddleware
from starlette.requests import Request
from starlette.routing import BaseRoute, compile_path
from starlette.types import ASGIApp, Receive, Scope, Send

from collector.auth import AuthError, Principal
from driftline.api import deps
from driftline.api.errors import error_response

#: paths whose routes authenticate before they stream and bound their own body
OTLP_PATHS = frozenset({"/v1/traces", "/v1/logs"})
#: prefix of the ``_tenant_with(permission)`` dependencies of :mod:`driftline.api.deps`
_PERMISSION_PREFIX = "tenant_with_"
#: a requirement: None (no key), "" (any valid key) or the permission the key needs
Requirement = str | None


def _requirement_of(dependants: Iterable[Dependant]) -> Requirement:
    """What the first key-checking dependency among ``dependants`` (depth first) asks for."""
    for dep in dependants:
        call = dep.call
        name = getattr(call, "__name__", "")
        if name.startswith(_PERMISSION_PREFIX):
            return name[len(_PERMISSION_PREFIX) :]
        if call is deps.get_principal or (
            getattr(call, "__module__", None) == deps.__name__ and call is not deps.get_state
        ):
            return ""  # a key-checking dependency this module does not know: any valid key
        found = _requirement_of(dep.dependencies)
        if found is not None:
            return found
    return None


def route_requirement(route: BaseRoute) -> Requirement:
    """The key a route asks for: None (no key), "" (any valid key) or a permission name."""
    if not isinstance(route, APIRoute):
        return None
    return _requirement_of(route.dependant.dependencies)


@dataclass(frozen=True, slots=True)
class RouteKey:
    """One route's path pattern (with the prefixes of the routers that include it), methods
    and key requirement."""

    pattern: re.Pattern[str]
    methods: frozenset[str]
    requirement: Requirement


def route_keys(routes: Iterable[BaseRoute], prefix: str = "") -> Iterator[RouteKey]:
    """Every API route under ``routes``, included routers walked with their prefixes (FastAPI
    includes routers lazily: ``app.routes`` lists the included routers, not their routes)."""
    for route in routes:
        included = getattr(route, "original_router", None)
        if included is not None:
            context = getattr(route, "include_context", None)
            inner = prefix + (getattr(context, "prefix", "") or "")
            yield from route_keys(included.routes, inner)
        elif isinstance(route, APIRoute):
            pattern, _, _ = compile_path(prefix + route.path)
            methods = frozenset(route.methods or ())
            yield RouteKey(pattern, methods, route_requirement(route))


class LimitsMiddleware:
    """Answer 401/403/413 from the request head, before any route reads the body (module doc).

    Args:
        app: the ASGI app inside.
        max_request_bytes: largest body of a non-OTLP request, in bytes (> 0).
    """

    def __init__(self, app: ASGIApp, *, max_request_bytes: int) -> None:
        self.app = app
        self.limit = max_request_bytes
        self.bounded = RequestBodyLimitMiddleware(app, max_body_size=max_request_bytes)
        self._routes: list[RouteKey] | None = None  # on the first request: routes are final

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or scope["path"] in OTLP_PATHS:
            await self.app(scope, receive, send)
            return
        state: deps.AppState | None = getattr(scope["app"].state, "driftline", None)
        refusal = None
        if state is not None and not state.settings.dev:
            refusal = await self._refusal(scope, state)
        if refusal is None:
            refusal = self._declared_too_large(scope)
        if refusal is not None:
            await refusal(scope, receive, send)
            return
        await self.bounded(scope, receive, send)

    def _declared_too_large(self, scope: Scope) -> ASGIApp | None:
        """The 413 of a ``Content-Length`` over the limit, in the API's error shape (Starlette
        answers it in plain text); a streamed body is counted by :attr:`bounded`."""
        request = Request(scope)
        declared = request.headers.get("content-length", "")
        if declared.isdigit() and int(declared) > self.limit:
            message = f"request body of {declared} bytes exceeds {self.limit} bytes"
            return error_response(
                request, 413, "body_too_large", message, code_pb2.RESOURCE_EXHAUSTED
            )
        return None

    def _requirement(self, scope: Scope) -> Requirement:
        if self._routes is None:
            self._routes = list(route_keys(scope["app"].routes))
        path, method = scope["path"], scope["method"]
        for route in self._routes:
            if method in route.methods and route.pattern.match(path):
                return route.requirement
        return None

    async def _refusal(self, scope: Scope, state: deps.AppState) -> ASGIApp | None:
        """The 401/403 response of a request whose route needs a key it lacks, else None."""
        needed = self._requirement(scope)
        if needed is None:
            return None
        request = Request(scope)
        authorization = request.headers.get("authorization")
        principal: Principal | None = state.keys.cached(authorization)
        if principal is None:
            try:
                principal = await asyncio.to_thread(state.keys.verify, authorization)
            except AuthError as exc:
                return error_response(
                    request, 401, "unauthorized", str(exc), code_pb2.UNAUTHENTICATED
                )
            except Exception:  # store trouble: the route's own dependency answers it
                return None
        if needed and not principal.allows(needed):
            message = f"this API key (role {principal.role}) may not {needed}"
            return error_response(request, 403, "forbidden", message, code_pb2.PERMISSION_DENIED)
        return None
