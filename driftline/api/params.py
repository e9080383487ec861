"""Query-parameter rules shared by every REST route: one place for what a time, a duration, a
cursor or an unknown parameter may be, so that no client input reaches the store unbounded
(the README promises a 4xx, never a 5xx, for anything a client sends).

- times (``since``, ``until``, a body's ``timestamp``): :func:`parse_time`, unix seconds, ISO
  8601 or a duration ago, from 1970-01-01 to 2262-04-11 (what an int64 of unix nanoseconds
  holds; :func:`collector.timeparse.parse_time_ns`); at most :data:`MAX_TIME_CHARS` characters;
- durations in seconds (``min_duration_s``, ``bucket``): finite, 0 .. :data:`MAX_SECONDS`;
- cursors: at most :data:`MAX_CURSOR_CHARS` characters; the store decodes them and refuses
  values outside int64 (``ValueError``, a 400);
- NUL in the path or a query parameter (PostgreSQL cannot bind it): :func:`reject_nul`, a
  dependency of the whole app;
- unknown query parameters: :func:`reject_unknown_params`.
"""

from __future__ import annotations

import math
from typing import Annotated

from fastapi import Query, Request
from fastapi.routing import APIRoute

from collector.errors import BadRequestError
from collector.timeparse import parse_time_ns

#: longest accepted time text (an ISO 8601 time with nanoseconds and an offset is 35)
MAX_TIME_CHARS = 64
#: longest accepted cursor (a cursor this API returns is base64 of a short JSON list)
MAX_CURSOR_CHARS = 2048
#: largest duration parameter, seconds (10 years: far beyond any retention, and its
#: nanoseconds fit an int64 with room to spare)
MAX_SECONDS = 10 * 366 * 86_400

Since = Annotated[
    str | None,
    Query(max_length=MAX_TIME_CHARS, description="unix seconds, ISO 8601 or a duration ago (2h)"),
]
Until = Annotated[
    str | None,
    Query(max_length=MAX_TIME_CHARS, description="unix seconds, ISO 8601 or a duration ago (2h)"),
]
Cursor = Annotated[
    str | None,
    Query(max_length=MAX_CURSOR_CHARS, description="next_cursor of the previous page"),
]
#: an optional duration in seconds, finite, 0 .. MAX_SECONDS (400 naming the parameter)
Seconds = Annotated[
    float | None, Query(ge=0, le=MAX_SECONDS, allow_inf_nan=False, description="seconds")
]


def parse_time(value: str | None, name: str) -> int | None:
    """Unix nanoseconds from unix seconds, ISO 8601 (naive = UTC) or a duration ago (``2h``):
    :func:`collector.timeparse.parse_time_ns`; None when absent or empty.

    Raises:
        BadRequestError: none of these forms, NaN/infinite, outside 1970-01-01 .. 2262-04-11,
            or longer than :data:`MAX_TIME_CHARS` (HTTP 400, names the parameter).
    """
    if value is None or value == "":
        return None
    if len(value) > MAX_TIME_CHARS:
        raise BadRequestError(f"{name} must be at most {MAX_TIME_CHARS} characters")
    try:
        return parse_time_ns(value, name=name)
    except ValueError as exc:
        raise BadRequestError(str(exc)) from None


def check_seconds(value: float, name: str) -> float:
    """``value`` when it is a finite duration of 0 .. :data:`MAX_SECONDS` seconds.

    Raises:
        BadRequestError: NaN, infinite or out of range (HTTP 400, names the parameter).
    """
    if not math.isfinite(value) or not 0 <= value <= MAX_SECONDS:
        raise BadRequestError(f"{name} must be 0 .. {MAX_SECONDS} seconds, got {value!r}")
    return value


async def reject_nul(request: Request) -> None:
    """FastAPI dependency of the whole app: 400 when the path or a query parameter holds a NUL
    character (``%00``), which PostgreSQL refuses in any text it binds (a 500 otherwise, on
    every route that filters by a name or an id).

    Raises:
        BadRequestError: naming the query parameter, or the path.
    """
    for key, value in request.query_params.multi_items():
        if "\x00" in key or "\x00" in value:
            raise BadRequestError(f"query parameter {key[:64]!r} must not contain NUL (%00)")
    if "\x00" in request.scope.get("path", ""):
        raise BadRequestError("the path must not contain NUL (%00)")


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
