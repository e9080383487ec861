"""The lake on a user's Apache Spark session: the same call KPIs and drift signal columns.

For teams whose history outgrows one machine: Spark reads the documented layout
(``docs/lake.md``) directly, so :func:`call_stats` and :func:`numeric_signal` need nothing from
the store; :func:`read_windows` and :func:`read_texts` (the ``--engine spark`` drift run) read
the sealed hours on Spark and only the unsealed hot tail from the store. ``pyspark`` is the
optional extra ``driftline[spark]``; it is imported by the caller, never here at import time.

Percentiles use Spark's exact ``percentile`` (linear interpolation between order statistics,
Hyndman & Fan type 7), the definition DuckDB's ``quantile_cont`` and numpy use, so the answers
agree with :func:`collector.lake.stats.call_stats` (``source="raw"``) over sealed hours.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
from numpy.typing import NDArray

from collector.lake import driftsignals, manifest, query, textfeatures
from collector.lake.layout import FEATURE_COLUMNS, SCHEMA_VERSION, Lake, open_lake, quote_tenant
from collector.store import analytics, arrowfetch

#: group keys Spark answers (a subset of :data:`collector.store.callstats.GROUP_KEYS`)
SPARK_GROUP_KEYS = {"model": "model", "variant": "variant", "rollout": "rollout"}
SPARK_GROUP_KEYS |= {"service": "service_name"}


def calls_frame(spark: Any, lake_url: str, tenant: str) -> Any:
    """The tenant's sealed calls as a Spark DataFrame (``tenant``, ``date``, ``hour`` from the
    path as strings). Partition type inference is switched off on ``spark`` so a tenant named
    ``0042`` stays a string."""
    lake = open_lake(lake_url)
    base = lake.reader_path(f"{lake.root}/calls/v{SCHEMA_VERSION}")
    spark.conf.set("spark.sql.sources.partitionColumnTypeInference.enabled", "false")
    path = f"{base}/tenant={quote_tenant(tenant)}"
    return spark.read.option("basePath", base).parquet(path)


def call_stats(
    spark: Any,
    lake_url: str,
    tenant: str,
    *,
    group_by: Sequence[str] = (),
    since_ns: int | None = None,
    until_ns: int | None = None,
) -> list[dict[str, Any]]:
    """Per group: ``count``, ``error_count``, ``ttft_s_p50/p95/p99``, ``e2e_s_p50/p95/p99``,
    ``n_ttft_s``, ``input_tokens_sum``, ``output_tokens_sum``, ``cost_usd_sum`` of the sealed
    calls started in ``[since_ns, until_ns)``; rows sorted by the group keys (NULL last).

    Raises:
        ValueError: a group key Spark does not answer here.
    """
    bad = [k for k in group_by if k not in SPARK_GROUP_KEYS]
    if bad:
        raise ValueError(f"group_by: {bad} not supported; use {sorted(SPARK_GROUP_KEYS)}")
    df = calls_frame(spark, lake_url, tenant)
    cond = ["TRUE"]
    if since_ns is not None:
        cond.append(f"start_unix_nano >= {int(since_ns)}")
    if until_ns is not None:
        cond.append(f"start_unix_nano < {int(until_ns)}")
    df.createOrReplaceTempView("driftline_calls")
    keys = ", ".join(f"{SPARK_GROUP_KEYS[k]} AS {k}" for k in group_by)
    group = f"GROUP BY {', '.join(SPARK_GROUP_KEYS[k] for k in group_by)}" if group_by else ""
    order = f"ORDER BY {', '.join(f'{k} ASC NULLS LAST' for k in group_by)}" if group_by else ""
    sql = f"""
      SELECT {keys + "," if keys else ""}
        count(*) AS count,
        CAST(sum(CASE WHEN status = 'error' THEN 1 ELSE 0 END) AS BIGINT) AS error_count,
        percentile(ttft_s, array(0.5, 0.95, 0.99)) AS q_ttft,
        percentile(e2e_s, array(0.5, 0.95, 0.99)) AS q_e2e,
        count(ttft_s) AS n_ttft_s,
        sum(input_tokens) AS input_tokens_sum,
        sum(output_tokens) AS output_tokens_sum,
        sum(cost_usd) AS cost_usd_sum
      FROM driftline_calls WHERE {" AND ".join(cond)} {group} {order}"""
    out = []
    for row in spark.sql(sql).collect():
        d = row.asDict()
        for name, q in (("ttft_s", d.pop("q_ttft")), ("e2e_s", d.pop("q_e2e"))):
            for i, p in enumerate(("p50", "p95", "p99")):
                d[f"{name}_{p}"] = None if q is None else q[i]
        out.append(d)
    return out


def spark_numeric_signals() -> dict[str, str]:
    """The signals :func:`numeric_signal` extracts on Spark, read from the drift-signal registry
    (:mod:`collector.lake.driftsignals`): signal name → its ``llm_calls`` column, for every
    registered ``numeric`` signal that is one plain column (registration order)."""
    out: dict[str, str] = {}
    for s in driftsignals.signals(kind="numeric", source="call"):
        if s.column is not None:
            out[s.name] = s.column
    return out


def numeric_signal(
    spark: Any,
    lake_url: str,
    tenant: str,
    windows: Sequence[tuple[int, int]],
    signal: str,
    *,
    segment_by: Sequence[str] = ("model",),
) -> dict[tuple[Any, ...], list[NDArray[np.float64]]]:
    """Drift signal extraction on Spark: the values of a numerical per-call signal (one of
    :func:`spark_numeric_signals`: the registry's numeric signals that are a plain
    ``llm_calls`` column, e.g. ``ttft_s``) per segment and window, as the arrays
    :class:`drift.columnar.ColumnWindow` tests (float64, NaN = null, sorted ascending with NaN
    last).

    Args:
        windows: ``[(since_ns, until_ns), ...]``, typically (reference, current).
        segment_by: columns of a segment (``model``, ``variant``, ``service_name``); ``()`` for
            all traffic (key ``()``).

    Returns:
        segment key tuple → one array per window (empty when the segment has no calls there).

    Raises:
        ValueError: an unknown signal or segment column.
    """
    column = spark_numeric_signals().get(signal)
    if column is None:
        raise ValueError(f"signal: {signal!r} is not a numerical per-call signal")
    bad = [c for c in segment_by if c not in driftsignals.SEGMENT_COLUMNS.values()]
    if bad:
        raise ValueError(f"segment_by: unknown {bad}")
    df = calls_frame(spark, lake_url, tenant)
    out: dict[tuple[Any, ...], list[NDArray[np.float64]]] = {}
    for i, (lo, hi) in enumerate(windows):
        sub = df.where(f"start_unix_nano >= {int(lo)} AND start_unix_nano < {int(hi)}")
        picked = [*(f"`{c}`" for c in segment_by), f"`{column}` AS `{signal}`"]
        rows = sub.selectExpr(*picked).collect()
        groups: dict[tuple[Any, ...], list[float]] = {}
        for r in rows:
            key = tuple(r[c] for c in segment_by)
            v = r[signal]
            groups.setdefault(key, []).append(np.nan if v is None else float(v))
        for key, values in groups.items():
            arrs = out.setdefault(key, [np.empty(0) for _ in windows])
            arrs[i] = np.sort(np.asarray(values, dtype=np.float64))
    return out


def read_windows(
    spark: Any,
    database_url: str,
    lake: Lake,
    tenant: str,
    windows: Sequence[tuple[int, int]],
    columns: Sequence[str],
) -> pa.Table:
    """:func:`collector.lake.textfeatures.read_windows` with the sealed part on Spark: the
    contract (columns and types as read from the store, the text features ``refusal`` /
    ``empty_output`` as bool, plus ``int8`` ``win`` = the window's index; rows in no particular
    order) and the exactly-once split are the same.

    For every window, the sealed hours it overlaps (those the tenant's manifest lists) are
    read by one Spark job over exactly those hour files (``start_unix_nano`` filter pushed into
    the Parquet scan, columns projected, the window index assigned on Spark) and collected as
    Arrow; the rest of each window (hours not sealed yet) is read from the store. The text
    features are read as sealed from files sealed with the running definitions; for older
    files (and the hot tail) the answer text is read and the features computed by driftline
    (:func:`collector.lake.textfeatures.compute`, DuckDB), as for the default engine.

    Args:
        spark: a ``pyspark.sql.SparkSession`` (pyspark >= 4.0, for ``DataFrame.toArrow``)
            that can open ``lake``'s paths (local folders; object stores need the session's
            own filesystem configuration, e.g. ``s3a``).
        database_url: the store, for the hot tail.
        lake: the lake; windows: ``[(since_ns, until_ns), ...]`` half-open, unix ns.
        columns: ``llm_calls`` columns (not ``tenant``) and text features.

    Raises:
        ValueError: an unknown column, ``tenant`` among the columns, or ``until_ns < since_ns``.
    """
    names = list(columns)
    plain = [n for n in names if n not in FEATURE_COLUMNS]
    feats = [n for n in names if n in FEATURE_COLUMNS]
    unknown = [n for n in plain if n not in analytics.CALLS.c or n == "tenant"]
    if unknown or not names:
        raise ValueError(f"columns: need llm_calls columns other than tenant, got {unknown}")
    for lo, hi in windows:
        analytics.validate_range(lo, hi)
    out_schema = textfeatures.read_windows_schema(names)
    hours = list(manifest.load(lake, tenant).hours)
    fresh_frames: list[Any] = []  # sealed with the running definitions: features as stored
    stale_frames: list[Any] = []  # the rest: the answer text, features computed below
    tails = []
    for i, (lo, hi) in enumerate(windows):
        sealed = query.overlapping(hours, lo, hi)
        paths = [lake.data_path("calls", tenant, h) for h in sealed]
        new = [p for p in paths if not feats or textfeatures.fresh(lake, p)]
        old = [p for p in paths if p not in new]
        for group, cols, frames in (
            (new, names, fresh_frames),
            (old, textfeatures.store_names(names), stale_frames),
        ):
            if group:
                frames.append(
                    spark.read.parquet(*(lake.reader_path(p) for p in group))
                    .where(f"start_unix_nano >= {int(lo)} AND start_unix_nano < {int(hi)}")
                    .selectExpr(*(f"`{n}`" for n in cols), f"CAST({i} AS TINYINT) AS win")
                )
        rest = query.complement(lo, hi, sealed)
        if rest:
            tail = analytics.fetch_windows(
                database_url, tenant, textfeatures.store_names(names), rest, {}
            )
            tail = textfeatures.tail_with_features(tail, names)
            win = pa.array(np.full(tail.num_rows, i, dtype=np.int8))
            tails.append(arrowfetch.conform(tail.append_column("win", win), out_schema))
    parts = list(tails)
    for frames, computed in ((stale_frames, True), (fresh_frames, False)):
        if not frames:
            continue
        df = frames[0]
        for f in frames[1:]:
            df = df.unionByName(f)
        t = df.toArrow()
        if computed and feats:
            t = textfeatures.compute(t)
        parts.insert(0, arrowfetch.conform(t.select([*names, "win"]), out_schema))
    if not parts:
        return out_schema.empty_table()
    return pa.concat_tables(parts)


def read_texts(
    spark: Any,
    database_url: str,
    lake: Lake,
    tenant: str,
    windows: Sequence[tuple[int, int]],
    keys: pa.Table,
    columns: Sequence[str],
) -> pa.Table:
    """:func:`collector.lake.textfeatures.read_texts` with the sealed part on Spark: the text
    ``columns`` of the calls named in ``keys`` (a left-semi join of each window's sealed hour
    files with the keys on ``trace_id, span_id``), the hot tail's from the store.

    Raises:
        ValueError: a column that is not a text column.
    """
    cols = list(columns)
    if not cols or any(c not in ("input_text", "output_text") for c in cols):
        raise ValueError(f"columns: input_text / output_text, got {cols}")
    keys = keys.select(["win", "trace_id", "span_id"]).cast(textfeatures.KEYS_SCHEMA)
    out_schema = textfeatures.texts_schema(cols)
    hours = list(manifest.load(lake, tenant).hours)
    parts = []
    for i, (lo, hi) in enumerate(windows):
        mine = keys.filter(pc.equal(keys.column("win"), i))
        if mine.num_rows == 0:
            continue
        sealed = query.overlapping(hours, lo, hi)
        if sealed:
            paths = [lake.reader_path(lake.data_path("calls", tenant, h)) for h in sealed]
            wanted = spark.createDataFrame(mine.select(["trace_id", "span_id"]))
            df = (
                spark.read.parquet(*paths)
                .where(f"start_unix_nano >= {int(lo)} AND start_unix_nano < {int(hi)}")
                .join(wanted.hint("broadcast"), on=["trace_id", "span_id"], how="left_semi")
                .selectExpr(f"CAST({i} AS TINYINT) AS win", "trace_id", "span_id", *cols)
            )
            parts.append(arrowfetch.conform(df.toArrow(), out_schema))
        rest = query.complement(lo, hi, sealed)
        if rest:
            parts.append(
                textfeatures.tail_texts(database_url, tenant, i, rest, mine, cols, out_schema)
            )
    if not parts:
        return out_schema.empty_table()
    return pa.concat_tables(parts)
