"""OTLP log records joined to their span's call record, whichever arrives first.

A gen_ai content record passes the tenant's capture policy (drop or redact) on arrival and is
kept in ``gen_ai_log_events``; whenever its span is written (first time or re-sent by a
retrying exporter), the writer's before-write hook (:meth:`LogJoiner.before_write`) lays the
records over the span (:func:`overlay`) and the call record is derived from the result in the
same transaction. When the span is already stored, :meth:`LogJoiner.ingest` hands it back to
the writer so that the same hook runs. Re-sent records upsert (keyed by a digest) and overlaying
is idempotent.

Redaction counts: each record keeps the count the capture policy made in it; a call record's
``redactions`` is its span's own count plus those of its records, whichever arrived first. A
span written afresh brings its own count (:func:`~collector.ingest.prepare.prepare`); a stored
span re-written for late records does not (its stored text is already redacted), so its call's
stored count is kept and the records not yet in it (``counted`` false) are added, in the
writer's transaction. A re-sent record keeps its ``counted`` mark, so it is never added twice.
Evaluation results are upserted into ``external_scores``.
"""

from __future__ import annotations

import hashlib
import math
import threading
import time
from collections.abc import Iterable
from concurrent.futures import Future
from dataclasses import dataclass, replace
from typing import Any, cast

import orjson
from sqlalchemy import Connection, Engine, Table, select, tuple_, update
from sqlalchemy.dialects import postgresql, sqlite
from sqlalchemy.exc import DBAPIError

from collector.errors import BadRequestError, StoreUnavailableError
from collector.ingest.capture import apply_policy
from collector.ingest.logs import DETAILS_EVENT, Evaluation, LogBatch
from collector.ingest.normalize import extract
from collector.ingest.prepare import Item
from collector.ingest.values import evaluation_text_error, time_error, to_float
from collector.ingest.writer import BatchWriter
from collector.store import bulk
from collector.store.failures import is_transient
from collector.store.models.logs import GenAILogEvent
from collector.store.schema import SpanData
from collector.store.scores import insert_scores, link

LOG_EVENTS = cast(Table, GenAILogEvent.__table__)
Key = tuple[str, str]


def _add(a: int | None, b: int | None) -> int | None:
    """Sum of two redaction counts; None (not scanned) only when both are."""
    return None if a is None and b is None else (a or 0) + (b or 0)


def _digest(*parts: Any) -> str:
    return hashlib.sha256(orjson.dumps(parts, option=orjson.OPT_SORT_KEYS)).hexdigest()


def overlay(span: SpanData, events: Iterable[dict[str, Any]]) -> SpanData:
    """``span`` with its log records laid over it: the attributes of an operation-details
    record fill the span's missing attributes (semconv: it carries the span's attribute set);
    other records are appended as span events unless one of the same name and time is there."""
    attrs = dict(span.attributes)
    evs = list(span.events)
    seen = {(e.get("name"), e.get("time_unix_nano")) for e in evs}
    for ev in events:
        if ev.get("name") == DETAILS_EVENT:
            for k, v in (ev.get("attributes") or {}).items():
                attrs.setdefault(k, v)
            continue
        key = (ev.get("name"), ev.get("time_unix_nano"))
        if key not in seen:
            seen.add(key)
            evs.append(ev)
    return replace(span, attributes=attrs, events=evs)


def policy_events(events: list[dict[str, Any]], mode: str) -> list[dict[str, Any]]:
    """The content records as they may be stored under the capture ``mode``."""
    return policy_events_counted(events, mode)[0]


def policy_events_counted(
    events: list[dict[str, Any]], mode: str
) -> tuple[list[dict[str, Any]], int | None]:
    """:func:`policy_events` and the number of redactions made (None when nothing was scanned:
    ``full`` or ``none``)."""
    if mode == "full" or not events:
        return events, None
    carrier = SpanData(
        "0" * 32, "0" * 16, None, "", 0, 0, 0, 0, None, {}, events, [], {}, None, None
    )
    stored, count = apply_policy(carrier, mode)
    return stored.events, count


class LogJoiner:
    """Joins log records to spans for one store; register :meth:`before_write` on the writer."""

    def __init__(self, engine: Engine, max_text_chars: int = 1_000_000) -> None:
        self._engine = engine
        self._max_text_chars = max_text_chars
        self._lock = threading.Lock()
        with engine.connect() as conn:
            self._tenants = {r[0] for r in conn.execute(select(LOG_EVENTS.c.tenant).distinct())}

    def before_write(self, conn: Connection, tenant: str, items: list[Item]) -> list[Item]:
        """Lay the stored log records over the LLM spans of ``items``."""
        if tenant not in self._tenants:
            return items
        keys = [(i.span.trace_id, i.span.span_id) for i in items if i.extract is not None]
        found = stored_events(conn, tenant, keys)
        if not found:
            return items
        rewrites = {(i.span.trace_id, i.span.span_id) for i in items if i.rewrite}
        current = _call_redactions(conn, tenant, [k for k in found if k in rewrites])
        out = []
        for it in items:
            key = (it.span.trace_id, it.span.span_id)
            if key not in found:
                out.append(it)
                continue
            records = found[key]
            span = overlay(it.span, [r.event for r in records])
            if it.rewrite:  # the stored count, plus the records not yet in it
                red = current.get(key)
                new = [r.redactions for r in records if not r.counted]
            else:  # the span's own count, plus all its records
                red = it.extract.redactions if it.extract is not None else None
                new = [r.redactions for r in records]
            for n in new:
                red = _add(red, n)
            ex = extract(span, max_text_chars=self._max_text_chars, redactions=red)
            out.append(replace(it, span=span, extract=ex))
        _mark_counted(
            conn, tenant, [k for k, recs in found.items() if any(not r.counted for r in recs)]
        )
        return out

    def ingest(self, tenant: str, batch: LogBatch, mode: str, writer: BatchWriter) -> Future[int]:
        """Store the batch's records (one transaction), then re-write the spans already stored
        through ``writer`` so that the join runs; the future resolves after that commit.

        Records the store cannot hold are rejected first (:func:`reject_unstorable`: counted in
        ``batch.rejected`` with their reason); on PostgreSQL U+0000 is stored as U+FFFD
        (:func:`for_postgres`). A batch left with nothing to store writes nothing.

        Raises:
            StoreUnavailableError: the store is down (503). BadRequestError: it refused them
            (its ``__cause__`` is the driver's error). QueueFullError: the writer's queue is full.
        """
        reject_unstorable(batch)
        received = time.time_ns()
        rows: list[dict[str, Any]] = []
        for trace_id, span_id, ev in batch.content:
            (stored,), count = policy_events_counted([ev], mode)
            rows.append(
                {
                    "tenant": tenant,
                    "trace_id": trace_id,
                    "span_id": span_id,
                    "event_key": _digest(trace_id, span_id, ev),
                    "event": stored,
                    "received_unix_nano": received,
                    "redactions": count,
                    "counted": False,
                }
            )
        scores = [_score_row(e, received) for e in batch.evaluations]
        if self._engine.dialect.name == "postgresql":  # text and jsonb cannot hold U+0000
            rows, scores = for_postgres(rows), for_postgres(scores)
        keys = sorted({(r["trace_id"], r["span_id"]) for r in rows})
        if not rows and not scores:
            return writer.submit(tenant, [])  # resolved: nothing to store
        if rows:
            with self._lock:
                self._tenants.add(tenant)
        try:
            with self._engine.begin() as conn:
                if rows:
                    _upsert_records(conn, list({r["event_key"]: r for r in rows}.values()))
                if scores:  # idempotent: a re-sent record keeps the stored score
                    insert_scores(conn, tenant, [link(conn, tenant, s) for s in scores])
                spans = bulk.load_spans(conn, tenant, keys) if keys else {}
        except DBAPIError as exc:
            if is_transient(exc):
                raise StoreUnavailableError(f"the store is unavailable: {exc.orig}") from exc
            raise BadRequestError(f"the log records could not be stored: {exc.orig}") from exc
        items = [
            Item(s, extract(s, max_text_chars=self._max_text_chars), rewrite=True)
            for s in spans.values()
        ]
        return writer.submit(tenant, [i for i in items if i.extract is not None])


def _score_row(e: Evaluation, received: int) -> dict[str, Any]:
    """The ``external_scores`` row of an evaluation record (a non-finite score is unknown:
    NULL, never 0)."""
    value = to_float(e.score_value)
    return {
        "score_id": _digest(e.trace_id, e.span_id, e.response_id, e.name, e.time_unix_nano),
        "trace_id": e.trace_id,
        "span_id": e.span_id,
        "response_id": e.response_id,
        "session_id": None,
        "name": e.name,
        "data_type": "numeric" if value is not None else "categorical",
        "value": value,
        "label": e.score_label,
        "comment": e.explanation,
        "source": "otel_event",
        "evaluator": None,
        "attributes": e.attributes,
        "timestamp_unix_nano": e.time_unix_nano or received,
    }


def _evaluation_error(e: Evaluation) -> str | None:
    what = f"evaluation {e.name[:64]!r}"
    texts = {"name": e.name, "score_label": e.score_label, "response_id": e.response_id}
    return time_error(what, e.time_unix_nano) or evaluation_text_error(what, texts)


def reject_unstorable(batch: LogBatch) -> None:
    """Drop from ``batch`` (in place) the records no store can hold, each counted in
    ``batch.rejected`` with its reason: a time at or past 2**63 ns (OTLP's times are unsigned
    64-bit, the store's signed) and an evaluation name, label or response id longer than its
    column (128, 128, 512 characters: rejected rather than truncated, since they identify).
    The receivers reject them already (:func:`collector.ingest.logs.add_record`); this keeps
    records spooled by an older receiver from reaching the store."""
    kept = []
    for e in batch.evaluations:
        error = _evaluation_error(e)
        if error is None:
            kept.append(e)
        else:
            batch.reject(error)
    batch.evaluations = kept
    content = []
    for trace_id, span_id, ev in batch.content:
        t = ev.get("time_unix_nano")
        error = time_error(f"{ev.get('name')} record of span {span_id}", t) if t else None
        if error is None:
            content.append((trace_id, span_id, ev))
        else:
            batch.reject(error)
    batch.content = content


def for_postgres(value: Any) -> Any:
    """``value`` (str, float, dict, list; others as they are) as PostgreSQL can hold it: every
    U+0000 in its strings and keys replaced by U+FFFD (text and jsonb cannot hold NUL; as
    :mod:`collector.store.bulk` does for spans; replaced rather than stripped, so that the text
    shows where it was) and a non-finite float as None (jsonb has no NaN or infinity)."""
    if isinstance(value, str):
        return value.replace("\x00", "\ufffd") if "\x00" in value else value
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if isinstance(value, dict):
        return {for_postgres(k): for_postgres(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [for_postgres(v) for v in value]
    return value


@dataclass(frozen=True, slots=True)
class StoredRecord:
    """A stored content record: the event, its redaction count (None: not scanned) and whether
    that count is already in its call record's."""

    event: dict[str, Any]
    redactions: int | None
    counted: bool


def stored_events(conn: Connection, tenant: str, keys: list[Key]) -> dict[Key, list[StoredRecord]]:
    """Stored log records of these spans, in event-time order, by (trace_id, span_id)."""
    t = LOG_EVENTS
    out: dict[Key, list[StoredRecord]] = {}
    for i in range(0, len(keys), bulk.CHUNK):
        chunk = keys[i : i + bulk.CHUNK]
        rows = conn.execute(
            select(t.c.trace_id, t.c.span_id, t.c.event, t.c.redactions, t.c.counted)
            .where(t.c.tenant == tenant, tuple_(t.c.trace_id, t.c.span_id).in_(chunk))
            .order_by(t.c.received_unix_nano)
        )
        for trace_id, span_id, event, count, counted in rows:
            out.setdefault((trace_id, span_id), []).append(
                StoredRecord(event, count, bool(counted))
            )
    for recs in out.values():
        recs.sort(key=lambda r: r.event.get("time_unix_nano") or 0)
    return out


def _upsert_records(conn: Connection, rows: list[dict[str, Any]]) -> None:
    """Insert content records; a re-sent one (same key) updates its event and count but keeps
    its ``counted`` mark (so its count is never added to its call's twice)."""
    dialect = postgresql if conn.dialect.name == "postgresql" else sqlite
    stmt = dialect.insert(LOG_EVENTS)
    stmt = stmt.on_conflict_do_update(
        index_elements=[c.name for c in LOG_EVENTS.primary_key.columns],
        set_={
            "event": stmt.excluded.event,
            "received_unix_nano": stmt.excluded.received_unix_nano,
            "redactions": stmt.excluded.redactions,
        },
    )
    conn.execute(stmt, rows)


def _call_redactions(conn: Connection, tenant: str, keys: list[Key]) -> dict[Key, int | None]:
    """The stored ``llm_calls.redactions`` of these spans' calls."""
    t = bulk.CALLS
    out: dict[Key, int | None] = {}
    for i in range(0, len(keys), bulk.CHUNK):
        chunk = keys[i : i + bulk.CHUNK]
        rows = conn.execute(
            select(t.c.trace_id, t.c.span_id, t.c.redactions).where(
                t.c.tenant == tenant, tuple_(t.c.trace_id, t.c.span_id).in_(chunk)
            )
        )
        out.update({(r[0], r[1]): r[2] for r in rows})
    return out


def _mark_counted(conn: Connection, tenant: str, keys: list[Key]) -> None:
    t = LOG_EVENTS
    for i in range(0, len(keys), bulk.CHUNK):
        chunk = keys[i : i + bulk.CHUNK]
        conn.execute(
            update(t)
            .where(t.c.tenant == tenant, tuple_(t.c.trace_id, t.c.span_id).in_(chunk))
            .values(counted=True)
        )


def joined_writer(engine: Engine, prices: Any, settings: Any) -> tuple[BatchWriter, LogJoiner]:
    """The store writer of a collector or spool processor with its log joiner hooked in
    (``before_write``), not started. ``prices``: a ``PriceTable``; ``settings``: the collector's
    ``Settings`` (queue, batch and text limits)."""
    writer = BatchWriter(
        engine,
        prices,
        max_queue_spans=settings.queue_max_spans,
        max_batch_spans=settings.writer_max_batch_spans,
        max_text_chars=settings.max_text_chars,
    )
    joiner = LogJoiner(engine, settings.max_text_chars)
    writer.before_write.append(joiner.before_write)
    return writer, joiner
