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


Rows = slice | NDArray[np.intp]


def _slices(t: pa.Table, segments: Segments) -> list[tuple[int | None, str | None, list[Rows]]]:
    """Per segment: (seg_id, label, [rows of window 0, of window 1]) in time order: a slice
    (a segment's rows are contiguous: indexing gives views, no copy) or, for all traffic, row
    indices."""
    win = np.asarray(t.column("win").to_numpy(), dtype=np.int64)
    seg = np.asarray(t.column("seg_id").to_numpy(), dtype=np.int64)
    start = t.column("t").to_numpy(zero_copy_only=False)
    key = win * _KEY + seg
    out = []
    for seg_id, (label, _) in segments.items():
        idx: list[Rows] = []
        for w in (0, 1):
            if seg_id is None:
                lo, hi = np.searchsorted(win, [w, w + 1])
                idx.append(lo + stable_argsort(start[lo:hi]))
            else:
                lo, hi = np.searchsorted(key, [w * _KEY + seg_id, w * _KEY + seg_id + 1])
                idx.append(slice(int(lo), int(hi)))
        out.append((seg_id, label, idx))
    return out


#: the order of every column: window, segment, start time, then the ids break ties of start
#: time, so the order (and so block-calibrated tests) does not depend on the order in which
#: the calls were read (lake and store parts)
ORDER = "win, seg_id, t, trace_id, span_id"


def ordered(
    con: duckdb.DuckDBPyConnection,
    names: Sequence[str],
    ids: pa.Table | None = None,
    source: pa.Table | None = None,
) -> pa.Table:
    """``win``, ``seg_id``, ``t`` and ``names`` of every row of ``s`` in the order the columns
    use (one sort of the run's calls, shared by :func:`numeric_columns` and
    :func:`categorical_columns`): ``ORDER BY`` :data:`ORDER`, row for row.

    ``ids``: the calls' ``trace_id`` and ``span_id`` when ``s`` does not hold them, row ``_i``
    of ``s`` at row ``_i`` of ``ids`` (as :func:`drift.signals.extract` builds ``s``); None:
    ``s`` holds them. ``source``: ``s`` itself as the Arrow table registered under that name
    (as :func:`drift.signals.extract` registers it), its columns taken without a query; only
    with ``ids``.

    The rows leave DuckDB unsorted and are put in that order by two stable numpy argsorts
    (start time, then window and segment: :func:`stable_argsort`); the ids are read and
    compared (as DuckDB does: by code point, NULL last) only for rows whose window, segment
    and start time tie. The rows are gathered column by column (:func:`_take`): a text or
    boolean column of few distinct values comes back dictionary-encoded (the same values).
    """
    cols = f"win, seg_id, t, {', '.join(names)}"
    row = "_i" if ids is not None else "rowid"
    if source is not None and ids is not None:
        picked = ["_i", "win", "seg_id", "t", *names]
        t = source.select(picked).rename_columns(["_row", *picked[1:]])
    else:
        t = con.sql(f"SELECT {row} AS _row, {cols} FROM s").to_arrow_table()
    if any(t.column(c).null_count for c in ("win", "seg_id", "t")):  # not from extract
        if ids is not None:
            raise ValueError("s: win, seg_id and t must not be NULL when ids are given")
        return con.sql(f"SELECT {cols} FROM s ORDER BY {ORDER}").to_arrow_table()
    win = t.column("win").to_numpy().astype(np.int64)
    seg = t.column("seg_id").to_numpy().astype(np.int64)
    group = win * _KEY + seg
    start = t.column("t").to_numpy()
    order = _group_time_order(_group_codes(win, seg), start)
    g, s_ = group[order], start[order]
    tied = (g[1:] == g[:-1]) & (s_[1:] == s_[:-1])
    if tied.any():
        order = _break_ties(con, t.column("_row").to_numpy(), order, tied, ids)
    t = t.drop_columns(["_row"])
    return pa.table([_take(t.column(i), order) for i in range(t.num_columns)], names=t.column_names)


#: most distinct values of a text / boolean column that :func:`_take` reorders as codes
_FEW = 16


def _take(col: pa.ChunkedArray, order: NDArray[np.intp]) -> pa.Array:
    """``col.take(order)`` without the slow part of Arrow's take of a whole table: fixed-width
    numbers are gathered by numpy (nulls kept as nulls); a text or boolean column of at most
    :data:`_FEW` distinct values comes back dictionary-encoded, its dictionary in order of first
    appearance in the result, which is the dictionary (and the codes) that
    ``pc.dictionary_encode`` gives the taken column (the values, row for row, are the same)."""
    typ = col.type
    if pa.types.is_integer(typ) or pa.types.is_floating(typ):
        arr = col.combine_chunks() if col.num_chunks != 1 else col.chunk(0)
        if arr.null_count and not pa.types.is_floating(typ):  # integers with nulls: rare here
            return col.take(order)
        values = arr.to_numpy(zero_copy_only=False)[order]
        if arr.null_count == 0:
            return pa.array(values, type=typ)
        valid = np.asarray(arr.is_valid().to_numpy(zero_copy_only=False), dtype=np.bool_)
        return pa.array(values, type=typ, mask=~valid[order])
    if not (pa.types.is_string(typ) or pa.types.is_boolean(typ)):
        return col.take(order)
    if pa.types.is_boolean(typ):  # codes 0 = False, 1 = True without a hash table
        arr = col.combine_chunks() if col.num_chunks != 1 else col.chunk(0)
        codes = np.asarray(arr.fill_null(False).to_numpy(zero_copy_only=False), dtype=np.int8)
        if arr.null_count:
            valid = np.asarray(arr.is_valid().to_numpy(zero_copy_only=False), dtype=np.bool_)
            codes[~valid] = -1
        present = [v for v in (0, 1) if np.any(codes == v)]
        if present == [1]:  # True alone is code 0
            codes = np.where(codes == 1, 0, -1).astype(np.int8)
        dictionary = pa.array([bool(v) for v in present], pa.bool_())
        k = len(present)
    else:
        enc = pc.dictionary_encode(col).combine_chunks()
        dictionary = enc.dictionary
        k = len(enc.dictionary)
        if k > _FEW:
            return col.take(order)
        codes = np.asarray(enc.indices.fill_null(-1).to_numpy(zero_copy_only=False), dtype=np.int8)
    codes = codes[order]
    first = [int(np.argmax(codes == j)) for j in range(k)]  # every code occurs (a permutation)
    by_first = np.argsort(np.array(first, dtype=np.int64), kind="stable")
    lut = np.empty(k + 1, dtype=np.int32)
    lut[by_first] = np.arange(k, dtype=np.int32)
    lut[k] = 0  # nulls (code -1 reads lut[-1]); masked below
    null = codes < 0
    indices = pa.array(lut[codes], type=pa.int32(), mask=null if null.any() else None)
    return pa.DictionaryArray.from_arrays(indices, dictionary.take(pa.array(by_first)))


def _group_time_order(codes: NDArray[np.integer], start: NDArray[np.int64]) -> NDArray[np.intp]:
    """The stable argsort by (``codes``, ``start``), shape (n,): the permutation of a stable
    sort by ``start`` followed by a stable sort by ``codes`` (equal pairs in row order). One
    sort of the composite key ``code * span + (start - min)`` when it fits in an int64 (a
    stable sort by a key that orders the pairs lexicographically is that permutation), else
    the two sorts."""
    if start.size == 0:
        return np.zeros(0, dtype=np.intp)
    lo, hi = int(start.min()), int(start.max())
    span = hi - lo + 1
    n_codes = int(codes.max()) + 1 if codes.size else 1
    if int(codes.min()) >= 0 and n_codes * span < 2**63:
        key = codes.astype(np.int64) * span + (start - lo)
        return stable_argsort(key)
    order = stable_argsort(start)
    return order[stable_argsort(codes[order])]


#: a key with fewer descents (``x[i+1] < x[i]``) than its size over this is sorted by numpy's
#: stable sort (timsort: linear on long sorted runs, as a window read in time order gives)
_FEW_DESCENTS = 16


def stable_argsort(x: NDArray[np.integer]) -> NDArray[np.intp]:
    """``np.argsort(x, kind="stable")`` of integers, shape (n,), the same permutation: 16-bit
    and narrower keys are radix-sorted by numpy, wider ones made of long ascending runs (fewer
    than n / :data:`_FEW_DESCENTS` descents) timsorted by numpy; other wide ones are sorted by
    numpy's faster unstable sort, and each run of equal keys is then put back in row order
    (equal keys in row order is what makes a sort stable, and it fixes the permutation)."""
    if x.dtype.itemsize <= 2:
        return np.argsort(x, kind="stable")
    if int(np.count_nonzero(x[1:] < x[:-1])) * _FEW_DESCENTS < x.size:
        return np.argsort(x, kind="stable")
    order = np.argsort(x)
    s = x[order]
    equal = s[1:] == s[:-1]
    if equal.any():
        in_run = np.zeros(x.size, dtype=np.bool_)
        in_run[1:] = equal
        in_run[:-1] |= equal
        at = np.flatnonzero(in_run)
        run = np.cumsum(np.concatenate([[True], ~equal]))[at]  # run number of each position
        rows = order[at]
        order[at] = rows[np.lexsort((rows, run))]
    return order


def _group_codes(win: NDArray[np.int64], seg: NDArray[np.int64]) -> NDArray[np.integer]:
    """A code per row ordered as (``win``, ``seg``), as narrow an integer as the ranges allow
    (int16 when they span fewer than 2**15 pairs; the sort by it is then a radix sort)."""
    if win.size == 0:
        return win
    w0, s0 = int(win.min()), int(seg.min())
    n_seg = int(seg.max()) - s0 + 1
    codes = (win - w0) * n_seg + (seg - s0)
    return codes.astype(np.int16) if (int(win.max()) - w0 + 1) * n_seg < 2**15 else codes


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
    arrays = {
        n: np.asarray(t.column(n).to_numpy(zero_copy_only=False), dtype=np.float64) for n in names
    }
    weights = None
    if judge:
        pi = np.asarray(t.column("judge_pi").to_numpy(zero_copy_only=False), dtype=np.float64)
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
    idx = np.asarray(enc.indices.fill_null(-1).to_numpy(zero_copy_only=False), dtype=np.int64)
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
    start = np.asarray(t.column("t").to_numpy(zero_copy_only=False), dtype=np.int64)
    age_s = np.maximum(current_start_ns - start, 0).astype(np.float64) / 1e9
    out: list[ColumnWindow] = []
    for _, label, (r, c) in _slices(t, segments):
        ref_age = age_s[r]
        for n in names:
            codes, cats = coded[n]
            rc, cc = codes[r], codes[c]
            k = len(cats)
            # one pass per window: slot 0 counts the nulls (code -1), slot 1 + i category i
            r_all = np.bincount(rc + 1, minlength=k + 1)
            c_all = np.bincount(cc + 1, minlength=k + 1)
            r_counts, c_counts = r_all[1:], c_all[1:]
            out.append(
                ColumnWindow(
                    n,
                    "categorical",
                    label,
                    reference_counts={cats[i]: int(v) for i, v in enumerate(r_counts) if v},
                    current_counts={cats[i]: int(v) for i, v in enumerate(c_counts) if v},
                    reference_nulls=int(r_all[0]),
                    current_nulls=int(c_all[0]),
                    reference_codes=rc,
                    current_codes=cc,
                    categories=cats,
                    reference_age_s=ref_age,
                )
            )
    return out
