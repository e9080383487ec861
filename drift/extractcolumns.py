"""Per-segment columns out of the DuckDB table ``s`` built by :func:`drift.signals.extract`.

``s`` holds one row per call: ``win`` (0 reference, 1 current), ``seg_id`` (−1 = a segment
beyond ``max_segments``), ``t`` (start, unix ns), the signals, and ``judge_pi`` (the judge
sampler's inclusion probability of a judged call). Every column leaves DuckDB once as Arrow,
ordered by (window, segment, start time, ids), and is sliced per segment; all traffic (segment
``None``) is put back in time order with one stable argsort per window. Values therefore reach
:mod:`drift.calibrated` in time order, which its block calibration needs.
"""

from __future__ import annotations

from collections.abc import Hashable, Sequence

import duckdb
import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
from numpy.typing import NDArray

from drift.colwindow import ColumnWindow

Segments = dict[int | None, tuple[str | None, dict[str, str | None]]]
_KEY = 1 << 32


def _slices(
    t: pa.Table, segments: Segments
) -> list[tuple[int | None, str | None, list[NDArray[np.int64]]]]:
    """Per segment: (seg_id, label, [row indices of window 0, of window 1]) in time order."""
    win = t.column("win").to_numpy().astype(np.int64)
    seg = t.column("seg_id").to_numpy().astype(np.int64)
    start = t.column("t").to_numpy(zero_copy_only=False)
    key = win * _KEY + seg
    out = []
    for seg_id, (label, _) in segments.items():
        idx = []
        for w in (0, 1):
            if seg_id is None:
                lo, hi = np.searchsorted(win, [w, w + 1])
                rows = np.arange(lo, hi)
                rows = rows[np.argsort(start[lo:hi], kind="stable")]
            else:
                lo, hi = np.searchsorted(key, [w * _KEY + seg_id, w * _KEY + seg_id + 1])
                rows = np.arange(lo, hi)
            idx.append(rows)
        out.append((seg_id, label, idx))
    return out


#: the order of every column: window, segment, start time, then the ids break ties of start
#: time, so the order (and so block-calibrated tests) does not depend on the order in which
#: the calls were read (lake and store parts)
ORDER = "win, seg_id, t, trace_id, span_id"


def ordered(
    con: duckdb.DuckDBPyConnection, names: Sequence[str], ids: pa.Table | None = None
) -> pa.Table:
    """``win``, ``seg_id``, ``t`` and ``names`` of every row of ``s`` in the order the columns
    use (one sort of the run's calls, shared by :func:`numeric_columns` and
    :func:`categorical_columns`): ``ORDER BY`` :data:`ORDER`, row for row.

    ``ids``: the calls' ``trace_id`` and ``span_id`` when ``s`` does not hold them, row ``_i``
    of ``s`` at row ``_i`` of ``ids`` (as :func:`drift.signals.extract` builds ``s``); None:
    ``s`` holds them.

    The rows leave DuckDB unsorted and are put in that order by two stable numpy argsorts
    (start time, then window and segment); the ids are read and compared (as DuckDB does:
    by code point, NULL last) only for rows whose window, segment and start time tie.
    """
    cols = f"win, seg_id, t, {', '.join(names)}"
    row = "_i" if ids is not None else "rowid"
    t = con.sql(f"SELECT {row} AS _row, {cols} FROM s").to_arrow_table()
    if any(t.column(c).null_count for c in ("win", "seg_id", "t")):  # not from extract
        if ids is not None:
            raise ValueError("s: win, seg_id and t must not be NULL when ids are given")
        return con.sql(f"SELECT {cols} FROM s ORDER BY {ORDER}").to_arrow_table()
    group = t.column("win").to_numpy().astype(np.int64) * _KEY + t.column("seg_id").to_numpy()
    start = t.column("t").to_numpy()
    order = np.argsort(start, kind="stable")
    order = order[np.argsort(group[order], kind="stable")]
    g, s_ = group[order], start[order]
    tied = (g[1:] == g[:-1]) & (s_[1:] == s_[:-1])
    if tied.any():
        order = _break_ties(con, t.column("_row").to_numpy(), order, tied, ids)
    return t.drop_columns(["_row"]).take(order)


def _break_ties(
    con: duckdb.DuckDBPyConnection,
    row: NDArray[np.int64],
    order: NDArray[np.intp],
    tied: NDArray[np.bool_],
    ids: pa.Table | None,
) -> NDArray[np.intp]:
    """``order`` with each run of tied (window, segment, start) rows sorted by
    (``trace_id``, ``span_id``), NULL last; ``row``: each row's ``rowid`` in ``s`` (its row in
    ``ids`` when given)."""
    if ids is None:
        ids = con.sql("SELECT rowid AS _row, trace_id, span_id FROM s").to_arrow_table()
        at = np.empty(len(ids), dtype=np.int64)
        at[ids.column("_row").to_numpy()] = np.arange(len(ids))  # rowid -> position in ids
    else:
        at = np.arange(len(ids), dtype=np.int64)
    bounds = np.flatnonzero(np.concatenate([[True], ~tied, [True]]))
    out = order.copy()
    for a, b in zip(bounds[:-1].tolist(), bounds[1:].tolist(), strict=True):
        if b - a < 2:
            continue
        run = order[a:b]
        keys = ids.take(at[row[run]]).to_pylist()
        out[a:b] = [
            run[i]
            for i in sorted(
                range(b - a),
                key=lambda i: (
                    keys[i]["trace_id"] is None,
                    keys[i]["trace_id"] or "",
                    keys[i]["span_id"] is None,
                    keys[i]["span_id"] or "",
                ),
            )
        ]
    return out


def numeric_columns(
    con: duckdb.DuckDBPyConnection,
    names: Sequence[str],
    segments: Segments,
    table: pa.Table | None = None,
) -> list[ColumnWindow]:
    """Numeric signals per segment, in time order (``ordered=True``).

    ``judge_score`` also carries weights 1/π from ``judge_pi`` (Hájek test); values are float64,
    NaN = null. Units as extracted (tokens, seconds, judge scale). ``table``: :func:`ordered`
    of at least these columns (and ``judge_pi``), read here when None.
    """
    if not names:
        return []
    judge = "judge_score" in names
    t = table if table is not None else ordered(con, [*names, "judge_pi"] if judge else names)
    arrays = {n: t.column(n).to_numpy(zero_copy_only=False).astype(np.float64) for n in names}
    weights = None
    if judge:
        pi = t.column("judge_pi").to_numpy(zero_copy_only=False).astype(np.float64)
        with np.errstate(divide="ignore", invalid="ignore"):
            weights = np.where(pi > 0, 1.0 / pi, np.nan)
        # a score without a usable probability cannot be weighted: treat it as null
        arrays["judge_score"] = np.where(np.isnan(weights), np.nan, arrays["judge_score"])
    out: list[ColumnWindow] = []
    for _, label, (r, c) in _slices(t, segments):
        for n in names:
            weighted = n == "judge_score" and weights is not None
            out.append(
                ColumnWindow(
                    n,
                    "numerical",
                    label,
                    reference=arrays[n][r],
                    current=arrays[n][c],
                    ordered=True,
                    reference_weights=weights[r] if weighted and weights is not None else None,
                    current_weights=weights[c] if weighted and weights is not None else None,
                )
            )
    return out


def _codes(col: pa.ChunkedArray) -> tuple[NDArray[np.int64], tuple[Hashable, ...]]:
    """(code per row, −1 = null; categories) of one column (dictionary encoding)."""
    enc = pc.dictionary_encode(col).combine_chunks()
    idx = enc.indices.fill_null(-1).to_numpy(zero_copy_only=False).astype(np.int64)
    return idx, tuple(enc.dictionary.to_pylist())


def categorical_columns(
    con: duckdb.DuckDBPyConnection,
    names: Sequence[str],
    segments: Segments,
    current_start_ns: int,
    table: pa.Table | None = None,
) -> list[ColumnWindow]:
    """Categorical signals per segment: counts (details), codes in time order (tests) and each
    reference call's age, seconds before ``current_start_ns`` (look-back windows of rare
    proportions, :mod:`drift.ratewindows`; 0 for a call at or after it). ``table``:
    :func:`ordered` of at least these columns, read here when None."""
    if not names:
        return []
    t = table if table is not None else ordered(con, names)
    coded = {n: _codes(t.column(n)) for n in names}
    start = t.column("t").to_numpy(zero_copy_only=False).astype(np.int64)
    age_s = np.maximum(current_start_ns - start, 0).astype(np.float64) / 1e9
    out: list[ColumnWindow] = []
    for _, label, (r, c) in _slices(t, segments):
        ref_age = age_s[r]
        for n in names:
            codes, cats = coded[n]
            rc, cc = codes[r], codes[c]
            k = len(cats)
            r_counts = np.bincount(rc[rc >= 0], minlength=k)
            c_counts = np.bincount(cc[cc >= 0], minlength=k)
            out.append(
                ColumnWindow(
                    n,
                    "categorical",
                    label,
                    reference_counts={cats[i]: int(v) for i, v in enumerate(r_counts) if v},
                    current_counts={cats[i]: int(v) for i, v in enumerate(c_counts) if v},
                    reference_nulls=int((rc < 0).sum()),
                    current_nulls=int((cc < 0).sum()),
                    reference_codes=rc,
                    current_codes=cc,
                    categories=cats,
                    reference_age_s=ref_age,
                )
            )
    return out
