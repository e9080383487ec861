"""The one read path for analytics: sealed Parquet hours plus the unsealed hot tail of the store.

:func:`fetch_calls` has the contract of :func:`collector.store.analytics.fetch_calls` (same
arguments, same columns and types) and adds ``lake``: hours listed in the tenant's manifest are
read from their Parquet files through DuckDB (column projection, filters pushed into the scan);
every other part of the range (hours not sealed yet, the current hour, calls whose start is
unknown) is read from the store. Each call is read exactly once: a sealed hour is never read
from the store, an unsealed one never from the lake.

The API's stats (:func:`collector.lake.stats.call_stats`), the dashboard's call frames and drift
runs (:func:`read_windows`) all read through here.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Mapping, Sequence

import duckdb
import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from collector.lake import driftsignals, manifest
from collector.lake.layout import HOUR_NS, Lake
from collector.lake.rollup import ALL_ROLLED_UP
from collector.store import analytics, arrowfetch
from collector.store.arrowfetch import FETCH_SLICES
from collector.store.schema import CALL_COLUMNS

#: the columns drift runs read per call (:mod:`drift.signals`), for :func:`read_windows`: those
#: of the drift-signal registry's built-in signals
#: (:func:`collector.lake.driftsignals.drift_columns` gives them with any registered since)
DRIFT_COLUMNS: tuple[str, ...] = driftsignals.drift_columns()


_DB: duckdb.DuckDBPyConnection | None = None
_DB_LOCK = threading.Lock()


def cursor() -> duckdb.DuckDBPyConnection:
    """A new connection to the process's one in-memory DuckDB database (opening a database
    costs ~30 ms, a connection to an open one ~0.1 ms). Each caller gets its own connection:
    Arrow tables it registers are visible to it only, so concurrent requests do not mix; close
    it when done."""
    global _DB
    with _DB_LOCK:
        if _DB is None:
            # the Parquet footers of sealed hours are kept in memory between statements: a
            # month's read opens 720 files, and their metadata is re-parsed by every scan
            # otherwise. DuckDB 2.0 calls this ``parquet_metadata_cache`` (a GLOBAL setting, so
            # every cursor has it; the older ``enable_object_cache`` is accepted and ignored).
            # A cached footer is reused only while the file's modification time and identity
            # are unchanged, so a re-sealed hour (a new file renamed over the old) is read
            # afresh (tests/collector/lake/test_lake.py).
            db = duckdb.connect()
            db.execute("LOAD parquet")
            db.execute("SET GLOBAL parquet_metadata_cache = true")
            _DB = db
        return _DB.cursor()


def overlapping(hours: Sequence[int], since_ns: int | None, until_ns: int | None) -> list[int]:
    """Hours (start ns) from ``hours`` that overlap ``[since_ns, until_ns)``, sorted."""
    return sorted(
        h
        for h in hours
        if (since_ns is None or h + HOUR_NS > since_ns) and (until_ns is None or h < until_ns)
    )


def complement(
    since_ns: int | None, until_ns: int | None, hours: Sequence[int]
) -> list[arrowfetch.Window]:
    """``[since_ns, until_ns)`` minus the sorted hours ``hours`` as read windows; plus the
    "start unknown" window (``None``) when the range is open on both sides and cut by hours."""
    out: list[arrowfetch.Window] = []
    cur = since_ns
    for h in hours:
        lo = h if since_ns is None else max(h, since_ns)
        if cur is None or cur < lo:
            out.append((cur, lo))
        cur = h + HOUR_NS
    if until_ns is None or cur is None or cur < until_ns:
        out.append((cur, until_ns))
    if since_ns is None and until_ns is None and out != [(None, None)]:
        out.append(None)  # (None, None) itself already holds the calls of unknown start
    return out


def _where(
    since_ns: int | None, until_ns: int | None, flt: Mapping[str, str]
) -> tuple[str, list[object]]:
    parts: list[str] = []
    params: list[object] = []
    if since_ns is not None:
        parts.append("start_unix_nano >= ?")
        params.append(since_ns)
    if until_ns is not None:
        parts.append("start_unix_nano < ?")
        params.append(until_ns)
    for col, value in flt.items():
        parts.append(f'"{col}" = ?')
        params.append(value)
    return " AND ".join(parts) or "TRUE", params


def read_files(
    lake: Lake,
    paths: Sequence[str],
    select: str,
    *,
    where: str = "TRUE",
    params: Sequence[object] = (),
    tables: Mapping[str, pa.Table] | None = None,
) -> pa.Table:
    """``SELECT {select} FROM <the Parquet files at paths> WHERE {where}`` in DuckDB, as Arrow;
    ``tables`` are registered under their names for the ``where`` clause."""
    con = cursor()
    try:
        if not lake.local:
            con.register_filesystem(lake.fs)
        for name, t in (tables or {}).items():
            con.register(name, t)
        quoted = (lake.reader_path(p).replace("'", "''") for p in paths)
        files = "[" + ", ".join(f"'{p}'" for p in quoted) + "]"
        sql = f"SELECT {select} FROM read_parquet({files}, hive_partitioning = false) WHERE {where}"
        return con.sql(sql, params=list(params)).to_arrow_table()
    finally:
        con.close()


def read_sealed(
    lake: Lake,
    tenant: str,
    hours: Sequence[int],
    select: str,
    *,
    where: str = "TRUE",
    params: Sequence[object] = (),
) -> pa.Table:
    """``SELECT {select} FROM <the sealed calls files of hours> WHERE {where}``."""
    paths = [lake.data_path("calls", tenant, h) for h in hours]
    return read_files(lake, paths, select, where=where, params=params)


#: bytes of summary and rollup month tables kept in memory (:func:`read_summaries`,
#: :func:`read_rollups`), least recently used out
MONTH_CACHE_BYTES = 256 * 2**20
_month_cache: OrderedDict[tuple[object, ...], pa.Table] = OrderedDict()
_month_cache_lock = threading.Lock()


def _file_identity(lake: Lake, path: str) -> tuple[object, ...] | None:
    """What changes whenever the file at ``path`` is replaced (every lake write renames a new
    file over the old one): size, modification time, inode / ETag; None when it is absent."""
    try:
        info = lake.fs.info(path)
    except FileNotFoundError:
        return None
    stamp = info.get("mtime", info.get("LastModified", info.get("updated")))
    ident = info.get("ino", info.get("ETag", info.get("etag", info.get("generation"))))
    return (lake.url, path, info.get("size"), str(stamp), str(ident))


def _month_table(lake: Lake, path: str) -> pa.Table | None:
    """The whole summary or rollup month file at ``path`` (None when absent), from memory while
    the file is unchanged: sealed files are immutable until a re-seal or retention replaces
    them."""
    key = _file_identity(lake, path)
    if key is None:
        return None
    with _month_cache_lock:
        hit = _month_cache.get(key)
        if hit is not None:
            _month_cache.move_to_end(key)
            return hit
    with lake.fs.open(path, "rb") as fh:
        table = pq.read_table(fh)
    with _month_cache_lock:
        for old in [k for k in _month_cache if k[:2] == key[:2]]:  # older versions of the file
            del _month_cache[old]
        _month_cache[key] = table
        total = sum(t.nbytes for t in _month_cache.values())
        while total > MONTH_CACHE_BYTES and len(_month_cache) > 1:
            total -= _month_cache.popitem(last=False)[1].nbytes
    return table


def _month_rows(
    lake: Lake, paths: set[str], hours: Sequence[int], flt: Mapping[str, str]
) -> pa.Table | None:
    """Rows of the month files ``paths`` whose ``hour_ns`` is in ``hours`` and whose columns
    equal ``flt`` (a null never matches); None when no file exists."""
    tables = [t for t in (_month_table(lake, p) for p in sorted(paths)) if t is not None]
    if not tables:
        return None
    t = pa.concat_tables(tables, promote_options="permissive")
    mask = pc.is_in(t.column("hour_ns"), value_set=pa.array(sorted(hours), pa.int64()))
    for col, value in flt.items():
        mask = pc.and_(mask, pc.equal(t.column(col), value))
    return t.filter(mask)


def read_summaries(
    lake: Lake, tenant: str, hours: Sequence[int], flt: Mapping[str, str]
) -> pa.Table:
    """Summary rows of the sealed ``hours`` (from their month files, kept in memory like
    :func:`read_rollups`), column filters ``flt``.

    Raises:
        FileNotFoundError: no summary file holds these hours.
    """
    days = {h - h % (24 * HOUR_NS) for h in hours}  # a month path per day, not per hour
    t = _month_rows(lake, {lake.summary_path(tenant, d) for d in days}, hours, flt)
    if t is None:
        raise FileNotFoundError(f"lake {lake.url}: no summary file for tenant {tenant!r}")
    return t


def read_rollups(
    lake: Lake, tenant: str, hours: Sequence[int], grouping: int, flt: Mapping[str, str]
) -> tuple[pa.Table, list[int]]:
    """Rollup rows (:mod:`collector.lake.rollup`) of the sealed ``hours`` with ``grouping_id =
    grouping`` and the column filters ``flt``, and the hours among ``hours`` that have rollups
    at all (sorted; an hour sealed before rollups existed has none and must be read raw).

    Month files are kept in memory (at most :data:`MONTH_CACHE_BYTES`) and re-read when
    replaced (checked on every call: one ``stat`` / ``HEAD`` per month)."""
    days = {h - h % (24 * HOUR_NS) for h in hours}  # a month path per day, not per hour
    t = _month_rows(lake, {lake.rollup_path(tenant, d) for d in days}, hours, {})
    if t is None:
        return pa.table({}), []
    gid = t.column("grouping_id")
    present = t.filter(pc.equal(gid, ALL_ROLLED_UP)).column("hour_ns").to_pylist()
    mask = pc.equal(gid, int(grouping))
    for col, value in flt.items():
        mask = pc.and_(mask, pc.equal(t.column(col), value))  # a null key never matches
    return t.filter(mask), sorted(int(h) for h in present)


def _one_tenant(
    database_url: str,
    lake: Lake,
    tenant: str,
    names: Sequence[str],
    since_ns: int | None,
    until_ns: int | None,
    flt: Mapping[str, str],
    slices: int,
) -> pa.Table:
    sealed = overlapping(list(manifest.load(lake, tenant).hours), since_ns, until_ns)
    schema = analytics.call_schema(names)
    if not sealed:
        return analytics.fetch_sliced(database_url, tenant, names, since_ns, until_ns, flt, slices)
    stored = [n for n in names if n != "tenant"]
    where, params = _where(since_ns, until_ns, flt)
    select = ", ".join(f'"{n}"' for n in stored)
    lake_part = read_sealed(lake, tenant, sealed, select, where=where, params=params)
    if "tenant" in names:
        lake_part = lake_part.append_column("tenant", pa.array([tenant] * lake_part.num_rows))
    lake_part = arrowfetch.conform(lake_part.select(list(names)), schema)
    windows = complement(since_ns, until_ns, sealed)
    if not windows:
        return lake_part
    tail = analytics.fetch_windows(database_url, tenant, names, windows, flt)
    return pa.concat_tables([lake_part, tail])


def store_tenants(database_url: str) -> list[str]:
    """Tenants that have calls in the store."""
    schema = pa.schema([("tenant", pa.string())])
    t = arrowfetch.run_query(database_url, "SELECT DISTINCT tenant FROM llm_calls", [], schema)
    return sorted(str(x) for x in t.column(0).to_pylist())


def check_columns(names: Sequence[str]) -> None:
    """Raises ValueError when ``names`` is empty or holds a name that is neither an
    ``llm_calls`` column nor a derived indicator (``analytics.DERIVED_COLUMNS``)."""
    unknown = [
        n for n in names if n not in analytics.CALLS.c and n not in analytics.DERIVED_COLUMNS
    ]
    if unknown:
        raise ValueError(f"columns: unknown llm_calls columns {unknown}")
    if not names:
        raise ValueError("columns: at least one column is needed")


def fetch_calls(
    database_url: str,
    lake: Lake | None,
    tenant: str | None,
    *,
    since_ns: int | None = None,
    until_ns: int | None = None,
    columns: Sequence[str] | None = None,
    filters: Mapping[str, str | None] | None = None,
    all_tenants: bool = False,
    slices: int = FETCH_SLICES,
) -> pa.Table:
    """Columns of the tenant's calls started in ``[since_ns, until_ns)``: sealed hours from the
    lake, the rest from the store (see the module docstring). Arguments, columns, types and
    errors as :func:`collector.store.analytics.fetch_calls`; ``lake`` None reads the store only.
    Rows come in no particular order.
    """
    names = list(columns) if columns is not None else list(CALL_COLUMNS)
    check_columns(names)
    if tenant is None and not all_tenants:
        raise ValueError("tenant: required unless all_tenants=True")
    analytics.validate_range(since_ns, until_ns)
    flt = analytics.validate_filters(filters)
    if lake is None:
        store_tenant = None if all_tenants else tenant
        return analytics.fetch_sliced(
            database_url, store_tenant, names, since_ns, until_ns, flt, slices
        )
    who = [tenant] if not all_tenants and tenant is not None else None
    if who is None:
        who = sorted(set(store_tenants(database_url)) | set(manifest.tenants(lake)))
    parts = [
        _one_tenant(database_url, lake, t, names, since_ns, until_ns, flt, slices) for t in who
    ]
    if not parts:
        return analytics.call_schema(names).empty_table()
    return pa.concat_tables(parts)


def read_windows(
    database_url: str,
    lake: Lake | None,
    tenant: str,
    windows: Sequence[tuple[int, int]],
    columns: Sequence[str] | None = None,
) -> pa.Table:
    """The frames a drift run reads: ``columns`` of the tenant's calls in each window
    ``(since_ns, until_ns)`` plus an ``int8`` column ``win`` = the window's index (0 =
    reference, 1 = current), concatenated: what :func:`drift.signals.extract` reads through
    :func:`drift.callreaders.lake_reader`. ``columns`` None: every column a registered drift
    signal reads (:func:`collector.lake.driftsignals.drift_columns`).

    Raises:
        ValueError: as :func:`fetch_calls`.
    """
    names = list(columns) if columns is not None else list(driftsignals.drift_columns())
    parts = []
    for i, (lo, hi) in enumerate(windows):
        t = fetch_calls(database_url, lake, tenant, since_ns=lo, until_ns=hi, columns=names)
        parts.append(t.append_column("win", pa.array(np.full(t.num_rows, i, dtype=np.int8))))
    return pa.concat_tables(parts)
