"""The spool processor: decode, normalise and write what the receivers spooled.

One thread reads records from the spool's committed offset, decodes them (the receivers have
validated them already; invalid spans are dropped again, deterministically), applies each
tenant's capture policy, writes spans through the :class:`~collector.ingest.writer.BatchWriter`
(group commit, joins, after-commit hooks) and log records through the
:class:`~collector.ingest.log_join.LogJoiner`, waits for the store commit, and only then
commits the spool offset. A crash in between re-processes the records: spans and call records
upsert on (tenant, trace_id, span_id), so nothing is duplicated. A store outage stops the
offset; the records are retried until the store is back.

The spool is the appender itself (:class:`~collector.spool.log.Spool`, thread mode) or a
:class:`~collector.spool.reader.SpoolReader` (the processor in a process of its own,
:mod:`collector.spool.worker`). Either way the thread first takes the directory's
``processor.lock`` (waiting while another processor holds it) and keeps the status file
(:mod:`collector.spool.status`) current.
"""

from __future__ import annotations

import logging
import os
import threading
import time
from collections.abc import Callable, Iterable
from concurrent.futures import Future
from pathlib import Path
from typing import Protocol

from collector.errors import BadRequestError
from collector.ingest import decode as codec
from collector.ingest.log_join import LogJoiner
from collector.ingest.logs import decode_logs
from collector.ingest.prepare import prepare
from collector.ingest.writer import BatchWriter
from collector.spool import status as status_file
from collector.spool.log import LOGS_JSON, LOGS_PROTOBUF, TRACES_JSON, Record
from collector.spool.reader import acquire_processor_lock

log = logging.getLogger(__name__)
RETRY_S = 1.0
PRUNE_EVERY_S = 60.0


class SpoolSource(Protocol):
    """What the processor needs of a spool (:class:`~collector.spool.log.Spool` or
    :class:`~collector.spool.reader.SpoolReader`)."""

    dir: Path
    committed: int

    @property
    def unprocessed_bytes(self) -> int: ...

    def read(self, offset: int, max_bytes: int = ...) -> list[Record]: ...

    def wait(self, offset: int, timeout_s: float) -> bool: ...

    def commit(self, offset: int) -> None: ...

    def prune(self, keep_s: float) -> int: ...


def media_of(kind: int) -> str:
    return codec.JSON if kind in (TRACES_JSON, LOGS_JSON) else codec.PROTOBUF


def process(
    records: Iterable[Record],
    *,
    writer: BatchWriter,
    joiner: LogJoiner | None,
    capture_mode: Callable[[str], str],
    max_text_chars: int,
) -> tuple[list[Future[int]], int]:
    """Queue the writes of ``records``; returns their futures and the number of spans.

    Raises:
        QueueFullError / StoreUnavailableError: retry later (nothing is committed).
    """
    futures: list[Future[int]] = []
    spans = 0
    for rec in records:
        media = media_of(rec.kind)
        try:
            if rec.kind in (LOGS_PROTOBUF, LOGS_JSON):
                if joiner is not None:
                    batch = decode_logs(rec.body, media)
                    futures.append(
                        joiner.ingest(rec.tenant, batch, capture_mode(rec.tenant), writer)
                    )
                continue
            decoded = codec.decode(rec.body, media)
        except codec.DecodeError as exc:  # validated on receipt: only a corrupt disk gets here
            log.error("spool record at %d could not be decoded, skipped: %s", rec.end, exc)
            continue
        items, _errors = prepare(decoded.spans, max_text_chars, capture_mode(rec.tenant))
        spans += len(items)
        futures.append(writer.submit(rec.tenant, items))
    return futures, spans


class SpoolProcessor:
    """Drains ``spool`` into the store on a thread of its own (:meth:`start`, :meth:`close`),
    once it holds the directory's ``processor.lock``."""

    def __init__(
        self,
        spool: SpoolSource,
        writer: BatchWriter,
        *,
        joiner: LogJoiner | None,
        capture_mode: Callable[[str], str],
        max_text_chars: int = 1_000_000,
        batch_bytes: int = 4 << 20,
        keep_s: float | None = None,
    ) -> None:
        self.spool = spool
        self._writer = writer
        self._joiner = joiner
        self._capture_mode = capture_mode
        self._max_text_chars = max_text_chars
        self._batch_bytes = batch_bytes
        self._keep_s = keep_s
        self._pruned_at = 0.0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="driftline-spool-proc", daemon=True)
        self.spans_processed = 0
        #: called with the number of spans of each committed batch (metrics)
        self.on_processed: Callable[[int], None] | None = None
        #: receive time of the oldest record not yet committed (None: caught up)
        self.oldest_pending_ns: int | None = None
        self._lock_fd: int | None = None
        self._started_unix = time.time()
        self._status_at = 0.0

    def lag_seconds(self) -> float:
        """Age of the oldest spooled record not yet in the store; 0 when caught up."""
        if self.spool.unprocessed_bytes <= 0:
            return 0.0
        oldest = self.oldest_pending_ns
        if oldest is None:
            head = self.spool.read(self.spool.committed, 1)
            if not head:
                return 0.0
            oldest = head[0].received_unix_nano
        return max(time.time_ns() - oldest, 0) / 1e9

    def start(self) -> None:
        self._thread.start()

    def is_alive(self) -> bool:
        return self._thread.is_alive()

    def describe(self) -> dict[str, object]:
        """For ``/healthz`` (the shape of :meth:`ProcessorSupervisor.describe`): mode, pid
        (None when the thread has stopped), restarts (never), status age (not applicable)."""
        alive = self._thread.is_alive()
        return {
            "mode": "thread",
            "pid": os.getpid() if alive else None,
            "restarts": 0,
            "status_age_s": None,
        }

    def close(self, timeout_s: float = 30.0) -> None:
        """Stop after the batch in hand (what is left stays spooled for the next start)."""
        self._stop.set()
        self._thread.join(timeout_s)

    def _write_status(self, *, idle: bool) -> None:
        now = time.monotonic()
        every = status_file.IDLE_WRITE_EVERY_S if idle else status_file.WRITE_EVERY_S
        if now - self._status_at < every:
            return
        self._status_at = now
        try:
            status_file.write_status(
                self.spool.dir,
                status_file.ProcessorStatus(
                    os.getpid(),
                    self._started_unix,
                    self.spans_processed,
                    self.spool.committed,
                    time.time(),
                ),
            )
        except OSError as exc:
            log.warning("spool status file not written: %s", exc)

    def _run(self) -> None:
        self._lock_fd = acquire_processor_lock(
            self.spool.dir, wait=True, stop=self._stop.is_set, on_wait=log.warning
        )
        if self._lock_fd is None:
            return
        try:
            self._drain()
        finally:
            self._status_at = 0.0
            self._write_status(idle=False)
            os.close(self._lock_fd)  # releases processor.lock

    def _drain(self) -> None:
        while not self._stop.is_set():
            offset = self.spool.committed
            records = self.spool.read(offset, self._batch_bytes)
            if not records:
                self.oldest_pending_ns = None
                self._write_status(idle=True)
                self._prune()
                self.spool.wait(offset, 0.5)
                continue
            self.oldest_pending_ns = records[0].received_unix_nano
            try:
                futures, spans = process(
                    records,
                    writer=self._writer,
                    joiner=self._joiner,
                    capture_mode=self._capture_mode,
                    max_text_chars=self._max_text_chars,
                )
                for fut in futures:
                    try:
                        fut.result()
                    except BadRequestError as exc:  # the store refuses this data: never will
                        log.error("spooled spans refused by the store, skipped: %s", exc)
            except Exception as exc:  # store down, queue full: the offset stays, retry
                log.warning("spool processing at offset %d failed, retrying: %r", offset, exc)
                self._stop.wait(RETRY_S)
                continue
            self.spool.commit(records[-1].end)
            self.spans_processed += spans
            if self.on_processed is not None:
                self.on_processed(spans)
            self._write_status(idle=False)

    def _prune(self) -> None:
        """Delete processed segments past their keep time, at most once a minute."""
        now = time.monotonic()
        if self._keep_s is None or now - self._pruned_at < PRUNE_EVERY_S:
            return
        self._pruned_at = now
        try:
            n = self.spool.prune(self._keep_s)
        except OSError as exc:
            log.warning("spool prune failed: %s", exc)
            return
        if n:
            log.info("spool: %d processed segments older than %.0f s deleted", n, self._keep_s)
