"""Analytics over the call store: ADBC → Arrow → DuckDB (no ORM row loops).

* :func:`fetch_calls` reads ``llm_calls`` columns of a tenant and time range as a
  ``pyarrow.Table`` (row filters and time bounds pushed into the SQL);
* :func:`call_stats` aggregates those rows in an in-memory DuckDB per group
  (model, variant, rollout, service, tenant, time bucket); see :mod:`collector.store.callstats`
  for the SQL of every metric;
* :func:`engine_stats` aggregates scraped engine samples (``engine_samples``).

Times: ``since_ns`` inclusive, ``until_ns`` exclusive, unix nanoseconds of the call's start
(``start_unix_nano``), as :class:`collector.store.queries.CallFilter`. Unknown is NULL/None,
never 0.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, cast

import duckdb
import pyarrow as pa
from sqlalchemy import JSON, Table

from collector.store import arrowfetch, callstats
from collector.store.arrowfetch import FETCH_SLICES, SqlBuilder
from collector.store.callstats import ERROR_TYPE_BLANKS, GROUP_KEYS, REJECTION_ERROR_TYPES
from collector.store.enginestats import engine_stats
from collector.store.models import LLMCall
from collector.store.models.api import Feedback
from collector.store.schema import CALL_COLUMNS

__all__ = [
    "FILTER_COLUMNS",
    "GROUP_KEYS",
    "REJECTION_ERROR_TYPES",
    "call_stats",
    "engine_stats",
    "fetch_calls",
]

CALLS = cast(Table, LLMCall.__table__)
FEEDBACK = cast(Table, Feedback.__table__)
#: filter name → ``llm_calls`` column (equality filters)
FILTER_COLUMNS: dict[str, str] = {
    "model": "model",
    "variant": "variant",
    "rollout": "rollout",
    "service": "service_name",
    "service_name": "service_name",
    "operation": "operation",
    "provider": "provider",
    "user_id": "user_id",
    "status": "status",
    "finish_reason": "finish_reason",
    "dialect": "dialect",
}
#: derived 0/1 indicators a read may ask for beside ``llm_calls`` columns
DERIVED_COLUMNS = ("is_error", "is_rejected", "is_unpriced")
_DERIVED = DERIVED_COLUMNS


def validate_range(since_ns: int | None, until_ns: int | None) -> None:
    if since_ns is not None and until_ns is not None and until_ns < since_ns:
        raise ValueError(f"until_ns ({until_ns}) is before since_ns ({since_ns})")


def validate_filters(filters: Mapping[str, str | None] | None) -> dict[str, str]:
    """``filters`` (name → value, None ignored) as ``llm_calls`` column → value.

    Raises:
        ValueError: an unknown filter name or a non-string value.
    """
    out: dict[str, str] = {}
    for name, value in (filters or {}).items():
        if name not in FILTER_COLUMNS:
            raise ValueError(f"filters: unknown filter {name!r}; known: {sorted(FILTER_COLUMNS)}")
        if value is None:
            continue
        if not isinstance(value, str):
            raise ValueError(f"filters: {name} must be a string, got {type(value).__name__}")
        out[FILTER_COLUMNS[name]] = value
    return out


def _select_expr(name: str, dialect: str) -> str:
    """SQL of one output column over ``llm_calls c`` (plain or derived 0/1 indicator)."""
    if name == "is_error":
        return "CASE WHEN c.status = 'error' THEN 1 ELSE 0 END AS is_error"
    if name == "is_rejected":
        kinds = ", ".join(f"'{k}'" for k in sorted(REJECTION_ERROR_TYPES))
        # the same blanks as callstats.is_rate_limited strips (SQLite: char(); PostgreSQL: chr())
        codes = [ord(ch) for ch in ERROR_TYPE_BLANKS]
        if dialect == "sqlite":
            blanks = f"char({', '.join(map(str, codes))})"
            kind = f"lower(trim(c.error_type, {blanks}))"
        else:
            blanks = " || ".join(f"chr({n})" for n in codes)
            kind = f"lower(btrim(c.error_type, {blanks}))"
        return f"CASE WHEN {kind} IN ({kinds}) THEN 1 ELSE 0 END AS is_rejected"
    if name == "is_unpriced":
        if dialect == "sqlite":  # flags is JSON text; element strings are quoted
            return "CASE WHEN instr(c.flags, '\"unpriced\"') > 0 THEN 1 ELSE 0 END AS is_unpriced"
        return "CASE WHEN c.flags @> '[\"unpriced\"]'::jsonb THEN 1 ELSE 0 END AS is_unpriced"
    if dialect == "postgresql" and isinstance(CALLS.c[name].type, JSON):
        return f"c.{name}::text AS {name}"
    return f"c.{name}"


def _where(
    b: SqlBuilder,
    tenant: str | None,
    flt: Mapping[str, str],
    window: arrowfetch.Window,
) -> str:
    parts = []
    if tenant is not None:
        parts.append(f"c.tenant = {b.param(tenant)}")
    if window is None:
        parts.append("c.start_unix_nano IS NULL")
    else:
        since_ns, until_ns = window
        if since_ns is not None:
            parts.append(f"c.start_unix_nano >= {b.param(since_ns)}")
        if until_ns is not None:
            parts.append(f"c.start_unix_nano < {b.param(until_ns)}")
    for col, value in flt.items():
        parts.append(f"c.{col} = {b.param(value)}")
    return " AND ".join(parts) or "1 = 1"


def _windows(
    database_url: str,
    tenant: str | None,
    since_ns: int | None,
    until_ns: int | None,
    slices: int,
) -> list[arrowfetch.Window]:
    """Read windows for ``[since_ns, until_ns)``: ``slices`` time slices of the stored range
    (one index lookup of the tenant's first/last start), plus the calls whose start is unknown
    when the range is open on both sides (they match no bounded slice)."""
    if slices <= 1:
        return [(since_ns, until_ns)]
    dialect, _ = arrowfetch.adbc_target(database_url)
    b = SqlBuilder(dialect)
    where = _where(b, tenant, {}, (since_ns, until_ns))
    sql = (
        "SELECT min(c.start_unix_nano) AS lo, max(c.start_unix_nano) AS hi "
        f"FROM llm_calls c WHERE {where}"
    )
    schema = pa.schema([("lo", pa.int64()), ("hi", pa.int64())])
    row = arrowfetch.run_query(database_url, sql, b.params, schema).to_pylist()[0]
    out: list[arrowfetch.Window] = []
    if row["lo"] is not None:
        lo = row["lo"] if since_ns is None else max(since_ns, row["lo"])
        hi = row["hi"] + 1 if until_ns is None else min(until_ns, row["hi"] + 1)
        out.extend(arrowfetch.time_slices(lo, hi, slices))
    if since_ns is None and until_ns is None:
        out.append(None)
    return out or [(since_ns, until_ns)]


def call_schema(names: Sequence[str]) -> pa.Schema:
    """Arrow schema of ``names`` (``llm_calls`` columns or derived 0/1 indicators) as read."""
    return pa.schema(
        [
            pa.field(n, pa.int64()) if n in _DERIVED else arrowfetch.column_schema(CALLS, [n])[0]
            for n in names
        ]
    )


def fetch_windows(
    database_url: str,
    tenant: str | None,
    names: Sequence[str],
    windows: Sequence[arrowfetch.Window],
    flt: Mapping[str, str],
) -> pa.Table:
    """``names`` of the calls in each of ``windows`` (see :data:`arrowfetch.Window`; checked
    column filters ``flt`` as from :func:`validate_filters`), concatenated in window order.
    ``tenant`` None reads every tenant. The lake's query layer reads its hot tail through this."""
    dialect, _ = arrowfetch.adbc_target(database_url)
    select = ", ".join(_select_expr(n, dialect) for n in names)

    def build(b: SqlBuilder, window: arrowfetch.Window) -> str:
        return f"SELECT {select} FROM llm_calls c WHERE {_where(b, tenant, flt, window)}"

    return arrowfetch.fetch_windows(database_url, build, call_schema(names), windows)


def fetch_sliced(
    database_url: str,
    tenant: str | None,
    names: Sequence[str],
    since_ns: int | None,
    until_ns: int | None,
    flt: Mapping[str, str],
    slices: int,
) -> pa.Table:
    """``names`` of the calls in ``[since_ns, until_ns)`` read in ``slices`` parallel time
    slices (plus the unknown-start calls when the range is open on both sides)."""
    windows = _windows(database_url, tenant, since_ns, until_ns, slices)
    return fetch_windows(database_url, tenant, names, windows, flt)


def fetch_calls(
    database_url: str,
    tenant: str | None,
    *,
    since_ns: int | None = None,
    until_ns: int | None = None,
    columns: Sequence[str] | None = None,
    filters: Mapping[str, str | None] | None = None,
    all_tenants: bool = False,
    slices: int = FETCH_SLICES,
) -> pa.Table:
    """Columns of the tenant's calls started in ``[since_ns, until_ns)`` as Arrow, via ADBC.

    Args:
        database_url: SQLAlchemy URL of the store (``sqlite:///...`` or
            ``postgresql+psycopg://...``), converted to the ADBC driver's path / libpq URI.
        tenant: whose calls; ``None`` only together with ``all_tenants=True`` (admin reads).
        since_ns, until_ns: unix nanoseconds on ``start_unix_nano``, inclusive / exclusive;
            None leaves that side open (calls with an unknown start only match an open range).
        columns: ``llm_calls`` column names (default: every column of the call record, see
            ``CALL_COLUMNS``). JSON columns (``flags``, ``finish_reasons``) come as JSON text.
        filters: equality filters by name, see ``FILTER_COLUMNS`` (``service`` →
            ``service_name``); None values are ignored.
        slices: parallel time slices for a large read (1 = one query).

    Returns:
        A table with one row per call and exactly ``columns`` in that order; types follow the
        SQLAlchemy model (ints → int64, floats → float64, text/JSON → string), NULL kept.

    Raises:
        ValueError: unknown column or filter, ``until_ns < since_ns``, no tenant without
            ``all_tenants``, or an unsupported database URL.
    """
    names = list(columns) if columns is not None else list(CALL_COLUMNS)
    unknown = [n for n in names if n not in CALLS.c]
    if unknown:
        raise ValueError(f"columns: unknown llm_calls columns {unknown}")
    if not names:
        raise ValueError("columns: at least one column is needed")
    if tenant is None and not all_tenants:
        raise ValueError("tenant: required unless all_tenants=True")
    validate_range(since_ns, until_ns)
    flt = validate_filters(filters)
    who = None if all_tenants else tenant
    return fetch_sliced(database_url, who, names, since_ns, until_ns, flt, slices)


def fetch_votes(
    database_url: str,
    tenant: str | None,
    since_ns: int | None,
    until_ns: int | None,
    flt: Mapping[str, str],
) -> pa.Table:
    """Linked thumbs votes joined to their call's group columns (one row per vote event)."""
    dialect, _ = arrowfetch.adbc_target(database_url)
    b = SqlBuilder(dialect)
    where = _where(b, tenant, flt, (since_ns, until_ns))
    call_cols = ["tenant", "model", "variant", "rollout", "service_name", "start_unix_nano"]
    call_cols += ["trace_id", "span_id"]
    sql = (
        f"SELECT {', '.join('c.' + n for n in call_cols)}, f.user_id, f.feedback_id, f.kind, "
        # CROSS JOIN: SQLite then loops over the (small) feedback table and probes the call's
        # primary key, instead of scanning calls; PostgreSQL plans it like an inner join.
        "f.timestamp_unix_nano FROM feedback f CROSS JOIN llm_calls c "
        "WHERE c.tenant = f.tenant AND c.trace_id = f.trace_id "
        "AND (f.span_id IS NULL OR c.span_id = f.span_id) "
        "AND f.linked_at IS NOT NULL AND f.kind IN ('thumbs_up', 'thumbs_down') "
        f"AND {where}"
    )
    fields = arrowfetch.column_schema(CALLS, call_cols)
    fields += arrowfetch.column_schema(
        FEEDBACK, ["user_id", "feedback_id", "kind", "timestamp_unix_nano"]
    )
    return arrowfetch.run_query(database_url, sql, b.params, pa.schema(fields))


def call_stats(
    database_url: str,
    tenant: str | None,
    *,
    group_by: Sequence[str] = (),
    since_ns: int | None = None,
    until_ns: int | None = None,
    bucket_s: float | None = None,
    filters: Mapping[str, str | None] | None = None,
    all_tenants: bool = False,
    slices: int = FETCH_SLICES,
) -> list[dict[str, Any]]:
    """Per-group KPIs of the tenant's calls started in ``[since_ns, until_ns)``.

    Rows come through :func:`fetch_calls` (ADBC → Arrow) and are aggregated in DuckDB; the
    metrics and their formulas are listed in the docstring of :mod:`collector.store.callstats`.

    Args:
        group_by: keys from :data:`GROUP_KEYS` (``model``, ``variant``, ``rollout``,
            ``service``, ``tenant``, ``bucket``); ``tenant`` only with ``all_tenants=True``;
            ``bucket`` needs ``bucket_s``. A ``bucket_s`` without ``bucket`` in ``group_by``
            adds it.
        bucket_s: width of a time bucket, a whole number of seconds ≥ 1, aligned to the epoch.
        all_tenants: read every tenant (admin callers only; the API decides).

    Returns:
        One dict per group, sorted by the group keys (NULL last): the group keys (``service``
        holds ``service_name``; a bucket gives ``bucket`` as ISO 8601 UTC,
        ``bucket_start_unix_s`` and ``window_s``) then the metrics. Unknown values are None.

    Raises:
        ValueError: bad ``group_by``, ``bucket_s``, range, filters or database URL.
    """
    keys = callstats.validate_group_by(group_by, bucket_s=bucket_s, all_tenants=all_tenants)
    if tenant is None and not all_tenants:
        raise ValueError("tenant: required unless all_tenants=True")
    validate_range(since_ns, until_ns)
    flt = validate_filters(filters)
    who = None if all_tenants else tenant
    need_end = "bucket" not in keys and (since_ns is None or until_ns is None)
    names = callstats.needed_columns(keys, need_end=need_end)
    calls = fetch_sliced(database_url, who, names, since_ns, until_ns, flt, slices)
    votes = fetch_votes(database_url, who, since_ns, until_ns, flt)
    bucket_ns = None if bucket_s is None else round(bucket_s * 1e9)
    con = duckdb.connect()
    try:
        con.register("calls", calls)
        con.register("votes", votes)
        return callstats.aggregate(
            con, keys, bucket_ns=bucket_ns, since_ns=since_ns, until_ns=until_ns
        )
    finally:
        con.close()
