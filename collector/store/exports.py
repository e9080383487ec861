"""Streamed exports of calls, traces and feedback as JSON Lines, CSV or Parquet.

Rows are read page by page (the API's cursor pages for calls and traces, a server-side cursor
for feedback), so memory stays bounded by one page whatever the export's size. The same
writers serve ``driftline export`` and the dashboard's download button.

Formats: ``jsonl`` (one JSON object per line, nested fields as JSON), ``csv`` (RFC 4180 via
:mod:`csv`; lists and objects as JSON text; null as an empty cell), ``parquet`` (pyarrow, one
row group per page; column types from the store's schema; the call record's string lists
``finish_reasons`` and ``flags`` as ``list<string>``, other nested fields as JSON text).

CSV only: a text cell that a spreadsheet would run as a formula is written with a leading ``'``
(OWASP "CSV Injection"), so ``=HYPERLINK(...)`` shows as text: one that starts with a tab or a
carriage return, or whose first character after any leading whitespace and control/format
characters (spaces, newlines, NUL, zero-width space, ...) is one of ``= + - @ | ;`` or their
full-width forms ``＝ ＋ － ＠ ｜ ；`` (spreadsheets skip the blanks and read full-width signs as
the ASCII ones). Span names, prompts and user ids come from clients.
Numbers are written as they are (``-1.5`` stays a number); JSON Lines and Parquet are the data
unchanged.
"""

from __future__ import annotations

import csv
import io
import unicodedata
from collections.abc import Callable, Iterable, Iterator
from typing import IO, Any

import orjson
import pyarrow as pa
import pyarrow.parquet as pq
from sqlalchemy import BigInteger, Engine, Float, Integer, select

from collector.store import queries, traces
from collector.store.models import LLMCall
from collector.store.models.api import Feedback

FORMATS = ("jsonl", "csv", "parquet")
KINDS = ("calls", "traces", "feedback")
PAGE = 1000
#: first characters with which a spreadsheet reads a CSV cell as a formula (OWASP, "CSV
#: Injection"); such text cells are written with a leading ``'``
FORMULA_START = ("=", "+", "-", "@", "\t", "\r")
#: characters that start a formula when they are the first one after leading blanks
#: (:func:`formula_like`): the ASCII signs, ``|`` (DDE) and ``;``, and their full-width forms
FORMULA_CHARS = frozenset("=+-@|;\uff1d\uff0b\uff0d\uff20\uff5c\uff1b")
#: JSON columns holding a list of strings, written to Parquet as ``list<string>``
#: (``finish_reasons``: null when unknown, never empty; ``flags``: ``[]`` when none)
STRING_LISTS = frozenset({"finish_reasons", "flags"})


def _arrow_type(col: Any) -> pa.DataType:
    if col.name in STRING_LISTS:
        return pa.list_(pa.string())
    if isinstance(col.type, BigInteger | Integer):
        return pa.int64()
    if isinstance(col.type, Float):
        return pa.float64()
    return pa.string()


def _schema(table: Any, extra: tuple[str, ...] = ()) -> pa.Schema:
    fields = [pa.field(c.name, _arrow_type(c)) for c in table.columns]
    return pa.schema(fields + [pa.field(e, pa.string()) for e in extra])


TRACE_FIELDS: tuple[tuple[str, pa.DataType], ...] = (
    ("trace_id", pa.string()),
    ("started_at", pa.string()),
    ("start_unix_nano", pa.int64()),
    ("duration_s", pa.float64()),
    ("root_kind", pa.string()),
    ("root_label", pa.string()),
    ("services", pa.string()),
    ("session_id", pa.string()),
    ("user_id", pa.string()),
    ("spans", pa.int64()),
    ("llm_calls", pa.int64()),
    ("input_tokens", pa.int64()),
    ("output_tokens", pa.int64()),
    ("cost_usd", pa.float64()),
    ("errors", pa.int64()),
    ("latency_s", pa.float64()),
)
SCHEMAS: dict[str, pa.Schema] = {
    "calls": _schema(LLMCall.__table__, ("started_at", "ended_at")),
    "traces": pa.schema([pa.field(n, t) for n, t in TRACE_FIELDS]),
    "feedback": pa.schema(
        [f for f in _schema(Feedback.__table__) if f.name not in ("received_at", "linked_at")]
    ),
}


def iter_calls(
    engine: Engine, tenant: str, flt: queries.CallFilter
) -> Iterator[list[dict[str, Any]]]:
    """Pages of call records (newest first) matching ``flt``."""
    cursor = None
    while True:
        with engine.connect() as conn:
            items, cursor = queries.list_calls(conn, tenant, flt, limit=PAGE, cursor=cursor)
        if items:
            yield items
        if cursor is None:
            return


def iter_traces(
    engine: Engine, tenant: str, flt: traces.TraceFilter
) -> Iterator[list[dict[str, Any]]]:
    """Pages of trace summaries (newest first), flattened (``root_kind``, ``root_label``)."""
    cursor = None
    while True:
        with engine.connect() as conn:
            items, cursor = traces.list_traces(conn, tenant, flt, limit=200, cursor=cursor)
        page = []
        for it in items:
            root = it.pop("root") or {}
            it["root_kind"], it["root_label"] = root.get("kind"), root.get("label")
            page.append(it)
        if page:
            yield page
        if cursor is None:
            return


def iter_feedback(
    engine: Engine,
    tenant: str,
    *,
    since_unix_nano: int | None = None,
    until_unix_nano: int | None = None,
) -> Iterator[list[dict[str, Any]]]:
    """Pages of feedback events (oldest first), read with a server-side cursor."""
    f = Feedback.__table__
    cols = [c for c in f.columns if c.name not in ("received_at", "linked_at")]
    q = select(*cols).where(f.c.tenant == tenant).order_by(f.c.timestamp_unix_nano, f.c.feedback_id)
    if since_unix_nano is not None:
        q = q.where(f.c.timestamp_unix_nano >= since_unix_nano)
    if until_unix_nano is not None:
        q = q.where(f.c.timestamp_unix_nano < until_unix_nano)
    with engine.connect() as conn:
        result = conn.execution_options(yield_per=PAGE).execute(q).mappings()
        for part in result.partitions():
            yield [dict(r) for r in part]


def _flat(value: Any) -> Any:
    return orjson.dumps(value).decode() if isinstance(value, dict | list | tuple) else value


def formula_like(text: str) -> bool:
    """Whether a spreadsheet could read ``text`` as a formula: it starts with one of
    :data:`FORMULA_START`, or its first character that is not whitespace nor a control or
    format character (Unicode categories Cc, Cf) is in :data:`FORMULA_CHARS`."""
    if text.startswith(FORMULA_START):
        return True
    for ch in text:
        if ch.isspace() or unicodedata.category(ch) in ("Cc", "Cf"):
            continue
        return ch in FORMULA_CHARS
    return False


def csv_cell(value: Any) -> Any:
    """``value`` as a CSV cell: lists and objects as JSON text; text that
    :func:`formula_like` flags prefixed with ``'`` so no spreadsheet runs it; numbers
    unchanged."""
    value = _flat(value)
    if isinstance(value, str) and formula_like(value):
        return "'" + value
    return value


def _parquet_value(name: str, value: Any) -> Any:
    """``value`` of column ``name`` as its Parquet column takes it (see :data:`STRING_LISTS`)."""
    if name not in STRING_LISTS:
        return _flat(value)
    if name == "finish_reasons" and not value:
        return None  # unknown: the normaliser stores no empty list, older rows might
    return value


def write(
    pages: Iterable[list[dict[str, Any]]],
    kind: str,
    fmt: str,
    out: IO[bytes],
    on_page: Callable[[int], None] | None = None,
) -> int:
    """Write ``pages`` of ``kind`` rows to the binary stream ``out``; returns rows written.

    ``on_page(n)`` is called after each page (progress bars). Columns follow
    :data:`SCHEMAS` ``[kind]`` for every format.

    Raises:
        ValueError: unknown ``kind`` or ``fmt``.
    """
    if kind not in KINDS:
        raise ValueError(f"kind must be one of {', '.join(KINDS)}, got {kind!r}")
    if fmt not in FORMATS:
        raise ValueError(f"format must be one of {', '.join(FORMATS)}, got {fmt!r}")
    schema = SCHEMAS[kind]
    names = schema.names
    total = 0
    writer: Any = None
    text: io.TextIOWrapper | None = None
    if fmt == "parquet":
        writer = pq.ParquetWriter(out, schema)
    elif fmt == "csv":
        text = io.TextIOWrapper(out, encoding="utf-8", newline="", write_through=True)
        writer = csv.writer(text)
        writer.writerow(names)
    try:
        for page in pages:
            if fmt == "jsonl":
                out.write(
                    b"".join(orjson.dumps({k: r.get(k) for k in names}) + b"\n" for r in page)
                )
            elif fmt == "csv":
                writer.writerows([[csv_cell(r.get(k)) for k in names] for r in page])
            else:
                cols = {k: [_parquet_value(k, r.get(k)) for r in page] for k in names}
                writer.write_table(pa.table(cols, schema=schema))
            total += len(page)
            if on_page is not None:
                on_page(len(page))
    finally:
        if fmt == "parquet":
            writer.close()
        elif text is not None:
            text.flush()
            text.detach()
    return total


def to_bytes(pages: Iterable[list[dict[str, Any]]], kind: str, fmt: str) -> bytes:
    """The whole export in memory (dashboard downloads)."""
    buf = io.BytesIO()
    write(pages, kind, fmt, buf)
    return buf.getvalue()
