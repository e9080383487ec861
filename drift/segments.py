"""Segments of a drift run: which calls form each segment, and which segments are tested.

A segment is one combination of the configured dimensions (``model``, ``variant``,
``service``: :data:`collector.lake.driftsignals.SEGMENT_COLUMNS`) among the run's calls, NULL a
value of its own; segments are numbered by size (largest first, ties by their values) and the
largest ``max_segments`` are tested, the others only in all traffic. The work runs in the
run's DuckDB connection (:func:`drift.signals.extract`), on the Arrow table of its calls.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

import duckdb
import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from collector.lake.driftsignals import SEGMENT_COLUMNS

if TYPE_CHECKING:
    from drift.signals import ExtractConfig

#: segment id (None = all traffic) → (label, keys)
Segments = dict[int | None, tuple[str | None, dict[str, str | None]]]


def segment_label(keys: dict[str, str | None]) -> str:
    """``model=m,variant=(none),...``: a segment's label from its keys (None: ``(none)``)."""
    return ",".join(f"{k}={'(none)' if v is None else v}" for k, v in keys.items())


def segment_groups(calls: pa.Table, seg_cols: Sequence[str]) -> tuple[pa.Table, np.ndarray]:
    """The distinct combinations of ``seg_cols`` among ``calls`` and each call's combination.

    Returns ``(groups, row_group)``: ``groups`` has ``seg_cols`` (their values, NULL kept as
    a value of its own, as ``GROUP BY`` keeps it), ``n`` (int64, calls with that combination)
    and ``_u`` (int64, the row's own index); ``row_group`` (int64, shape (calls.num_rows,)) is
    each call's row in ``groups``. The same groups as ``GROUP BY seg_cols`` (values compared
    byte for byte, as DuckDB compares them), from Arrow dictionary codes.
    """
    codes = np.zeros(calls.num_rows, dtype=np.int64)
    dicts: list[tuple[pa.Array, int]] = []
    radix = 1
    for c in seg_cols:
        enc = pc.dictionary_encode(calls.column(c)).combine_chunks()
        k = len(enc.dictionary)
        idx = np.asarray(enc.indices.fill_null(k).to_numpy(zero_copy_only=False), dtype=np.int64)
        codes = codes * (k + 1) + idx  # null is code k
        dicts.append((enc.dictionary, k))
        radix *= k + 1
    if radix <= 4 * calls.num_rows + 1024:
        counts = np.bincount(codes, minlength=radix)
        present = np.flatnonzero(counts)
        lut = np.zeros(radix, dtype=np.int64)
        lut[present] = np.arange(present.size, dtype=np.int64)
        row_group, n = lut[codes], counts[present]
    else:  # many combinations: sort the codes
        present, row_group, n = np.unique(codes, return_inverse=True, return_counts=True)
        row_group = row_group.reshape(-1)
    cols: dict[str, pa.Array] = {}
    rest = present.astype(np.int64)
    for c, (dictionary, k) in reversed(list(zip(seg_cols, dicts, strict=True))):
        idx = rest % (k + 1)
        rest = rest // (k + 1)
        cols[c] = dictionary.take(pa.array(idx, mask=idx == k))
    table = {c: cols[c] for c in seg_cols}
    return (
        pa.table(
            {
                **table,
                "n": pa.array(n.astype(np.int64)),
                "_u": pa.array(np.arange(present.size, dtype=np.int64)),
            }
        ),
        row_group.astype(np.int64),
    )


def assign_segments(
    con: duckdb.DuckDBPyConnection, calls: pa.Table, config: ExtractConfig, seg_cols: list[str]
) -> tuple[str, str]:
    """Number the segments by size (DuckDB table ``seg``: the segment columns, ``n``, ``seg_id``
    from 0, largest first) and register the calls as ``calls_arrow`` with ``_i`` (each call's
    row in ``calls``: its ids stay there, read only for the few rows that need them).

    Returns ``(seg_expr, join_seg)``: the SQL of each call's segment id (−1 beyond
    ``max_segments``) and the join that expression needs. With text segment columns the
    segment comes from the columns' dictionary codes (``_seg``), not a join on their text.
    """
    calls_arrow = calls.append_column("_i", pa.array(np.arange(calls.num_rows, dtype=np.int64)))
    order_seg = "".join(f", {c} NULLS FIRST" for c in seg_cols)
    by_codes = bool(seg_cols) and all(
        pa.types.is_string(calls.schema.field(c).type)
        or pa.types.is_large_string(calls.schema.field(c).type)
        for c in seg_cols
    )
    if by_codes:
        groups, row_group = segment_groups(calls, seg_cols)
        con.register("seg_groups", groups)
        con.execute(
            f"CREATE TEMP TABLE seg AS SELECT *, row_number() OVER (ORDER BY n DESC{order_seg}) "
            "- 1 AS seg_id FROM seg_groups"
        )
        got = con.execute("SELECT _u, seg_id FROM seg").fetchnumpy()
        lut = np.full(groups.num_rows, -1, dtype=np.int64)
        sid = np.asarray(got["seg_id"], dtype=np.int64)
        lut[np.asarray(got["_u"], dtype=np.int64)] = np.where(sid < config.max_segments, sid, -1)
        con.register("calls_arrow", calls_arrow.append_column("_seg", pa.array(lut[row_group])))
        return "c._seg", ""
    con.register("calls_arrow", calls_arrow)
    # no segments (one row: all traffic), or segment columns not text
    con.execute(
        f"CREATE TEMP TABLE seg AS SELECT *, row_number() OVER (ORDER BY n DESC{order_seg}) "
        "- 1 AS seg_id FROM (SELECT "
        + (", ".join(f"c.{c}" for c in seg_cols) + ", " if seg_cols else "")
        + "count(*) AS n FROM calls_arrow c"
        + (" GROUP BY " + ", ".join(f"c.{c}" for c in seg_cols) if seg_cols else "")
        + ")"
    )
    seg_expr = f"CASE WHEN g.seg_id < {config.max_segments} THEN g.seg_id ELSE -1 END"
    join_seg = " JOIN seg g ON " + (
        " AND ".join(f"c.{c} IS NOT DISTINCT FROM g.{c}" for c in seg_cols) or "TRUE"
    )
    return seg_expr, join_seg


def tested_segments(
    con: duckdb.DuckDBPyConnection, config: ExtractConfig, skipped: dict[str, str]
) -> Segments:
    """The segments tested: segment id → (label, keys) for the largest ``max_segments``, plus
    all traffic (id and label None) when configured and there is more than one segment (or no
    segment columns). Notes in ``skipped["segments"]`` the smaller ones left to all traffic."""
    seg_cols = [SEGMENT_COLUMNS[d] for d in config.segment_by]
    seg_rows = con.execute(
        f"SELECT seg_id, {', '.join(seg_cols) or 'NULL'} FROM seg "
        f"WHERE seg_id < {config.max_segments} ORDER BY seg_id"
    ).fetchall()
    n_segments = con.execute("SELECT count(*) FROM seg").fetchall()[0][0]
    if n_segments > config.max_segments:
        skipped["segments"] = (
            f"{n_segments - config.max_segments} smaller segments tested only in all traffic"
        )
    segments: Segments = {}
    for row in seg_rows:
        keys = {d: row[1 + i] for i, d in enumerate(config.segment_by)}
        segments[row[0]] = (segment_label(keys), keys)
    if config.include_all and (len(segments) != 1 or not seg_cols):
        segments[None] = (None, {})
    if not seg_cols:
        segments = {None: (None, {})}
    return segments
