"""The span writer: a bounded queue, one writer thread, group commit.

A receiver calls :meth:`BatchWriter.submit` and waits on the returned future; the future
resolves only after the transaction holding its spans has committed (SQLite: WAL with
``synchronous=FULL``), so an HTTP 200 / gRPC OK means the spans are durable. Re-sent spans
upsert on (tenant, trace_id, span_id) and never duplicate.

:func:`write_batch` also merges a caller's LLM span with its vLLM ``llm_request`` child into
one call record, whichever arrives first (the other half is looked up in the store).
"""

from __future__ import annotations

import collections
import logging
import operator
import threading
import time
from collections.abc import Callable, Sequence
from concurrent.futures import Future
from dataclasses import dataclass

from sqlalchemy import Connection, Engine
from sqlalchemy.exc import DBAPIError

from collector.cost.prices import PriceTable
from collector.errors import BadRequestError, QueueFullError, StoreUnavailableError
from collector.ingest.joins import Key, resolve_calls
from collector.ingest.normalize import CallRecord, Extract, finalize
from collector.ingest.prepare import Item
from collector.store import bulk
from collector.store.failures import is_transient
from collector.store.schema import CALL_COLUMNS, SpanData

log = logging.getLogger(__name__)

#: ``hook(connection, tenant, items) -> items`` run in the write transaction before the spans
#: are written (e.g. joining log records that arrived before their span)
BeforeWrite = Callable[[Connection, str, list["Item"]], list["Item"]]


def _span_row(s: SpanData, tenant: str, role: str | None, received: int) -> tuple[object, ...]:
    """A ``spans`` row in ``SPAN_COLUMNS`` order."""
    return (
        tenant,
        s.trace_id,
        s.span_id,
        s.parent_span_id,
        s.name,
        s.kind,
        s.service_name,
        s.scope_name,
        s.scope_version,
        s.start_unix_nano,
        s.end_unix_nano,
        s.status_code,
        s.status_message,
        s.attributes,
        s.resource_attributes,
        s.events,
        s.links,
        role,
        received,
    )


_call_row: Callable[[CallRecord], tuple[object, ...]] = operator.attrgetter(*CALL_COLUMNS)


def write_batch(
    bind: Engine | Connection,
    batches: Sequence[tuple[str, Sequence[Item]]],
    prices: PriceTable,
    *,
    max_text_chars: int = 1_000_000,
    received_unix_nano: int | None = None,
    before_write: Sequence[BeforeWrite] = (),
) -> dict[str, list[CallRecord]]:
    """Write (tenant, items) batches in ONE transaction (an item's own :attr:`Item.tenant`
    overrides its batch's); returns the NEW call records written, by tenant (a record that
    completes a call stored by an earlier batch is written but not returned, so per-call
    metrics count each call once).

    ``bind`` is an engine (a pooled connection per call) or a connection without an open
    transaction (the writer thread's own).

    Raises:
        sqlalchemy.exc.DBAPIError: the database refused the transaction (nothing is written).
    """
    by_tenant: dict[str, list[Item]] = {}
    for tenant, items in batches:
        if any(it.tenant is not None for it in items):
            for it in items:
                by_tenant.setdefault(it.tenant or tenant, []).append(it)
        else:
            by_tenant.setdefault(tenant, []).extend(items)
    received = received_unix_nano or time.time_ns()
    if isinstance(bind, Connection):
        with bind.begin():
            return _write_tenants(bind, by_tenant, prices, max_text_chars, received, before_write)
    with bind.begin() as conn:
        return _write_tenants(conn, by_tenant, prices, max_text_chars, received, before_write)


def _write_tenants(
    conn: Connection,
    by_tenant: dict[str, list[Item]],
    prices: PriceTable,
    max_text_chars: int,
    received: int,
    before_write: Sequence[BeforeWrite] = (),
) -> dict[str, list[CallRecord]]:
    written: dict[str, list[CallRecord]] = {}
    for tenant, items in by_tenant.items():
        for hook in before_write:
            items = hook(conn, tenant, items)
        span_rows: dict[Key, tuple[object, ...]] = {}
        extracts: dict[Key, Extract] = {}
        for it in items:
            key = (it.span.trace_id, it.span.span_id)
            role = it.extract.role if it.extract is not None else None
            span_rows[key] = _span_row(it.span, tenant, role, received)
            if it.extract is not None:
                extracts[key] = it.extract
        calls, deletes, updated = resolve_calls(conn, tenant, extracts, max_text_chars)
        bulk.upsert(conn, bulk.SPANS, list(span_rows.values()))
        finals = {(c.trace_id, c.span_id): finalize(c, tenant=tenant, prices=prices) for c in calls}
        bulk.upsert(conn, bulk.CALLS, [_call_row(r) for r in finals.values()])
        bulk.delete_calls(conn, tenant, [k for k in deletes if k not in finals])
        rw = {(it.span.trace_id, it.span.span_id) for it in items if it.rewrite}
        written[tenant] = [
            r
            for k, r in finals.items()
            if k not in updated and k not in rw and (r.trace_id, r.engine_span_id) not in rw
        ]
    return written


@dataclass(slots=True)
class _Job:
    tenant: str
    items: list[Item]
    future: Future[int]


#: page cache of the writer's own SQLite connection, KiB (SQLite's default: 2 MiB)
WRITER_SQLITE_CACHE_KIB = 65_536
#: WAL pages after which the writer's commit checkpoints (SQLite's default: 1,000 = 4 MiB)
WRITER_SQLITE_AUTOCHECKPOINT_PAGES = 10_000


def writer_connection(engine: Engine) -> Connection:
    """A connection set up like the writer thread's own; pass it to :func:`write_batch` and
    close it when done.

    SQLite: a 64 MiB page cache and a checkpoint every ~40 MiB of WAL. The random trace-id keys
    put every batch's index entries all over the file: with SQLite's defaults each batch
    re-read the index pages from the file and each checkpoint copied them back. Measured on a
    20k-span store, 800 spans per transaction: read() 70 -> 12 KB and write() 52 -> 34 KB per
    span, write_batch CPU 176 -> 144 us per span (mean of 48 batches).
    """
    conn = engine.connect()
    if conn.dialect.name == "sqlite":
        conn.exec_driver_sql(f"PRAGMA cache_size = -{WRITER_SQLITE_CACHE_KIB}")
        conn.exec_driver_sql(f"PRAGMA wal_autocheckpoint = {WRITER_SQLITE_AUTOCHECKPOINT_PAGES}")
        conn.commit()
    return conn


class BatchWriter:
    """Bounded queue in front of :func:`write_batch`, drained by one thread (group commit).

    On SQLite the thread writes through one connection of its own (:func:`writer_connection`),
    kept across batches so that its page cache stays warm: a pooled connection's cache is
    emptied whenever another connection wrote in between. PostgreSQL writes through the pool
    (pre-pinged, so a restarted server is reconnected transparently).

    Args:
        engine: where to write.
        prices: the price table used for ``cost_usd``.
        max_queue_spans: spans waiting (and in flight) before :meth:`submit` refuses.
        max_batch_spans: spans written per transaction at most.
    """

    def __init__(
        self,
        engine: Engine,
        prices: PriceTable,
        *,
        max_queue_spans: int = 200_000,
        max_batch_spans: int = 20_000,
        max_text_chars: int = 1_000_000,
        after_commit: Sequence[Callable[[str, list[CallRecord]], None]] = (),
    ) -> None:
        self._engine = engine
        self._after_commit = list(after_commit)
        self.before_write: list[BeforeWrite] = []
        self._prices = prices
        self._max_queue = max_queue_spans
        self._max_batch = max_batch_spans
        self._max_text_chars = max_text_chars
        self._jobs: collections.deque[_Job] = collections.deque()
        self._queued = 0
        self._cond = threading.Condition()
        self._closing = False
        self._thread: threading.Thread | None = None
        self._conn: Connection | None = None
        self.spans_written = 0
        self.write_seconds_last = 0.0

    @property
    def queued_spans(self) -> int:
        """Spans accepted but not yet committed."""
        return self._queued

    def start(self) -> None:
        self._thread = threading.Thread(target=self._run, name="driftline-writer", daemon=True)
        self._thread.start()

    def submit(self, tenant: str, items: list[Item]) -> Future[int]:
        """Queue spans for writing; the future resolves once they are committed.

        Raises:
            QueueFullError: the queue holds ``max_queue_spans`` already (HTTP 503, retry).
        """
        fut: Future[int] = Future()
        if not items:
            fut.set_result(0)
            return fut
        with self._cond:
            if self._closing:
                raise QueueFullError("the collector is shutting down", retry_after_s=5)
            if self._queued and self._queued + len(items) > self._max_queue:
                raise QueueFullError(
                    f"write queue full ({self._queued} spans waiting)", retry_after_s=1
                )
            self._queued += len(items)
            self._jobs.append(_Job(tenant, items, fut))
            self._cond.notify()
        return fut

    def close(self, timeout_s: float = 30.0) -> None:
        """Stop accepting, write what is queued, and join the thread."""
        with self._cond:
            self._closing = True
            self._cond.notify_all()
        if self._thread is not None:
            self._thread.join(timeout_s)

    def _take(self) -> list[_Job] | None:
        with self._cond:
            while not self._jobs and not self._closing:
                self._cond.wait()
            if not self._jobs:
                return None
            jobs: list[_Job] = []
            n = 0
            while self._jobs and (not jobs or n + len(self._jobs[0].items) <= self._max_batch):
                job = self._jobs.popleft()
                jobs.append(job)
                n += len(job.items)
            return jobs

    def add_after_commit(self, hook: Callable[[str, list[CallRecord]], None]) -> None:
        """Run ``hook(tenant, records)`` after each commit (errors are logged, never raised)."""
        self._after_commit.append(hook)

    def _bind(self) -> Engine | Connection:
        """What the writer thread writes through (see the class docstring)."""
        if self._engine.dialect.name != "sqlite":
            return self._engine
        if self._conn is None:
            self._conn = writer_connection(self._engine)
        return self._conn

    def _drop_connection(self) -> None:
        """Close the thread's own connection (after an error, or when stopping); the next
        batch opens a fresh one."""
        conn, self._conn = self._conn, None
        if conn is not None:
            try:
                conn.invalidate()
                conn.close()
            except Exception:
                log.warning("closing the writer's connection failed", exc_info=True)

    def _write(self, jobs: list[_Job]) -> None:
        try:
            written = write_batch(
                self._bind(),
                [(j.tenant, j.items) for j in jobs],
                self._prices,
                max_text_chars=self._max_text_chars,
                before_write=self.before_write,
            )
        except BaseException:
            self._drop_connection()  # whatever state the failure left it in
            raise
        # hooks run before the acknowledgement so that a client reading after its 200 sees
        # their effects (e.g. feedback linked); they never fail the (committed) write
        for tenant, records in written.items():
            for hook in self._after_commit:
                try:
                    hook(tenant, records)
                except Exception:
                    log.exception("after-commit hook %r failed", hook)
        for j in jobs:
            if not j.future.done():
                j.future.set_result(len(j.items))

    def _run(self) -> None:
        while True:
            jobs = self._take()
            if jobs is None:
                self._drop_connection()
                return
            t0 = time.perf_counter()
            try:
                try:
                    self._write(jobs)
                except Exception as exc:
                    if len(jobs) == 1 or is_transient(exc):
                        raise
                    # isolate the request whose data fails (database refusal, driver
                    # overflow...): the other clients' requests are written on their own
                    for j in jobs:
                        self._write_one(j)
            except Exception as exc:
                self._fail(jobs, exc)
            finally:
                self.write_seconds_last = time.perf_counter() - t0
                n = self._count(jobs)
                with self._cond:
                    self._queued -= n
                self.spans_written += n

    def _write_one(self, job: _Job) -> None:
        try:
            self._write([job])
        except Exception as exc:
            self._fail([job], exc)

    def _fail(self, jobs: list[_Job], exc: Exception) -> None:
        """Resolve the futures of ``jobs`` not yet resolved with the error the caller acts on:
        StoreUnavailableError when the store is down (:func:`is_transient`: retry),
        BadRequestError (its cause the store's error) when it refused the data, else ``exc``."""
        out: Exception = exc
        if isinstance(exc, DBAPIError):
            if is_transient(exc):
                log.error("store unavailable, %d spans not written: %s", self._count(jobs), exc)
                out = StoreUnavailableError(f"the store is unavailable: {exc.orig}")
            else:
                log.error("the store refused %d spans: %s", self._count(jobs), exc)
                out = BadRequestError(f"the spans could not be stored: {exc.orig}")
            out.__cause__ = exc
        elif not is_transient(exc):
            log.error("write of %d spans failed: %r", self._count(jobs), exc)
        for j in jobs:
            if not j.future.done():
                j.future.set_exception(out)

    @staticmethod
    def _count(jobs: list[_Job]) -> int:
        return sum(len(j.items) for j in jobs)
