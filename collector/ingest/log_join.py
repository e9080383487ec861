"""OTLP log records joined to their span's call record, whichever arrives first.

A gen_ai content record passes the tenant's capture policy (drop or redact) on arrival and is
kept in ``gen_ai_log_events``; whenever its span is written (first time or re-sent by a
retrying exporter), the writer's before-write hook (:meth:`LogJoiner.before_write`) lays the
records over the span (:func:`overlay`) and the call record is derived from the result in the
same transaction. When the span is already stored, :meth:`LogJoiner.ingest` hands it back to
the writer so that the same hook runs. Re-sent records upsert (keyed by a digest) and overlaying
is idempotent.
Evaluation results are upserted into ``external_scores``.
"""

from __future__ import annotations

import hashlib
import threading
import time
from collections.abc import Iterable
from concurrent.futures import Future
from dataclasses import replace
from typing import Any, cast

import orjson
from sqlalchemy import Connection, Engine, Table, select, tuple_
from sqlalchemy.exc import DBAPIError, OperationalError

from collector.errors import BadRequestError, StoreUnavailableError
from collector.ingest.capture import apply_policy
from collector.ingest.logs import DETAILS_EVENT, LogBatch
from collector.ingest.normalize import extract
from collector.ingest.prepare import Item
from collector.ingest.writer import BatchWriter
from collector.store import bulk
from collector.store.models.logs import GenAILogEvent
from collector.store.schema import SpanData
from collector.store.scores import insert_scores, link

LOG_EVENTS = cast(Table, GenAILogEvent.__table__)
Key = tuple[str, str]


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
    if mode == "full" or not events:
        return events
    carrier = SpanData(
        "0" * 32, "0" * 16, None, "", 0, 0, 0, 0, None, {}, events, [], {}, None, None
    )
    return apply_policy(carrier, mode)[0].events


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
        out = []
        for it in items:
            key = (it.span.trace_id, it.span.span_id)
            if key not in found:
                out.append(it)
                continue
            span = overlay(it.span, found[key])
            red = it.extract.redactions if it.extract is not None else None
            ex = extract(span, max_text_chars=self._max_text_chars, redactions=red)
            out.append(replace(it, span=span, extract=ex))
        return out

    def ingest(self, tenant: str, batch: LogBatch, mode: str, writer: BatchWriter) -> Future[int]:
        """Store the batch's records (one transaction), then re-write the spans already stored
        through ``writer`` so that the join runs; the future resolves after that commit.

        Raises:
            StoreUnavailableError: the store is down (503). BadRequestError: it refused them.
            QueueFullError: the writer's queue is full (503).
        """
        received = time.time_ns()
        rows = []
        for trace_id, span_id, ev in batch.content:
            (stored,) = policy_events([ev], mode)
            rows.append(
                (tenant, trace_id, span_id, _digest(trace_id, span_id, ev), stored, received)
            )
        scores = [
            {
                "score_id": _digest(e.trace_id, e.span_id, e.response_id, e.name, e.time_unix_nano),
                "trace_id": e.trace_id,
                "span_id": e.span_id,
                "response_id": e.response_id,
                "session_id": None,
                "name": e.name,
                "data_type": "numeric" if e.score_value is not None else "categorical",
                "value": e.score_value,
                "label": e.score_label,
                "comment": e.explanation,
                "source": "otel_event",
                "evaluator": None,
                "attributes": e.attributes,
                "timestamp_unix_nano": e.time_unix_nano or received,
            }
            for e in batch.evaluations
        ]
        keys = sorted({(r[1], r[2]) for r in rows})
        if rows:
            with self._lock:
                self._tenants.add(tenant)
        try:
            with self._engine.begin() as conn:
                bulk.upsert(conn, LOG_EVENTS, list({r[:4]: r for r in rows}.values()))
                if scores:  # idempotent: a re-sent record keeps the stored score
                    insert_scores(conn, tenant, [link(conn, tenant, s) for s in scores])
                spans = bulk.load_spans(conn, tenant, keys) if keys else {}
        except OperationalError as exc:
            raise StoreUnavailableError(f"the store is unavailable: {exc.orig}") from exc
        except DBAPIError as exc:
            raise BadRequestError(f"the log records could not be stored: {exc.orig}") from exc
        items = [
            Item(s, extract(s, max_text_chars=self._max_text_chars), rewrite=True)
            for s in spans.values()
        ]
        return writer.submit(tenant, [i for i in items if i.extract is not None])


def stored_events(
    conn: Connection, tenant: str, keys: list[Key]
) -> dict[Key, list[dict[str, Any]]]:
    """Stored log records of these spans, in arrival order, by (trace_id, span_id)."""
    out: dict[Key, list[dict[str, Any]]] = {}
    for i in range(0, len(keys), bulk.CHUNK):
        chunk = keys[i : i + bulk.CHUNK]
        rows = conn.execute(
            select(LOG_EVENTS.c.trace_id, LOG_EVENTS.c.span_id, LOG_EVENTS.c.event)
            .where(
                LOG_EVENTS.c.tenant == tenant,
                tuple_(LOG_EVENTS.c.trace_id, LOG_EVENTS.c.span_id).in_(chunk),
            )
            .order_by(LOG_EVENTS.c.received_unix_nano)
        )
        for trace_id, span_id, event in rows:
            out.setdefault((trace_id, span_id), []).append(event)
    for evs in out.values():
        evs.sort(key=lambda e: e.get("time_unix_nano") or 0)
    return out
