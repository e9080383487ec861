"""Sealing: closed hours of calls from the store into the lake, idempotently; lake retention.

An hour ``[h, h + 1 h)`` of a tenant is *closed* once ``h + 1 h + delay`` has passed. Sealing it
reads its calls from the store (every ``llm_calls`` column but ``tenant``, plus the derived
indicators), computes the per-call text features from the answer text
(:mod:`collector.lake.textfeatures`: refusal, empty output; the file's metadata records the
definitions' digest), sorts them by ``model, variant, start_unix_nano``, writes one zstd
Parquet file, its summary rows (:mod:`collector.lake.summary`) and its exact rollup rows
(:mod:`collector.lake.rollup`) into their month files, each to a temporary name then renamed over
the previous version, and finally records the hour and its *fingerprint* in the manifest.

The fingerprint is a digest of per-hour aggregates of the store's rows (count, sums of the end
times, token counts and several ``count(column)``). Each run recomputes the fingerprints of
the hours that ended within ``late_s`` and re-seals those that changed: late spans (a call
written, or merged with its engine span, after its hour was sealed) re-seal their hour. A
change that leaves every aggregate equal is not seen (e.g. an edit of captured text in place);
:func:`seal_pending` with ``force=True`` re-seals everything.

Memory: one hour is in memory at a time (its rows as Arrow), whatever the backlog.
"""

from __future__ import annotations

import hashlib
import io
import logging
import time
from dataclasses import dataclass, field

import duckdb
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from collector.lake import manifest, textfeatures
from collector.lake.layout import (
    COMPRESSION,
    DERIVED_COLUMNS,
    HOUR_NS,
    SEALED_COLUMNS,
    SORT_KEYS,
    Lake,
    calls_schema,
    hour_of,
)
from collector.lake.query import store_tenants
from collector.lake.rollup import rollup
from collector.lake.summary import summarize
from collector.store import analytics, arrowfetch

log = logging.getLogger(__name__)

_FINGERPRINT_PARTS = (
    "count(*)",
    "sum(coalesce(end_unix_nano, 0) % 1000000007)",
    "sum(coalesce(input_tokens, 0))",
    "sum(coalesce(output_tokens, 0))",
    "count(ttft_s)",
    "count(queue_s)",
    "count(e2e_s)",
    "count(engine_span_id)",
    "count(variant)",
    "count(output_text)",
    "count(cost_usd)",
    "count(gpu_cost_usd)",
    "sum(length(coalesce(status, '')))",
)


@dataclass
class SealReport:
    """What one :func:`seal_pending` run did."""

    sealed: list[tuple[str, int]] = field(default_factory=list)  # (tenant, hour_ns)
    rows: int = 0
    failed: list[tuple[str, int, str]] = field(default_factory=list)


def fingerprints(database_url: str, tenant: str, lo_ns: int, hi_ns: int) -> dict[int, str]:
    """Hour start (ns) → fingerprint of the tenant's stored calls, for hours in ``[lo, hi)``
    that hold calls (``lo`` / ``hi`` multiples of an hour)."""
    dialect, _ = arrowfetch.adbc_target(database_url)
    b = arrowfetch.SqlBuilder(dialect)
    hour = f"(start_unix_nano / {HOUR_NS}) * {HOUR_NS}"
    parts = ", ".join(f"CAST({p} AS TEXT)" for p in _FINGERPRINT_PARTS)
    sql = (
        f"SELECT {hour} AS h, {parts} FROM llm_calls WHERE tenant = {b.param(tenant)} "
        f"AND start_unix_nano >= {b.param(lo_ns)} AND start_unix_nano < {b.param(hi_ns)} "
        "GROUP BY 1"
    )
    fields = [pa.field("h", pa.int64())]
    fields += [pa.field(f"p{i}", pa.string()) for i in range(len(_FINGERPRINT_PARTS))]
    t = arrowfetch.run_query(database_url, sql, b.params, pa.schema(fields))
    out = {}
    for row in t.to_pylist():
        digest = hashlib.sha256(
            "|".join(str(row[f"p{i}"]) for i in range(len(_FINGERPRINT_PARTS))).encode()
        )
        out[int(row["h"])] = digest.hexdigest()[:32]
    return out


def _write_parquet(lake: Lake, path: str, table: pa.Table) -> None:
    buf = io.BytesIO()
    pq.write_table(table, buf, compression=COMPRESSION, row_group_size=128 * 1024)
    manifest.write_atomic(lake, path, buf.getvalue())


def seal_hour(
    database_url: str,
    lake: Lake,
    tenant: str,
    hour_ns: int,
    fingerprint: str,
    con: duckdb.DuckDBPyConnection | None = None,
) -> manifest.Entry:
    """Write (or rewrite) one hour's calls and summary file; returns its manifest entry (the
    caller saves the manifest). Raises ValueError for a bad ``database_url``."""
    names = [*SEALED_COLUMNS, *DERIVED_COLUMNS]
    calls = analytics.fetch_windows(database_url, tenant, names, [(hour_ns, hour_ns + HOUR_NS)], {})
    calls = textfeatures.compute(calls, con)
    calls = calls.sort_by([(k, "ascending") for k in SORT_KEYS])
    calls = calls.cast(calls_schema()).replace_schema_metadata(
        {textfeatures.METADATA_KEY: textfeatures.DIGEST}
    )
    _write_parquet(lake, lake.data_path("calls", tenant, hour_ns), calls)
    replace_summaries(lake, tenant, {hour_ns}, summarize(calls, con))
    replace_month(lake, "rollups", tenant, {hour_ns}, rollup(calls, con))
    return manifest.Entry(calls.num_rows, fingerprint, time.time_ns())


def replace_summaries(lake: Lake, tenant: str, hours: set[int], new: pa.Table | None) -> None:
    """:func:`replace_month` of the ``summaries`` dataset."""
    replace_month(lake, "summaries", tenant, hours, new)


def replace_month(
    lake: Lake, dataset: str, tenant: str, hours: set[int], new: pa.Table | None
) -> None:
    """Rewrite the month file of ``dataset`` (``summaries`` or ``rollups``) holding ``hours``
    (all in one month) without their old rows, plus ``new``; the file is removed when nothing
    is left. Atomic like every lake write."""
    path = lake.month_path(dataset, tenant, min(hours))
    parts = []
    if lake.fs.exists(path):
        with lake.fs.open(path, "rb") as fh:
            old = pq.read_table(fh)
        keep = pc.invert(pc.is_in(old.column("hour_ns"), value_set=pa.array(sorted(hours))))
        parts.append(old.filter(keep))
    if new is not None and new.num_rows:
        parts.append(new)
    if not parts or sum(p.num_rows for p in parts) == 0:
        if lake.fs.exists(path):
            lake.fs.rm(path)
        return
    table = pa.concat_tables(parts, promote_options="permissive")
    _write_parquet(lake, path, table.sort_by([("hour_ns", "ascending")]))


def _first_hour(database_url: str, tenant: str) -> int | None:
    dialect, _ = arrowfetch.adbc_target(database_url)
    b = arrowfetch.SqlBuilder(dialect)
    sql = f"SELECT min(start_unix_nano) FROM llm_calls WHERE tenant = {b.param(tenant)}"
    t = arrowfetch.run_query(database_url, sql, b.params, pa.schema([("m", pa.int64())]))
    first = t.column(0)[0].as_py()
    return None if first is None else hour_of(int(first))


def seal_pending(
    database_url: str,
    lake: Lake,
    *,
    now_ns: int | None = None,
    delay_s: float = 300.0,
    late_s: float = 172_800.0,
    force: bool = False,
    tenants: list[str] | None = None,
) -> SealReport:
    """Seal every closed hour not sealed yet, and re-seal those whose store rows changed.

    Args:
        now_ns: the clock (unix ns; default now).
        delay_s: an hour is closed ``delay_s`` seconds after its end (spans still arriving).
        late_s: hours that ended within ``late_s`` are re-checked for late spans.
        force: re-seal every hour holding calls.
        tenants: only these (default: every tenant with calls in the store).

    A failing hour is logged and reported; the others go on.
    """
    now = time.time_ns() if now_ns is None else now_ns
    horizon = hour_of(now - int(delay_s * 1e9))  # hours ending at or before this are closed
    report = SealReport()
    con = duckdb.connect()  # one for the run: opening one per hour dominated small hours
    try:
        _seal_tenants(database_url, lake, tenants, now, horizon, late_s, force, report, con)
    finally:
        con.close()
    return report


def _seal_tenants(
    database_url: str,
    lake: Lake,
    tenants: list[str] | None,
    now: int,
    horizon: int,
    late_s: float,
    force: bool,
    report: SealReport,
    con: duckdb.DuckDBPyConnection,
) -> None:
    for tenant in tenants if tenants is not None else store_tenants(database_url):
        m = manifest.load(lake, tenant)
        first = _first_hour(database_url, tenant)
        if first is None or first >= horizon:
            continue
        recheck = hour_of(now - int(late_s * 1e9))
        lo = first if force or not m.hours else max(first, min(max(m.hours) + HOUR_NS, recheck))
        prints = fingerprints(database_url, tenant, lo, horizon)
        for h, fp in sorted(prints.items()):
            old = m.hours.get(h)
            if old is not None and old.fingerprint == fp and not force:
                continue
            try:
                m.hours[h] = seal_hour(database_url, lake, tenant, h, fp, con)
            except Exception as exc:  # one bad hour never stops the others
                log.exception("sealing %s hour %d failed", tenant, h)
                report.failed.append((tenant, h, repr(exc)))
                continue
            report.sealed.append((tenant, h))
            report.rows += m.hours[h].rows
            manifest.save(lake, m)  # after every hour: a crash loses at most the hour in flight


def apply_retention(
    lake: Lake, retention_days: dict[str, int], *, now_ns: int | None = None
) -> int:
    """Delete sealed hours older than each tenant's ``retention_days`` (tenant → days), first
    from the manifest (so no reader looks for them), then their folders. Returns hours deleted."""
    now = time.time_ns() if now_ns is None else now_ns
    deleted = 0
    for tenant in manifest.tenants(lake):
        days = retention_days.get(tenant)
        if days is None:
            continue
        cutoff = now - int(days) * 86_400 * 10**9
        m = manifest.load(lake, tenant)
        old = [h for h in m.hours if h + HOUR_NS <= cutoff]
        if not old:
            continue
        for h in old:
            del m.hours[h]
        manifest.save(lake, m)
        months: dict[str, set[int]] = {}
        for h in old:
            months.setdefault(lake.summary_path(tenant, h), set()).add(h)
            folder = lake.partition_dir("calls", tenant, h)
            if lake.fs.exists(folder):
                lake.fs.rm(folder, recursive=True)
        for hours in months.values():
            for dataset in ("summaries", "rollups"):
                replace_month(lake, dataset, tenant, hours, None)
        deleted += len(old)
    return deleted
