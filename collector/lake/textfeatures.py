"""Per-call text features sealed beside the calls, and the reads of a drift run that use them.

A drift run tests two proportions computed from every call's answer text: ``refusal`` (the
refusal heuristic, :func:`drift.textsignals.is_refusal`) and ``empty_output`` (blank answer).
Evaluating them means scanning every captured answer (a regular expression over 1 M answers
took half of a drift run's time), so sealing computes them once per call and stores them as
two boolean columns of the ``calls`` files (``docs/lake.md``); a drift run then reads two
booleans per sealed call instead of its text.

Definitions: :func:`refusal_sql` and :func:`empty_output_sql` are DuckDB expressions over the
answer text, NULL when the text is NULL (not captured). Sealing evaluates exactly these
expressions, and every file records the digest of the definitions it was sealed with
(:data:`DIGEST` under the Parquet key-value metadata key :data:`METADATA_KEY`). A read uses a
file's stored columns only when its digest equals the running version's; files sealed before
the columns existed, or under other marker lists, are evaluated from their text as before, and
the store's unsealed hot tail always is. So an upgrade never changes an answer.

The features are the drift-signal registry's ``feature`` signals
(:mod:`collector.lake.driftsignals`); their rules and the refusal marker lists live in
:mod:`collector.lake.textrules` (re-exported here), which :mod:`drift.textsignals` applies in
Python.
"""

from __future__ import annotations

import functools
import hashlib
import threading
from collections.abc import Sequence

import duckdb
import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from collector.lake import driftsignals, manifest, query
from collector.lake.layout import FEATURE_COLUMNS, Lake
from collector.lake.textrules import (  # noqa: F401 (the rules' public home for callers)
    FIRST_PERSON,
    REFUSAL_MARKERS,
    REFUSAL_WINDOW_CHARS,
    REQUEST_WORDS,
    empty_output_sql,
    refusal_sql,
)
from collector.store import analytics, arrowfetch
from collector.store.arrowfetch import FETCH_SLICES

#: Parquet key-value metadata key holding the digest of the definitions a file was sealed with
METADATA_KEY = b"driftline.text_features"


@functools.cache
def feature_sql(name: str, text_column: str = "output_text") -> str:
    """The DuckDB expression of feature ``name`` (one of :data:`FEATURE_COLUMNS`); built once
    per argument pair (the marker lists are constants)."""
    feature = driftsignals.get(name).feature
    assert feature is not None, name  # FEATURE_COLUMNS are the registry's feature signals
    return feature(text_column)


#: digest of the definitions (changes whenever a marker list or an expression changes)
DIGEST: bytes = (
    hashlib.sha256("\n".join(feature_sql(n) for n in FEATURE_COLUMNS).encode())
    .hexdigest()[:16]
    .encode()
)


def compute(table: pa.Table, con: duckdb.DuckDBPyConnection | None = None) -> pa.Table:
    """``table`` (with an ``output_text`` column) plus the :data:`FEATURE_COLUMNS` (bool),
    rows in the same order."""
    own = con is None
    c = duckdb.connect() if con is None else con
    try:
        c.register("_tf_in", table.select(["output_text"]))
        sql = ", ".join(f"{feature_sql(n)} AS {n}" for n in FEATURE_COLUMNS)
        feats = c.sql(f"SELECT {sql} FROM _tf_in").to_arrow_table()
        c.unregister("_tf_in")
    finally:
        if own:
            c.close()
    for n in FEATURE_COLUMNS:
        table = table.append_column(pa.field(n, pa.bool_()), feats.column(n).cast(pa.bool_()))
    return table


#: :func:`fresh` answers by file identity (size, modification time, inode / ETag): a sealed
#: file is replaced by a rename, never written in place, so an unchanged identity is an
#: unchanged footer; bounded, oldest out
_FRESH: dict[tuple[object, ...], bool] = {}
_FRESH_MAX = 65_536
_FRESH_LOCK = threading.Lock()


def fresh(lake: Lake, path: str) -> bool:
    """Whether the sealed file at ``path`` holds the feature columns of the running definitions
    (one footer read; then remembered while the file's identity, one ``stat`` / ``HEAD``, is
    unchanged).

    Raises:
        FileNotFoundError: no file at ``path``.
    """
    ident = query._file_identity(lake, path)
    if ident is not None:
        with _FRESH_LOCK:
            known = _FRESH.get(ident)
        if known is not None:
            return known
    with lake.fs.open(path, "rb") as fh:
        meta = pq.read_metadata(fh).metadata or {}
    ok = meta.get(METADATA_KEY) == DIGEST
    if ident is not None:
        with _FRESH_LOCK:
            if len(_FRESH) >= _FRESH_MAX:
                del _FRESH[next(iter(_FRESH))]
            _FRESH[ident] = ok
    return ok


def _schema(names: Sequence[str]) -> pa.Schema:
    plain = [n for n in names if n not in FEATURE_COLUMNS]
    by_name = {f.name: f for f in analytics.call_schema(plain)}
    return pa.schema([by_name.get(n, pa.field(n, pa.bool_())) for n in names])


def read_windows_schema(names: Sequence[str]) -> pa.Schema:
    """Arrow schema of :func:`read_windows` of ``names``: ``names`` as read, then ``win``."""
    return _schema(names).append(pa.field("win", pa.int8()))


def _check(names: Sequence[str]) -> None:
    plain = [n for n in names if n not in FEATURE_COLUMNS]
    unknown = [n for n in plain if n not in analytics.CALLS.c or n == "tenant"]
    if unknown or not names:
        raise ValueError(f"columns: need llm_calls columns other than tenant, got {unknown}")


def tail_with_features(table: pa.Table, names: Sequence[str]) -> pa.Table:
    """``names`` of ``table`` (store rows read with ``output_text`` when a feature is asked
    for), the features computed from the text."""
    if any(n in FEATURE_COLUMNS for n in names):
        table = compute(table)
    return table.select(list(names))


def store_names(names: Sequence[str]) -> list[str]:
    """The store columns to read for ``names``: features replaced by ``output_text``."""
    plain = [n for n in names if n not in FEATURE_COLUMNS]
    if len(plain) < len(names) and "output_text" not in plain:
        plain.append("output_text")
    return plain


def read_windows(
    database_url: str,
    lake: Lake | None,
    tenant: str,
    windows: Sequence[tuple[int, int]],
    columns: Sequence[str],
) -> pa.Table:
    """:func:`collector.lake.query.read_windows` (sealed hours from the lake, the hot tail from
    the store, each call once, plus ``int8`` ``win``) where ``columns`` may also name
    :data:`FEATURE_COLUMNS` (bool, NULL without captured text): read from the sealed files that
    hold them under the running definitions, computed from ``output_text`` elsewhere.

    Raises:
        ValueError: an unknown column, ``tenant`` among them, or ``until_ns < since_ns``.
    """
    names = list(columns)
    _check(names)
    for lo, hi in windows:
        analytics.validate_range(lo, hi)
    schema = _schema(names)
    feats = [n for n in names if n in FEATURE_COLUMNS]
    plain = [n for n in names if n not in FEATURE_COLUMNS]
    hours = list(manifest.load(lake, tenant).hours) if lake is not None else []
    parts = []
    for i, (lo, hi) in enumerate(windows):
        sealed = query.overlapping(hours, lo, hi)
        pieces = []
        if sealed and lake is not None:
            paths = [lake.data_path("calls", tenant, h) for h in sealed]
            new = [p for p in paths if not feats or fresh(lake, p)]
            old = [p for p in paths if p not in new]
            where = "start_unix_nano >= ? AND start_unix_nano < ?"
            cols = ", ".join(f'"{n}"' for n in plain)
            for group, exprs in ((new, feats), (old, [f"{feature_sql(n)} AS {n}" for n in feats])):
                if group:
                    sel = ", ".join(x for x in (cols, ", ".join(exprs)) if x)
                    t = query.read_files(lake, group, sel, where=where, params=[lo, hi])
                    pieces.append(arrowfetch.conform(t.select(names), schema))
            rest = query.complement(lo, hi, sealed)
            if rest:
                tail = analytics.fetch_windows(database_url, tenant, store_names(names), rest, {})
                pieces.append(arrowfetch.conform(tail_with_features(tail, names), schema))
        else:
            tail = analytics.fetch_sliced(
                database_url, tenant, store_names(names), lo, hi, {}, FETCH_SLICES
            )
            pieces.append(arrowfetch.conform(tail_with_features(tail, names), schema))
        t = pa.concat_tables(pieces)
        parts.append(t.append_column("win", pa.array(np.full(t.num_rows, i, dtype=np.int8))))
    if not parts:
        return schema.append(pa.field("win", pa.int8())).empty_table()
    return pa.concat_tables(parts)


#: schema of the sample keys a text read looks up
KEYS_SCHEMA = pa.schema([("win", pa.int8()), ("trace_id", pa.string()), ("span_id", pa.string())])


def texts_schema(columns: Sequence[str]) -> pa.Schema:
    """Arrow schema of :func:`read_texts` of ``columns``."""
    return pa.schema([*KEYS_SCHEMA, *(pa.field(c, pa.string()) for c in columns)])


def _key_filter(i: int, columns: Sequence[str]) -> tuple[str, str]:
    """(select list, semi-join condition on the table ``_tf_keys``) of window ``i``'s texts."""
    sel = f"CAST({i} AS TINYINT) AS win, trace_id, span_id, " + ", ".join(columns)
    return sel, "(trace_id, span_id) IN (SELECT (trace_id, span_id) FROM _tf_keys)"


def tail_texts(
    database_url: str,
    tenant: str,
    i: int,
    rest: Sequence[arrowfetch.Window],
    keys: pa.Table,
    columns: Sequence[str],
    schema: pa.Schema,
) -> pa.Table:
    """Texts of the calls in ``keys`` read from the store's windows ``rest`` of window ``i``."""
    tail = analytics.fetch_windows(
        database_url, tenant, ["trace_id", "span_id", *columns], rest, {}
    )
    sel, cond = _key_filter(i, columns)
    con = duckdb.connect()
    try:
        con.register("_tf_tail", tail)
        con.register("_tf_keys", keys)
        t = con.sql(f"SELECT {sel} FROM _tf_tail WHERE {cond}").to_arrow_table()
    finally:
        con.close()
    return arrowfetch.conform(t, schema)


def read_texts(
    database_url: str,
    lake: Lake | None,
    tenant: str,
    windows: Sequence[tuple[int, int]],
    keys: pa.Table,
    columns: Sequence[str],
) -> pa.Table:
    """The text ``columns`` (``input_text`` / ``output_text``) of the calls named in ``keys``
    (``win``, ``trace_id``, ``span_id``; :data:`KEYS_SCHEMA`), each call read where
    :func:`read_windows` reads it: a drift run's text sample without reading every text into
    memory (sealed hours: a DuckDB semi-join inside the Parquet scan). ``keys`` may also hold
    each call's ``start_unix_nano`` (int64, no nulls): a sealed hour's scan then keeps only the
    calls that started at one of those times before it compares ids.

    Returns:
        ``win``, ``trace_id``, ``span_id``, ``columns`` (:func:`texts_schema`): one row per key
        found, in no particular order.

    Raises:
        ValueError: a column that is not a text column.
    """
    cols = list(columns)
    if not cols or any(c not in ("input_text", "output_text") for c in cols):
        raise ValueError(f"columns: input_text / output_text, got {cols}")
    with_start = (
        "start_unix_nano" in keys.column_names and keys.column("start_unix_nano").null_count == 0
    )
    if with_start:
        keys = keys.select([*KEYS_SCHEMA.names, "start_unix_nano"]).cast(
            KEYS_SCHEMA.append(pa.field("start_unix_nano", pa.int64()))
        )
    else:
        keys = keys.select(KEYS_SCHEMA.names).cast(KEYS_SCHEMA)
    at_start = (
        " AND start_unix_nano IN (SELECT start_unix_nano FROM _tf_keys)" if with_start else ""
    )
    schema = texts_schema(cols)
    hours = list(manifest.load(lake, tenant).hours) if lake is not None else []
    parts = []
    for i, (lo, hi) in enumerate(windows):
        mine = keys.filter(pc.equal(keys.column("win"), i))
        if mine.num_rows == 0:
            continue
        sealed = query.overlapping(hours, lo, hi) if lake is not None else []
        if sealed and lake is not None:
            sel, cond = _key_filter(i, cols)
            paths = [lake.data_path("calls", tenant, h) for h in sealed]
            t = query.read_files(
                lake,
                paths,
                sel,
                where=f"start_unix_nano >= ? AND start_unix_nano < ?{at_start} AND {cond}",
                params=[lo, hi],
                tables={"_tf_keys": mine},
            )
            parts.append(arrowfetch.conform(t, schema))
        rest = query.complement(lo, hi, sealed)
        if rest:
            parts.append(tail_texts(database_url, tenant, i, rest, mine, cols, schema))
    if not parts:
        return schema.empty_table()
    return pa.concat_tables(parts)
