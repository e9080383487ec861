"""``GET /api/v1/stats`` (call KPIs per group) and ``GET /api/v1/stats/engine`` (engine KPIs).

Both read through :mod:`collector.store.analytics` (ADBC → Arrow → DuckDB). Field names carry
their units (``_s`` seconds, ``_usd`` US dollars, ``_rate`` fractions 0–1); unknown is null.
"""

from __future__ import annotations

import re
from typing import Annotated, Any

import orjson
from fastapi import APIRouter, Depends, Query, Response

from collector.auth import ForbiddenError, Principal
from collector.errors import BadRequestError
from collector.lake import jobs as lake_jobs
from collector.lake import stats as lake_stats
from collector.store import analytics
from driftline.api.calls import parse_time
from driftline.api.deps import CurrentPrincipal, State
from driftline.api.params import check_seconds, reject_unknown_params

router = APIRouter(prefix="/api/v1", tags=["stats"])

_UNITS_S = {"s": 1, "m": 60, "h": 3600, "d": 86400}
_BUCKET = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*([smhd]?)\s*$")


def parse_bucket(value: str | None) -> float | None:
    """Bucket width in seconds from ``30s``, ``5m``, ``1h``, ``1d`` or plain seconds.

    Raises:
        BadRequestError: not one of those forms, or below 1 second (names ``bucket``).
    """
    if value is None or value == "":
        return None
    m = _BUCKET.match(value.lower())
    if m is None:
        raise BadRequestError(f"bucket must look like 30s, 5m, 1h, 1d or seconds, got {value!r}")
    seconds = float(m.group(1)) * _UNITS_S[m.group(2) or "s"]
    if seconds < 1:
        raise BadRequestError(f"bucket must be at least 1 second, got {value!r}")
    return check_seconds(seconds, "bucket")  # at most params.MAX_SECONDS


def _read_tenant(principal: Principal) -> str:
    if not principal.allows("read"):
        raise ForbiddenError(f"this API key (role {principal.role}) may not read")
    return principal.tenant


def _page(items: list[dict[str, Any]]) -> Response:
    """The list envelope, serialised by orjson (thousands of groups × ~50 numbers: FastAPI's
    generic encoder would cost more than the aggregation)."""
    body = orjson.dumps({"items": items, "next_cursor": None})
    return Response(body, media_type="application/json")


def _range(since: str | None, until: str | None) -> tuple[int | None, int | None]:
    since_ns, until_ns = parse_time(since, "since"), parse_time(until, "until")
    if since_ns is not None and until_ns is not None and until_ns < since_ns:
        raise BadRequestError("until must not be before since")
    return since_ns, until_ns


@router.get(
    "/stats",
    summary="Call KPIs (latency percentiles, rates, tokens, cost) per group",
    dependencies=[Depends(reject_unknown_params)],
)
def stats(
    state: State,
    principal: CurrentPrincipal,
    group_by: Annotated[
        str | None,
        Query(
            description="comma list of model, variant, rollout, service, bucket, "
            "tenant (platform-admin)"
        ),
    ] = None,
    since: Annotated[str | None, Query(description="unix seconds or ISO 8601")] = None,
    until: Annotated[str | None, Query(description="unix seconds or ISO 8601")] = None,
    bucket: Annotated[
        str | None, Query(description="bucket width: 30s, 5m, 1h, 1d, seconds")
    ] = None,
    model: str | None = None,
    variant: str | None = None,
    rollout: str | None = None,
    service: str | None = None,
    source: Annotated[
        str,
        Query(
            description="auto (exact per-hour rollups for bucket=1h, summaries for buckets of "
            "a day or more, else raw), raw (every call, exact) "
            "or summary (per-hour histograms, percentiles within 1 %)"
        ),
    ] = "auto",
) -> Response:
    """KPIs of the caller's calls per group; ``group_by=tenant`` (platform-admin keys only)
    reads every tenant. Metric definitions: :mod:`collector.store.callstats`; sealed hours are
    read from the lake (:mod:`collector.lake.stats`); each row says its ``source`` and
    ``quantile_relative_error``."""
    tenant = _read_tenant(principal)
    keys = [k.strip() for k in (group_by or "").split(",") if k.strip()]
    unknown = [k for k in keys if k not in analytics.GROUP_KEYS]
    if unknown:
        known = ", ".join(analytics.GROUP_KEYS)
        raise BadRequestError(f"group_by: unknown key(s) {', '.join(unknown)}; known: {known}")
    all_tenants = "tenant" in keys
    if all_tenants and not principal.allows("platform"):
        raise ForbiddenError(
            f"group_by=tenant reads every tenant: it needs a platform-admin API key, "
            f"not {principal.role}"
        )
    bucket_s = parse_bucket(bucket)
    if "bucket" in keys and bucket_s is None:
        raise BadRequestError("bucket is required when group_by contains bucket (e.g. bucket=1h)")
    since_ns, until_ns = _range(since, until)
    filters = {"model": model, "variant": variant, "rollout": rollout, "service": service}
    try:
        if source not in ("auto", "raw", "summary"):
            raise ValueError(f"source must be auto, raw or summary, got {source!r}")
        items = lake_stats.call_stats(
            state.settings.database_url,
            lake_jobs.lake_of(state.settings),
            tenant,
            group_by=keys,
            since_ns=since_ns,
            until_ns=until_ns,
            bucket_s=bucket_s,
            filters=filters,
            all_tenants=all_tenants,
            source=source,  # type: ignore[arg-type]
        )
    except ValueError as exc:
        raise BadRequestError(str(exc)) from None
    return _page(items)


@router.get(
    "/stats/engine",
    summary="Engine KPIs (KV cache, queue, prefix cache, spec decode)",
    dependencies=[Depends(reject_unknown_params)],
)
def engine(
    state: State,
    principal: CurrentPrincipal,
    since: Annotated[str | None, Query(description="unix seconds or ISO 8601")] = None,
    until: Annotated[str | None, Query(description="unix seconds or ISO 8601")] = None,
    bucket: Annotated[
        str | None, Query(description="bucket width: 30s, 5m, 1h, 1d, seconds")
    ] = None,
) -> Response:
    """Scraped engine KPIs per (url, model[, bucket]) of the caller's tenant."""
    tenant = _read_tenant(principal)
    since_ns, until_ns = _range(since, until)
    try:
        items = analytics.engine_stats(
            state.settings.database_url, tenant, since_ns, until_ns, parse_bucket(bucket)
        )
    except ValueError as exc:
        raise BadRequestError(str(exc)) from None
    return _page(items)
