"""Query-parameter guard shared by the list routes: an unknown parameter is a 400, never
silently ignored (``?sesion=conv-1`` must not return every call)."""

from __future__ import annotations

from fastapi import Request
from fastapi.routing import APIRoute

from collector.errors import BadRequestError


async def reject_unknown_params(request: Request) -> None:
    """FastAPI dependency: 400 naming each query parameter the route does not declare.

    Raises:
        BadRequestError: e.g. ``unknown query parameter 'sesion' (known: cursor, limit, ...)``.
    """
    route = request.scope.get("route")
    if not isinstance(route, APIRoute):
        return
    known = {p.alias for p in route.dependant.query_params}
    for dep in route.dependant.dependencies:
        known |= {p.alias for p in dep.query_params}
    unknown = sorted(set(request.query_params) - known)
    if unknown:
        names = ", ".join(repr(u) for u in unknown)
        raise BadRequestError(
            f"unknown query parameter {names} (known: {', '.join(sorted(known))})"
        )
