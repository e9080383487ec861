"""Drawing the bounded text samples of a drift run (:mod:`drift.textsample`).

Rows of the run's per-call table ``s`` are ordered by the salted hash ``h`` of their ids (the
salt drawn from the run's rng), per window × segment and for all traffic: the first
``text_sample`` calls get language identification, and for each embedded text the first
``embedding_sample`` calls that captured it are embedded (a uniform sample of those calls).
Texts that ``s`` does not hold are fetched afterwards for the sampled calls only.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

import duckdb
import pyarrow as pa

if TYPE_CHECKING:
    from drift.signals import ExtractConfig

#: segment id (None = all traffic) → (label, keys)
Segments = dict[int | None, tuple[str | None, dict[str, str | None]]]
#: (segment id, window) → the embedded texts' null counts
Nulls = dict[tuple[int | None, int], dict[str, int]]
#: per draw ``(per_segment, rows)``, rows ``(seg_id, win, rank, trace_id, span_id, *texts)``
Sampled = list[tuple[bool, list[tuple[Any, ...]]]]
#: (window, trace_id, span_id) of a sampled call → its start (unix ns; None: unknown)
Starts = dict[tuple[int, str, str], int | None]


def sample(
    con: duckdb.DuckDBPyConnection,
    k_lang: int,
    k_emb: int,
    per_segment: bool,
    cols: Sequence[str],
    embedded: Sequence[str],
) -> tuple[list[tuple[Any, ...]], list[tuple[Any, ...]]]:
    """Sampled rows of table ``s`` per (segment, window) — or per window for all traffic.

    Returns ``(rows, nulls)``: rows ``(seg_id, win, rn, _i, *cols)`` with ``rn`` the rank in
    the salted hash order ``h`` of ``s``, kept when ``rn <= k_lang`` or when the row is among
    the first ``k_emb`` of that order with a non-NULL text in one of the ``embedded`` columns;
    nulls ``(seg_id, win, *NULLs of each embedded column)`` over the whole window (without
    ``seg_id`` for all traffic). ``cols`` are columns of ``s`` (the embedded texts).
    """
    part = "seg_id, win" if per_segment else "win"
    where = "seg_id >= 0" if per_segment else "TRUE"
    ranks = "".join(
        f", row_number() OVER (PARTITION BY {part}, {c} IS NULL ORDER BY h) AS rk{i}"
        for i, c in enumerate(embedded)
    )
    keep = "".join(
        f" OR ({c} IS NOT NULL AND rk{i} <= {int(k_emb)})" for i, c in enumerate(embedded)
    )
    rows = con.execute(
        f"SELECT seg_id, win, rn, _i{''.join(', ' + c for c in cols)} FROM ("
        f"SELECT *, row_number() OVER (PARTITION BY {part} ORDER BY h) AS rn{ranks} FROM ("
        f"SELECT seg_id, win, _i{''.join(', ' + c for c in cols)}, h FROM s WHERE {where})) "
        f"WHERE rn <= {int(k_lang)}{keep}"
    ).fetchall()
    if not embedded:
        return rows, []
    counts = ", ".join(f"count(*) FILTER (WHERE {c} IS NULL)" for c in embedded)
    nulls = con.execute(f"SELECT {part}, {counts} FROM s WHERE {where} GROUP BY {part}").fetchall()
    return rows, nulls


def draw(
    con: duckdb.DuckDBPyConnection,
    config: ExtractConfig,
    segments: Segments,
    ids: pa.Table,
    present: Sequence[str],
    embedded: Sequence[str],
) -> tuple[Sampled, Nulls, Starts | None]:
    """The samples of table ``s`` (:func:`_sample`), per segment and, when tested, for all
    traffic: ``(sampled, nulls, starts)`` — per draw ``(per_segment, rows)`` with each row's
    ``(seg_id, win, rank, trace_id, span_id, *present texts)`` (ids read from ``ids`` for the
    sampled rows only), the embedded texts' null counts per (segment, window), and each
    sampled call's start (None when ``ids`` has no ``start_unix_nano``)."""
    sampled: Sampled = []
    nulls: Nulls = {}
    with_start = "start_unix_nano" in ids.column_names
    starts: Starts = {}
    for per_segment in (True, False):
        if not per_segment and None not in segments:
            continue
        got, counts = sample(
            con, config.text_sample, config.embedding_sample, per_segment, present, embedded
        )
        # the sampled rows' ids, read from ``ids`` for these rows only
        keys = ids.take(pa.array([r[3] for r in got], pa.int64())).to_pylist()
        if with_start:
            starts.update(
                ((int(r[1]), k["trace_id"], k["span_id"]), k["start_unix_nano"])
                for r, k in zip(got, keys, strict=True)
            )
        got = [
            (*r[:3], k["trace_id"], k["span_id"], *r[4:]) for r, k in zip(got, keys, strict=True)
        ]
        sampled.append((per_segment, got))
        for row in counts:
            seg_id, win, *n = row if per_segment else (None, *row)
            nulls[(seg_id, int(win))] = dict(zip(embedded, map(int, n), strict=True))
    return sampled, nulls, starts if with_start else None


def fetch_keys(sampled: Sampled, starts: Starts | None, text_sample: int) -> pa.Table | None:
    """The calls of the language sample (rank <= ``text_sample``) whose texts ``s`` lacks:
    ``win``, ``trace_id``, ``span_id`` (sorted) and, when every start is known,
    ``start_unix_nano`` (a sealed hour's scan then skips the other calls); None when none."""
    keys = sorted(
        {(int(r[1]), r[3], r[4]) for _, got in sampled for r in got if r[2] <= text_sample}
    )
    if not keys:
        return None
    w, t, sp = zip(*keys, strict=True)
    key_table = pa.table(
        {
            "win": pa.array(w, pa.int8()),
            "trace_id": pa.array(t, pa.string()),
            "span_id": pa.array(sp, pa.string()),
        }
    )
    if starts is not None:
        at = [starts.get(k) for k in keys]
        if all(s is not None for s in at):
            key_table = key_table.append_column("start_unix_nano", pa.array(at, pa.int64()))
    return key_table
